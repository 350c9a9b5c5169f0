package groups

import "sync"

// OwnedChanged returns a channel closed at the next change of Owned: a group taken over, or
// one that finished unloading. Take it before reading Owned, so no change slips between
// (the SIGTERM drain waits on it for Owned to reach 0).
func (c *Coordinator) OwnedChanged() <-chan struct{} { return c.ownedChanged.wait() }

// notifier wakes everyone waiting on wait at the next notify. Its zero value is ready.
type notifier struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced by notify; guarded by mu
}

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
	}
	n.ch = make(chan struct{})
}
