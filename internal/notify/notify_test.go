package notify

import "testing"

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestAChannelTakenBeforeAChangeIsClosedByIt(t *testing.T) {
	var n Notifier
	before := n.Changed()
	if closed(before) {
		t.Fatal("closed before any change")
	}
	n.Notify()
	if !closed(before) {
		t.Fatal("a waiter taken before the change was not woken")
	}
	after := n.Changed()
	if closed(after) {
		t.Fatal("a channel taken after the change is already closed")
	}
	n.Notify()
	n.Notify() // twice: no double close
	if !closed(after) {
		t.Fatal("the next change did not wake its waiter")
	}
}
