package groups

import (
	"testing"
	"time"
)

// closedWithin reports whether ch is closed within d (real time: the groups' own goroutines
// close it).
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// OwnedChanged fires when a group is taken over and when one finishes unloading, so the
// drain waits for Owned to reach 0 without polling it.
func TestOwnedChangedFiresWhenAGroupIsTakenOverAndWhenItUnloads(t *testing.T) {
	e := newEnv(t)
	changed := e.c.OwnedChanged()
	if closedWithin(changed, 50*time.Millisecond) {
		t.Fatal("OwnedChanged fired with no change")
	}
	e.commit(e.c, "g", "", -1, map[int32]int64{0: 1}) // an admin commit takes the group over
	if !closedWithin(changed, 10*time.Second) || e.c.Owned() != 1 {
		t.Fatalf("after a takeover: OwnedChanged not fired or Owned %d, want 1", e.c.Owned())
	}
	for {
		changed = e.c.OwnedChanged() // taken before Owned is read, as the drain does
		if e.c.Owned() == 0 {
			break
		}
		e.c.SetView(2, func(string) bool { return false }) // the view gives every group away
		if !closedWithin(changed, 10*time.Second) {
			t.Fatalf("OwnedChanged did not fire while %d groups unloaded", e.c.Owned())
		}
	}
}
