package testkit

import (
	"testing"
	"time"
)

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	polls := 0
	Eventually(t, "the third poll", func() bool { polls++; return polls == 3 })
	if polls != 3 {
		t.Fatalf("polled %d times, want 3", polls)
	}
}

func TestContextOutlivesTheTestsOwnContext(t *testing.T) {
	ctx := Context(t)
	deadline, ok := ctx.Deadline()
	if !ok || time.Until(deadline) < Deadline-30*time.Second {
		t.Fatalf("deadline %v (set %v), want about %v away", deadline, ok, Deadline)
	}
	t.Cleanup(func() {
		if ctx.Err() != nil {
			t.Error("the context ended before the test's cleanups ran")
		}
	})
}

func TestAReservedPortIsNotHandedOutAgain(t *testing.T) {
	port := FreePort(t)
	if reserve(t, port) {
		t.Fatalf("port %d was reserved twice", port)
	}
	seen := map[int]bool{port: true}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
