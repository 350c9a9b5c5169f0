package wire

import (
	"container/list"
	"sync"
)

// Budget is a broker-wide allowance of bytes (docs/bounds.md): the bytes of requests being
// read and decoded (Server.RequestBudget), or of answers held until written (a Fetch's
// records). Takers wait in arrival order. A take larger than the whole budget waits until
// nothing else is held and then takes it all, so one oversized request or batch still makes
// progress and the bytes held exceed the limit by at most that one take. A nil *Budget is
// unlimited. Budget is safe for concurrent use.
type Budget struct {
	limit int64

	mu      sync.Mutex
	used    int64      // guarded by mu
	waiters *list.List // of *budgetWaiter, oldest first; guarded by mu
}

type budgetWaiter struct {
	n     int64
	ready chan struct{} // closed once n is taken for it
}

// NewBudget is a budget of limit bytes; limit ≤ 0 is unlimited (nil).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		return nil
	}
	return &Budget{limit: limit, waiters: list.New()}
}

// Limit is the budget's size; 0 when unlimited.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is how many bytes are taken now.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Available is how many bytes are free now (the limit when unlimited is not known: a large
// number).
func (b *Budget) Available() int64 {
	if b == nil {
		return 1 << 62
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.limit-b.used, 0)
}

// Take takes n bytes, waiting in line until they are free (all of the budget, if n is
// larger). It returns what was taken — give exactly that back — or 0 and false when done is
// closed first.
func (b *Budget) Take(n int64, done <-chan struct{}) (int64, bool) {
	if b == nil || n <= 0 {
		return n, true
	}
	n = min(n, b.limit)
	b.mu.Lock()
	if b.waiters.Len() == 0 && b.used+n <= b.limit {
		b.used += n
		b.mu.Unlock()
		return n, true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	el := b.waiters.PushBack(w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, true
	case <-done:
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: hand it on
			b.used -= n
		default:
			b.waiters.Remove(el)
		}
		b.grantLocked()
		b.mu.Unlock()
		return 0, false
	}
}

// TryTake takes n bytes if they are free now and no one waits; it never waits.
func (b *Budget) TryTake(n int64) bool {
	if b == nil || n <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters.Len() > 0 || b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

// Give gives back n bytes taken earlier.
func (b *Budget) Give(n int64) {
	if b == nil || n <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	b.grantLocked()
}

// grantLocked hands freed bytes to the waiters in order, stopping at the first that does not
// fit (so a large take is not starved by smaller ones behind it).
func (b *Budget) grantLocked() {
	for el := b.waiters.Front(); el != nil; el = b.waiters.Front() {
		w := el.Value.(*budgetWaiter)
		if b.used+w.n > b.limit {
			return
		}
		b.used += w.n
		b.waiters.Remove(el)
		close(w.ready)
	}
}
