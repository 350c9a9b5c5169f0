package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// flush is the flusher goroutine: the owner of durability for a serving log. Each round it
// captures everything written so far, fsyncs it once for all the appends waiting on it (group
// commit), re-reads the fence, and only then advances the high watermark and releases the
// acks=all waiters. It runs whenever written data is not yet durable — acks=1 data too, which
// becomes readable only at the next round — and performs rolls, retention and DeleteRecords
// between rounds, so those never race with an fsync. It closes the log's files when the log
// stops, whoever stopped it.
func (l *Log) flush() {
	ticker := time.NewTicker(l.opts.RetentionCheckInterval)
	defer ticker.Stop()
	defer l.closeFiles()
	for {
		// Retention and queued operations run between rounds even while appends keep the
		// flusher busy.
		select {
		case <-ticker.C:
			l.applyRetention()
		case op := <-l.ops:
			op()
		default:
		}
		l.mu.Lock()
		for l.state == stateServing && l.leo == l.hw && !l.rollWanted && !l.stopWanted {
			l.mu.Unlock()
			select {
			case <-l.kick:
			case <-ticker.C:
				l.applyRetention()
			case op := <-l.ops:
				op()
			}
			l.mu.Lock()
		}
		if l.state != stateServing {
			l.mu.Unlock()
			return
		}
		r := l.pending
		l.pending = newRound()
		target, targetPos, f := l.leo, l.activeIdx.size, l.activeFile.f
		l.inflight, l.inflightEnd = r, target
		stop, roll := l.stopWanted, l.rollWanted
		l.mu.Unlock()

		err := f.Sync()
		if err != nil {
			err = l.classify(storageErr("fsync", err))
		} else {
			err = l.fenceCheck()
		}

		l.mu.Lock()
		l.inflight = nil
		if err != nil {
			l.failLocked(err)
		}
		if l.state != stateServing {
			r.err = l.stopErr
			close(r.done)
			l.mu.Unlock()
			return
		}
		if target > l.hw {
			l.hw, l.hwPos = target, targetPos
			l.pruneDecidedLocked()
			close(l.hwCh)
			l.hwCh = make(chan struct{})
		}
		close(r.done)
		l.mu.Unlock()

		switch {
		case stop:
			l.finishRelinquish()
			return
		case roll:
			if err := l.roll(); err != nil {
				l.fail(err)
			}
		}
	}
}

// closeFiles releases every file the log holds: the active segment (closed once the last
// reader is done) and its cached closed segments.
func (l *Log) closeFiles() {
	if c := l.opts.Cleaner; c != nil {
		c.remove(l)
	}
	l.mu.Lock()
	e := l.activeFile
	l.activeFile = nil
	retired := l.retired
	l.retired = nil
	l.mu.Unlock()
	l.removeRetired(retired) // no reader is left to open them
	if e != nil {
		l.cache.release(e)
	}
	l.cache.forgetOwner(l.id)
	close(l.stopped)
}

// runOnFlusher runs op on the flusher goroutine and returns its error; ErrNotLeader (or the
// reason the log stopped) if the log stops first.
func (l *Log) runOnFlusher(ctx context.Context, op func() error) error {
	result := make(chan error, 1)
	select {
	case l.ops <- func() { result <- op() }:
	case <-l.done:
		return l.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-result:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// roll closes the active segment and opens a new one at the log end, stamped with this
// log's epoch. It runs on the flusher right after a round made the whole active segment
// durable and passed the fence check, while appenders wait (rollWanted), so the log end does
// not move: a deposed leader therefore never creates a segment above the new leader's roll
// point, and the old segment's bytes are final. Order: the closing segment's index, the new
// segment file and its directory entry, its roll record in the journal (a segment no journal
// names is never part of the log, so a crash before the record loses only an empty file),
// then the producer snapshot that points at it.
func (l *Log) roll() error {
	l.mu.Lock()
	if l.state != stateServing {
		l.mu.Unlock()
		return l.Err()
	}
	old, oldIdx, base, epoch := l.activeFile, l.activeIdx, l.leo, l.epoch
	l.producers.expire(l.opts.Now().UnixMilli(), l.cfg.ProducerIDExpirationMs)
	snap := encodeSnapshot(checkpoint{offset: base, segBase: base, segEpoch: epoch}, l.producers)
	interval := l.cfg.IndexIntervalBytes
	l.mu.Unlock()

	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, indexName(oldIdx.base, epoch)), oldIdx.encode(epoch), epoch); err != nil {
		return storageErr("roll: write index", err)
	}
	f, err := l.createSegment(base, epoch)
	if err != nil {
		return err
	}
	if err := l.journalRecord(recRoll, base); err != nil {
		_ = f.Close()
		return storageErr("roll: record", err)
	}
	if err := l.writeSnapshot(base, epoch, snap); err != nil {
		_ = f.Close()
		return err
	}

	l.mu.Lock()
	if l.state != stateServing {
		l.mu.Unlock()
		_ = f.Close()
		return l.Err()
	}
	l.closed = append(l.closed, segmentFromIndex(epoch, cleanGen{}, oldIdx))
	l.activeIdx = newSegIndex(base, interval)
	l.activeFile = newPinned(cacheKey{owner: l.id, name: segmentName(base, epoch)}, f, l.activeIdx)
	l.activeSince = time.Time{}
	l.hwPos = 0 // hw == base: the round before the roll covered everything
	l.rollWanted = false
	l.wakeRollWaiterLocked()
	l.mu.Unlock()
	l.cache.adopt(old)
	return nil
}

// createSegment creates segment (base, epoch) exclusively and makes its name durable.
func (l *Log) createSegment(base int64, epoch int32) (File, error) {
	f, err := l.fsys.OpenFile(filepath.Join(l.dir, segmentName(base, epoch)), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, storageErr("create segment", err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		_ = f.Close()
		return nil, storageErr("create segment", err)
	}
	return f, nil
}

// journalRecord appends a record of an offset (a roll, a log-start move, a checkpoint) to the
// claim's journal, durably.
func (l *Log) journalRecord(kind byte, offset int64) error {
	return l.journalAppend(kind, encodeOffset(offset))
}

// snapshotsKept is how many producer snapshots a partition keeps: the newest is the
// checkpoint; the one before it is a fallback should the newest prove unusable.
const snapshotsKept = 2

// writeSnapshot writes the producer snapshot (and recovery checkpoint) at offset and removes
// all but the newest snapshotsKept.
func (l *Log) writeSnapshot(offset int64, epoch int32, snap []byte) error {
	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, snapshotName(offset, epoch)), snap, epoch); err != nil {
		return storageErr("write producer snapshot", err)
	}
	names, err := l.fsys.ReadDirNames(l.dir)
	if err != nil {
		return storageErr("prune producer snapshots", err)
	}
	snaps := listSnapshots(names)
	for i := snapshotsKept; i < len(snaps); i++ {
		_ = l.fsys.Remove(filepath.Join(l.dir, snaps[i].name())) // a leftover costs a file, not correctness
	}
	return nil
}

// finishRelinquish runs after the final round (everything written is durable and the fence
// still held): it leaves a checkpoint — the active segment's index and a producer snapshot at
// the log end — so the next leader neither rescans this segment nor loses producer state,
// then stops the log. (If the fence had moved, the round failed and nothing is written.)
func (l *Log) finishRelinquish() {
	l.mu.Lock()
	x, epoch, leo := l.activeIdx, l.epoch, l.leo
	l.producers.expire(l.opts.Now().UnixMilli(), l.cfg.ProducerIDExpirationMs)
	snap := encodeSnapshot(checkpoint{offset: leo, segBase: x.base, segEpoch: epoch, pos: x.size}, l.producers)
	idx := x.encode(epoch)
	l.mu.Unlock()
	err := writeFileAtomic(l.fsys, filepath.Join(l.dir, indexName(x.base, epoch)), idx, epoch)
	if err == nil {
		err = l.writeSnapshot(leo, epoch, snap)
	}
	if err == nil {
		err = l.journalRecord(recCheckpoint, leo)
	}
	fenced := err != nil && errors.Is(l.fenceCheck(), ErrFenced)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err == nil:
	case fenced:
		// The next leader claimed the partition between the final round and the checkpoint
		// (a move starts both at once) and cleaned up this leader's temporaries: the normal
		// race of a move, not a disk problem. It scans from the previous checkpoint.
		l.log.V(1).Info("Relinquish left no checkpoint: the next leader took over first", "epoch", epoch, "error", err.Error())
	default:
		// Everything acknowledged is durable; only the checkpoint is missing, so the next
		// leader scans from the previous one. Still a sign the disk is failing.
		l.log.Error(err, "Relinquish could not write the checkpoint; the next leader will rescan", "epoch", epoch)
	}
	l.failLocked(ErrNotLeader)
}

// Relinquish stops the log: appends are refused from now on (ErrNotLeader), everything
// already written is made durable and acknowledged if the fence still holds this epoch, a
// checkpoint (index and producer snapshot) is left for the next leader unless the fence has
// moved, and every file is closed. It returns nil once the files are closed, or ctx.Err()
// if that takes longer than ctx allows (the flusher finishes in the background). Safe to
// call more than once, and on a log that never served.
func (l *Log) Relinquish(ctx context.Context) error {
	l.mu.Lock()
	switch l.state {
	case stateOpen:
		l.failLocked(ErrNotLeader)
		l.mu.Unlock()
		close(l.stopped)
		return nil
	case stateServing, stateTakingOver:
		l.stopWanted = true
		l.kickFlusher()
	}
	l.mu.Unlock()
	select {
	case <-l.stopped:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("relinquish %s: %w", l.dir, ctx.Err())
	}
}
