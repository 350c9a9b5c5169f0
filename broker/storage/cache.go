package storage

import (
	"container/list"
	"sync"
)

// FileCache bounds how many closed-segment files a broker holds open, over every partition it
// leads: closed segments are opened on demand, with their index, and the least recently used
// unreferenced ones are closed once more than the capacity are open. Each log's active segment
// is held open by the log itself and is not counted. So a broker leading P partitions holds at
// most P (active segments) + capacity (closed segments) + the files being read at that instant
// beyond the capacity + a few short-lived ones (fence listings, snapshot and index writes)
// (docs/storage.md, "Open files"). Memory follows the same bound: a cached segment keeps its
// index in memory, 24 bytes per index.interval.bytes of segment.
//
// Entries belong to one Log; a log that stops serving drops its entries, so only a partition's
// leader holds its files open. FileCache is safe for concurrent use.
type FileCache struct {
	capacity int

	mu  sync.Mutex
	m   map[cacheKey]*cachedSegment // guarded by mu
	lru *list.List                  // of *cachedSegment, most recent at the front; guarded by mu
}

// DefaultFileCache is the cache logs use when Options.Cache is nil.
var DefaultFileCache = NewFileCache(256)

// NewFileCache returns a cache holding at most capacity idle closed-segment files (at least 1).
func NewFileCache(capacity int) *FileCache {
	return &FileCache{capacity: max(capacity, 1), m: map[cacheKey]*cachedSegment{}, lru: list.New()}
}

// OpenFiles is how many files the cache holds open now (for metrics and tests).
func (c *FileCache) OpenFiles() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, e := range c.m {
		if e.f != nil {
			n++
		}
	}
	return n
}

type cacheKey struct {
	owner uint64 // Log.id
	name  string // segment file name
}

// cachedSegment is an open segment file and its index. It is reference counted (refs, guarded
// by FileCache.mu): the file is closed when it has left the cache (evicted or forgotten) and
// the last reader released it. A log's active segment is such an entry too, referenced by the
// log and kept out of the cache's map until the segment closes.
type cachedSegment struct {
	key   cacheKey
	ready chan struct{} // closed once f, idx and err are set
	f     File
	idx   *segIndex // immutable once ready (for a closed segment)
	err   error

	refs   int           // guarded by FileCache.mu
	elem   *list.Element // nil when not in the cache; guarded by FileCache.mu
	closed bool          // left the cache for good; guarded by FileCache.mu
}

// acquire returns the entry for key, opening it with open if it is not cached. The caller
// must release it.
func (c *FileCache) acquire(key cacheKey, open func() (File, *segIndex, error)) (*cachedSegment, error) {
	c.mu.Lock()
	if e := c.m[key]; e != nil {
		e.refs++
		c.lru.MoveToFront(e.elem)
		c.mu.Unlock()
		<-e.ready
		if e.err != nil {
			err := e.err
			c.release(e)
			return nil, err
		}
		return e, nil
	}
	e := &cachedSegment{key: key, ready: make(chan struct{}), refs: 1}
	e.elem = c.lru.PushFront(e)
	c.m[key] = e
	c.mu.Unlock()

	f, idx, err := open()

	c.mu.Lock()
	e.f, e.idx, e.err = f, idx, err
	close(e.ready)
	if err != nil {
		c.removeLocked(e)
	}
	c.mu.Unlock()
	if err != nil {
		c.release(e)
		return nil, err
	}
	c.mu.Lock()
	c.evictLocked()
	c.mu.Unlock()
	return e, nil
}

// newPinned makes an entry for an already open file (a log's active segment), referenced
// once by its owner and not in the cache.
func newPinned(key cacheKey, f File, idx *segIndex) *cachedSegment {
	e := &cachedSegment{key: key, ready: make(chan struct{}), f: f, idx: idx, refs: 1}
	close(e.ready)
	return e
}

func (c *FileCache) ref(e *cachedSegment) {
	c.mu.Lock()
	e.refs++
	c.mu.Unlock()
}

func (c *FileCache) release(e *cachedSegment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs == 0 && e.elem == nil {
		c.closeLocked(e)
	}
	c.evictLocked()
}

// adopt moves a pinned entry (the active segment that just closed) into the cache and drops
// the owner's reference, so the file stays open for readers of recent data until evicted.
func (c *FileCache) adopt(e *cachedSegment) {
	c.mu.Lock()
	if old := c.m[e.key]; old != nil {
		c.removeLocked(old)
		if old.refs == 0 {
			c.closeLocked(old)
		}
	}
	e.elem = c.lru.PushFront(e)
	c.m[e.key] = e
	c.mu.Unlock()
	c.release(e)
}

// forget drops the entry for key (its segment was deleted); the file closes when unreferenced.
func (c *FileCache) forget(key cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.m[key]; e != nil {
		c.removeLocked(e)
		if e.refs == 0 {
			c.closeLocked(e)
		}
	}
}

// forgetOwner drops every entry of one log (it stopped serving).
func (c *FileCache) forgetOwner(owner uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.m {
		if k.owner == owner {
			c.removeLocked(e)
			if e.refs == 0 {
				c.closeLocked(e)
			}
		}
	}
}

func (c *FileCache) removeLocked(e *cachedSegment) {
	if e.elem != nil {
		c.lru.Remove(e.elem)
		e.elem = nil
	}
	if c.m[e.key] == e {
		delete(c.m, e.key)
	}
}

// closeLocked closes an unreferenced entry's file once it is ready. An entry still opening
// is closed by the release that follows its open.
func (c *FileCache) closeLocked(e *cachedSegment) {
	select {
	case <-e.ready:
	default:
		return
	}
	if e.closed {
		return
	}
	e.closed = true
	if e.f != nil {
		_ = e.f.Close() // read-only or already synced: nothing to lose
		e.f = nil
	}
}

// evictLocked closes least recently used unreferenced files while more than capacity are
// cached. Referenced entries stay (the bound is exceeded only by files being read now).
func (c *FileCache) evictLocked() {
	for el := c.lru.Back(); el != nil && len(c.m) > c.capacity; {
		prev := el.Prev()
		e := el.Value.(*cachedSegment)
		if e.refs == 0 {
			c.removeLocked(e)
			c.closeLocked(e)
		}
		el = prev
	}
}
