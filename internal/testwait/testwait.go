// Package testwait is how long a test waits for something to happen, and the helpers that wait
// that long: Eventually (poll a condition), Context (a test's context). It is test support:
// only _test.go files and test harnesses import it.
//
// One bound serves the whole suite, and it is generous on purpose: a test runs on a shared
// two-core machine beside other builds, where an apiserver round trip or a process start can
// take seconds. The bound only decides how long a broken behaviour takes to fail, never
// whether a working one passes; a test that wants a delay seen prints it (t.Logf) instead of
// asserting it. A test that asserts timing derives its bound from what the code computes, or
// asserts the order of events, never a guess at how fast a machine is (docs/testing.md).
package testwait

import (
	"context"
	"testing"
	"time"
)

// Patience is how long Eventually polls before it fails the test, and how long Context lasts.
const Patience = 2 * time.Minute

// Eventually polls cond until it holds, failing the test after Patience. Polls start 10 ms
// apart and back off to 100 ms, so a condition that holds at once costs nothing and a slow
// one does not spin.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyDetail(t, what, func() (bool, string) { return cond(), "" })
}

// EventuallyDetail is Eventually for a condition that also says what it saw: the failure
// prints the detail of the last poll.
func EventuallyDetail(t testing.TB, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	Within(t, what, Patience, cond)
}

// Within is EventuallyDetail with a bound of its own, for a step of a long scenario (the e2e
// suite's) that budgets more than Patience. A bound below Patience is one a loaded machine
// may break: say in a comment what makes it safe.
func Within(t testing.TB, what string, bound time.Duration, cond func() (ok bool, detail string)) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(bound)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			if detail != "" {
				detail = ": " + detail
			}
			t.Fatalf("gave up after %v waiting for %s%s", time.Since(start).Round(time.Millisecond), what, detail)
		}
		time.Sleep(wait)
	}
}

// Context is a context for the test's requests: it ends after Patience, or when the test's
// cleanups are done (unlike t.Context, it still serves the cleanups that use it).
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	t.Cleanup(cancel)
	return ctx
}
