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
