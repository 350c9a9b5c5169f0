package storage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
)

// retentionCutLocked is how many of the oldest closed segments retention deletes (the active
// segment never is). Time retention walks from the oldest and stops at the first segment it
// keeps, as Apache does: a segment goes when its newest record is older than retention.ms —
// dated by the records' own timestamps, never by file times, and a segment none of whose
// batches carries a timestamp is never deleted by time. Segments that hold nothing readable
// (empty, or wholly below the log start) go as well. Size retention then deletes the oldest
// while the log stays at least retention.bytes without them. With cleanup.policy=compact
// (NoDelete) neither applies: only the cleaner removes data.
func (l *Log) retentionCutLocked(nowMs int64) int {
	cfg := l.cfg
	n := 0
	for ; n < len(l.closed); n++ {
		s := l.closed[n]
		if s.empty() || s.end <= l.logStart {
			continue
		}
		if !cfg.NoDelete && cfg.RetentionMs >= 0 && s.maxTs >= 0 && nowMs-s.maxTs > cfg.RetentionMs {
			continue
		}
		break
	}
	if !cfg.NoDelete && cfg.RetentionBytes >= 0 {
		total := l.activeIdx.size
		for _, s := range l.closed[n:] {
			total += s.size
		}
		for ; n < len(l.closed) && total-l.closed[n].size >= cfg.RetentionBytes; n++ {
			total -= l.closed[n].size
		}
	}
	return n
}

// applyRetention runs on the flusher (periodically, and on ApplyRetention).
func (l *Log) applyRetention() {
	l.mu.Lock()
	if l.state != stateServing {
		l.mu.Unlock()
		return
	}
	n := l.retentionCutLocked(l.opts.Now().UnixMilli())
	l.mu.Unlock()
	if err := l.deleteFront(n, 0); err != nil {
		l.fail(err)
	}
}

// ApplyRetention applies retention now instead of at the next retention check.
func (l *Log) ApplyRetention(ctx context.Context) error {
	return l.runOnFlusher(ctx, func() error {
		l.applyRetention()
		return l.Err()
	})
}

// deleteFront advances the log start to at least minStart and past the count oldest closed
// segments, records it in the journal, checks the fence, then deletes those segments. It runs
// on the flusher. The record comes before the check: a deposed leader whose check still passed
// had recorded the move before the next leader claimed, so the next leader, which reads this
// journal after claiming, never counts a segment this deletion removes; a deposed leader whose
// check fails deletes nothing (its record then only moves a log start nobody acted on).
func (l *Log) deleteFront(count int, minStart int64) error {
	l.mu.Lock()
	gone := slices.Clone(l.closed[:count])
	start := max(l.logStart, minStart)
	if count > 0 {
		next := l.activeIdx.base
		if count < len(l.closed) {
			next = l.closed[count].base
		}
		start = max(start, next)
	}
	moved := start != l.logStart
	l.mu.Unlock()
	if count == 0 && !moved {
		return nil
	}
	if moved {
		if err := l.journalRecord(recLogStart, start); err != nil {
			return storageErr("persist log-start offset", err)
		}
	}
	if err := l.fenceCheck(); err != nil {
		return err
	}
	l.mu.Lock()
	l.closed = slices.Clone(l.closed[count:])
	l.logStart = start
	l.producers.dropAbortedBelow(start)
	l.mu.Unlock()
	for _, s := range gone {
		l.cache.forget(l.cacheKey(s))
		for _, name := range []string{s.name(), s.indexName()} {
			if err := l.fsys.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return storageErr("retention: delete "+name, err)
			}
		}
	}
	if len(gone) > 0 {
		l.log.V(1).Info("Deleted old segments", "count", len(gone), "logStart", start)
		if err := l.fsys.SyncDir(l.dir); err != nil {
			return storageErr("retention", err)
		}
	}
	return nil
}

// DeleteRecords advances the log start to offset (DeleteRecords API; -1 means the high
// watermark) and deletes the closed segments wholly below it. The new log start is durable
// before DeleteRecords returns it. An offset past the high watermark is ErrOffsetOutOfRange;
// one at or below the current log start changes nothing.
func (l *Log) DeleteRecords(ctx context.Context, offset int64) (int64, error) {
	l.mu.Lock()
	if err := l.servingLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	if offset == -1 {
		offset = l.hw
	}
	if offset < 0 || offset > l.hw {
		hw := l.hw
		l.mu.Unlock()
		return 0, fmt.Errorf("%w: delete records before %d, high watermark %d", ErrOffsetOutOfRange, offset, hw)
	}
	l.mu.Unlock()
	err := l.runOnFlusher(ctx, func() error {
		l.mu.Lock()
		n := 0
		for n < len(l.closed) && l.closed[n].end <= offset {
			n++
		}
		l.mu.Unlock()
		if err := l.deleteFront(n, offset); err != nil {
			l.fail(err)
			return l.Err()
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart, nil
}
