package storage

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// CleanerConfig is the broker's cleaner settings: Apache's log.cleaner.* keys.
type CleanerConfig struct {
	// DedupeBufferBytes is log.cleaner.dedupe.buffer.size: the offset map's memory, which
	// bounds how many keys one pass maps (24 bytes a key, 90 % full). 128 MiB when zero.
	DedupeBufferBytes int64
	// IOBufferBytes is log.cleaner.io.buffer.size: the read and write buffer of a pass
	// (a batch larger than it is read whole). 512 KiB when zero.
	IOBufferBytes int
	// IOBytesPerSecond is log.cleaner.io.max.bytes.per.second: the pass's reads and writes
	// together stay below it. 0 is unlimited.
	IOBytesPerSecond float64
	// Backoff is log.cleaner.backoff.ms: how long the cleaner sleeps when no log needs
	// cleaning. 15 s when zero.
	Backoff time.Duration
	// Disabled is log.cleaner.enable=false: Run cleans nothing (Log.Clean still does).
	Disabled bool
	// Log receives the passes (V(1)) and the logs that cannot be cleaned.
	Log logr.Logger
	// Uncleanable, when set, is told about a log a pass failed on (the offset map is too
	// small, a batch does not decode); the cleaner retries it after uncleanableRetry.
	Uncleanable func(dir string, err error)
	// Cleaned, when set, is told about each pass that swapped its copies in.
	Cleaned func(dir string, r CleanResult)
}

const uncleanableRetry = 10 * time.Minute

// Cleaner is a broker's log cleaner (Apache's LogCleaner with one thread): one goroutine
// that cleans the serving compacted logs one pass at a time, the dirtiest first. Logs
// register themselves when they start serving (Options.Cleaner) and leave when they stop. Its
// memory is the offset map and two I/O buffers, whatever the number of logs.
type Cleaner struct {
	kick chan struct{}

	mu          sync.Mutex
	cfg         CleanerConfig
	logs        map[*Log]struct{}
	uncleanable map[*Log]uncleanable // the logs whose last pass failed

	stats struct{ passes, failures, bytesRead, bytesWritten, recordsRemoved atomic.Int64 }

	// The pass's memory, reused: one pass at a time (passMu).
	passMu sync.Mutex
	env    *cleanerEnv
}

// NewCleaner makes a cleaner; Run runs it.
func NewCleaner(cfg CleanerConfig) *Cleaner {
	return &Cleaner{cfg: cfg.withDefaults(), kick: make(chan struct{}, 1), logs: map[*Log]struct{}{}, uncleanable: map[*Log]uncleanable{}}
}

// uncleanable is a log whose last pass failed, and why.
type uncleanable struct {
	at  time.Time
	err error
}

func (cfg CleanerConfig) withDefaults() CleanerConfig {
	if cfg.DedupeBufferBytes <= 0 {
		cfg.DedupeBufferBytes = 128 << 20
	}
	if cfg.IOBufferBytes <= 0 {
		cfg.IOBufferBytes = 512 << 10
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 15 * time.Second
	}
	if cfg.Log.GetSink() == nil {
		cfg.Log = logr.Discard()
	}
	return cfg
}

// SetConfig changes the settings from the next pass on (the broker follows the cluster's
// log.cleaner.* keys). A new buffer size frees the old buffers; a larger offset map makes the
// logs it was too small for due at once rather than after uncleanableRetry (they stay
// uncleanable until that pass succeeds).
func (c *Cleaner) SetConfig(cfg CleanerConfig) {
	cfg = cfg.withDefaults()
	c.passMu.Lock()
	c.mu.Lock()
	if cfg.DedupeBufferBytes > c.cfg.DedupeBufferBytes {
		for l, u := range c.uncleanable {
			if errors.Is(u.err, ErrOffsetMapTooSmall) {
				c.uncleanable[l] = uncleanable{err: u.err} // at zero: retried at the next look
			}
		}
	}
	if c.env != nil && (c.env.cfg.DedupeBufferBytes != cfg.DedupeBufferBytes || c.env.cfg.IOBufferBytes != cfg.IOBufferBytes) {
		c.env = nil
	} else if c.env != nil {
		c.env.cfg = cfg
	}
	c.cfg = cfg
	c.mu.Unlock()
	c.passMu.Unlock()
	c.Kick()
}

func (c *Cleaner) config() CleanerConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// CleanerStats are a cleaner's totals since it was made.
type CleanerStats struct {
	Passes, Failures, BytesRead, BytesWritten, RecordsRemoved int64
}

// Stats are the cleaner's totals.
func (c *Cleaner) Stats() CleanerStats {
	return CleanerStats{Passes: c.stats.passes.Load(), Failures: c.stats.failures.Load(), BytesRead: c.stats.bytesRead.Load(),
		BytesWritten: c.stats.bytesWritten.Load(), RecordsRemoved: c.stats.recordsRemoved.Load()}
}

// Uncleanable is why the last pass on l failed, nil when it did not.
func (c *Cleaner) Uncleanable(l *Log) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.uncleanable[l].err
}

func (c *Cleaner) add(l *Log) {
	c.mu.Lock()
	c.logs[l] = struct{}{}
	c.mu.Unlock()
	c.Kick()
}

func (c *Cleaner) remove(l *Log) {
	c.mu.Lock()
	delete(c.logs, l)
	delete(c.uncleanable, l)
	c.mu.Unlock()
}

// Kick makes the cleaner look for work now instead of after its backoff.
func (c *Cleaner) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run cleans until ctx ends: the log most in need first — past max.compaction.lag.ms, then
// the highest dirty ratio above min.cleanable.dirty.ratio — then the next, sleeping Backoff
// when none needs it.
func (c *Cleaner) Run(ctx context.Context) {
	for ctx.Err() == nil {
		if l := c.next(); l != nil {
			_, _ = c.clean(ctx, l, false)
			continue
		}
		t := time.NewTimer(c.config().Backoff)
		select {
		case <-ctx.Done():
		case <-c.kick:
		case <-t.C:
		}
		t.Stop()
	}
}

// next is the log to clean now, or nil.
func (c *Cleaner) next() *Log {
	c.mu.Lock()
	if c.cfg.Disabled {
		c.mu.Unlock()
		return nil
	}
	logs := make([]*Log, 0, len(c.logs))
	for l := range c.logs {
		if u, bad := c.uncleanable[l]; !bad || time.Since(u.at) > uncleanableRetry {
			logs = append(logs, l)
		}
	}
	c.mu.Unlock()
	var best *Log
	var bestScore float64
	for _, l := range logs {
		l.mu.Lock()
		score := -1.0
		if l.state == stateServing && l.cfg.Compact {
			now := l.opts.Now()
			st := l.compactionStatsLocked(now.UnixMilli())
			switch {
			case st.HorizonDue:
				score = 1.5 // tombstones past their horizon
			case st.DirtyBytes == 0:
			case st.Lag.Milliseconds() > l.cfg.MaxCompactionLagMs:
				score = 2 + st.DirtyRatio // overdue logs first
			case st.DirtyRatio > l.cfg.MinCleanableDirtyRatio:
				score = st.DirtyRatio
			}
		}
		l.mu.Unlock()
		if score >= 0 && (best == nil || score > bestScore) {
			best, bestScore = l, score
		}
	}
	return best
}

// clean runs one pass on l (force: whatever its dirty ratio).
func (c *Cleaner) clean(ctx context.Context, l *Log, force bool) (CleanResult, error) {
	c.passMu.Lock()
	defer c.passMu.Unlock()
	l.mu.Lock()
	p := l.planCleanLocked(l.opts.Now(), force)
	l.mu.Unlock()
	if p == nil {
		return CleanResult{}, nil
	}
	cfg := c.config()
	if c.env == nil {
		c.env = newCleanerEnv(cfg)
	}
	start := time.Now()
	res, err := l.cleanPass(ctx, c.env, p)
	c.stats.bytesRead.Add(res.BytesRead)
	c.stats.bytesWritten.Add(res.BytesWritten)
	failed := err != nil && l.Err() == nil && ctx.Err() == nil // not the log stopping under it
	c.mu.Lock()
	if failed {
		c.uncleanable[l] = uncleanable{at: time.Now(), err: err}
	} else {
		delete(c.uncleanable, l)
	}
	c.mu.Unlock()
	switch {
	case failed:
		c.stats.failures.Add(1)
		cfg.Log.Error(err, "Cannot clean the partition; retrying later", "dir", l.dir, "retryAfter", uncleanableRetry)
		if cfg.Uncleanable != nil {
			cfg.Uncleanable(l.dir, err)
		}
	case res.Cleaned:
		c.stats.passes.Add(1)
		c.stats.recordsRemoved.Add(res.RecordsRemoved)
		cfg.Log.V(1).Info("Cleaned partition", "dir", l.dir, "segments", res.Segments, "dirtyFrom", res.DirtyFrom, "dirtyTo", res.DirtyTo,
			"bytesRead", res.BytesRead, "bytesWritten", res.BytesWritten, "recordsRemoved", res.RecordsRemoved, "took", time.Since(start))
		if cfg.Cleaned != nil {
			cfg.Cleaned(l.dir, res)
		}
	}
	return res, err
}

// cleanerEnv is a pass's reusable memory and its I/O throttle.
type cleanerEnv struct {
	cfg           CleanerConfig
	ioBufferBytes int
	m             *offsetMap
	buf           []byte
	// throttle state: bytes moved since start
	start time.Time
	moved float64
}

func newCleanerEnv(cfg CleanerConfig) *cleanerEnv {
	return &cleanerEnv{cfg: cfg, ioBufferBytes: cfg.IOBufferBytes}
}

func (e *cleanerEnv) offsetMap() *offsetMap {
	if e.m == nil {
		e.m = newOffsetMap(e.cfg.DedupeBufferBytes)
	}
	return e.m
}

// batchBuffer is a buffer of n bytes, reused from batch to batch.
func (e *cleanerEnv) batchBuffer(n int) []byte {
	if cap(e.buf) < n {
		e.buf = make([]byte, n)
	}
	return e.buf[:n]
}

// throttle sleeps as long as the bytes moved are ahead of IOBytesPerSecond (measured over the
// last second or so, so an idle cleaner does not bank a burst).
func (e *cleanerEnv) throttle(ctx context.Context, n int) error {
	rate := e.cfg.IOBytesPerSecond
	if rate <= 0 {
		return nil
	}
	now := time.Now()
	if e.start.IsZero() || now.Sub(e.start) > time.Second {
		e.start, e.moved = now, 0
	}
	e.moved += float64(n)
	ahead := time.Duration(e.moved/rate*float64(time.Second)) - now.Sub(e.start)
	if ahead <= 0 {
		return nil
	}
	t := time.NewTimer(ahead)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
