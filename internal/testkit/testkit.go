// Package testkit is what every test shares to wait and to listen: one deadline for
// "eventually", one test context, loopback listeners below 32768. Test support only: tests
// and test-support packages (broker/brokertest, test/kubebrokers, internal/testenv, which
// makes it Gomega's default too) import it, nothing that runs in a cluster. It imports
// nothing of paddock, so any package's tests (broker/wire's included) may use it.
//
// The deadline only decides how long a broken behaviour takes to fail, never whether a
// working one passes on a loaded machine; a test that wants a delay seen prints it. A test
// that asserts timing derives its bound from what the code computes, or asserts the order of
// events, never a guess at how fast a machine is (docs/testing.md).
package testkit

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Deadline bounds every wait of a test: generous, because the machines tests run on are
// shared and loaded; a wait that holds returns as soon as it holds.
const Deadline = 60 * time.Second

// Context is a context for the test's requests: it ends after Deadline, or when the test's
// cleanups are done (unlike t.Context, it still serves the cleanups that use it).
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it holds, failing the test after Deadline. Polls start 10 ms
// apart and back off to 100 ms, so a condition that holds at once costs nothing and a slow
// one (a list from the apiserver) does not spin.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Within(t, what, Deadline, func() (bool, string) { return cond(), "" })
}

// EventuallyDetail is Eventually for a condition that also says what it saw: the failure
// prints the detail of the last poll.
func EventuallyDetail(t testing.TB, what string, cond func() (ok bool, detail string)) {
	t.Helper()
	Within(t, what, Deadline, cond)
}

// Within is EventuallyDetail with a bound of its own, for a step of a long scenario (the e2e
// suite's) that budgets more than Deadline. A bound below Deadline is one a loaded machine
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
			t.Fatalf("timed out after %v waiting for %s%s", time.Since(start).Round(time.Millisecond), what, detail)
		}
		time.Sleep(wait)
	}
}

// Listen listens on a free loopback port below 32768 (the ephemeral range above it is where
// clients' outgoing ports come from). The port is also reserved for the rest of this test
// process (see reserve), so no other test process on the machine picks it for a process of
// its own while this one still uses it.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	for range 200 {
		port := 20000 + rand.IntN(12000)
		if !reserve(t, port) {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			return ln
		}
	}
	t.Fatal("no free loopback port below 32768")
	return nil
}

// FreePort is a loopback port below 32768 that was free a moment ago: for a process that
// binds it itself. Between the moment it is handed out and the moment the process binds it,
// only a program that does not use testkit can take it: every test process reserves the
// ports it hands out (reserve).
func FreePort(t testing.TB) int {
	t.Helper()
	ln := Listen(t)
	_ = ln.Close() // only the port was wanted
	return ln.Addr().(*net.TCPAddr).Port
}

// portLocks is where test processes reserve ports: one file per port, held under an
// exclusive flock by the process that handed the port out.
var portLocks = filepath.Join(os.TempDir(), "paddock-test-ports")

// reservedPorts keeps the reservations' files open (and so their locks held) until the
// process exits; the kernel drops the locks then, however the process ends.
var reservedPorts struct {
	sync.Mutex
	files []*os.File
}

// reserve takes port for this process across every test process on the machine, so that
// FreePort's gap (the port is closed, then a broker process binds it) cannot be filled by a
// port another package's test handed to its own broker: `go test ./...` runs packages in
// parallel, and each picks ports at random from the same range. It answers false when
// another process (or this one) holds the port already. A reservation lasts until the
// process exits: a test's cleanups may stop the process that binds the port after the test
// itself is done, and a package uses a few hundred ports of the twelve thousand.
func reserve(t testing.TB, port int) bool {
	t.Helper()
	if err := os.MkdirAll(portLocks, 0o777); err != nil {
		t.Fatalf("reserving test ports: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(portLocks, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("reserving test port %d: %v", port, err)
	}
	// flock locks belong to the open file, so a second open of the same file by this
	// process conflicts too: no port is handed out twice within a process either.
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false
		}
		t.Fatalf("reserving test port %d: %v", port, err)
	}
	reservedPorts.Lock()
	reservedPorts.files = append(reservedPorts.files, f)
	reservedPorts.Unlock()
	return true
}
