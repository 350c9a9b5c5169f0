// Package notify is the broadcast "something changed" that the broker's owners give their
// readers (the view's snapshot, the partition table, the groups held): a reader takes a
// channel before it reads, and the owner closes that channel at the next change, so no
// change slips between a reader's check and its wait. It imports nothing of paddock, so
// every room (broker/groups and broker/storage included) may use it.
package notify

import "sync"

// Notifier wakes everyone waiting on Changed at the next Notify. Its zero value is ready and
// it is safe for concurrent use.
type Notifier struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by Notify; guarded by mu
}

// Changed returns a channel that Notify closes at the next change.
func (n *Notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// Notify wakes every waiter of Changed.
func (n *Notifier) Notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}
