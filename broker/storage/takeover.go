package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// snapRef names a producer snapshot file.
type snapRef struct {
	offset int64
	epoch  int32
}

func (s snapRef) name() string { return snapshotName(s.offset, s.epoch) }

// listSnapshots returns the snapshot files among names, newest (highest offset, then epoch)
// first.
func listSnapshots(names []string) []snapRef {
	var out []snapRef
	for _, n := range names {
		if off, ep, ok := parseStem(n, snapshotSuffix); ok {
			out = append(out, snapRef{off, ep})
		}
	}
	slices.SortFunc(out, func(a, b snapRef) int {
		return cmp.Or(cmp.Compare(b.offset, a.offset), cmp.Compare(b.epoch, a.epoch))
	})
	return out
}

var errBadCheckpoint = errors.New("checkpoint does not match the segment")

// Takeover makes this process the partition's writer at leader epoch (DESIGN.md "Fence
// first"), in this order:
//
//  1. claim: the fence takes epoch, or Takeover fails with a *FencedError having written
//     nothing (the fence already holds epoch or more: this broker's view is stale);
//  2. recover: list the segments in log order (each bounded by the next one's base offset,
//     so a deposed leader's late bytes are ignored), start at the newest usable checkpoint
//     (producer snapshot), verify every batch after it (length, offsets, CRC-32C), cut a torn
//     tail, rebuild indexes and producer state, and fsync what was scanned (a previous leader
//     may have written it without syncing);
//  3. roll: create segment <log end>-<epoch>.log and a checkpoint pointing at it;
//  4. serve.
//
// Because the claim comes before the scan, every append a previous leader acknowledged (it
// fsynced, then saw its own epoch in the fence) is on disk before this log looks, and so is
// kept. Until Takeover returns nil every call answers ErrNotLeader. A failed Takeover leaves
// the log stopped; a claimed epoch is never reused.
func (l *Log) Takeover(ctx context.Context, epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("takeover %s: epoch %d: epochs are non-negative", l.dir, epoch)
	}
	l.mu.Lock()
	if l.state != stateOpen {
		l.mu.Unlock()
		return fmt.Errorf("takeover %s at epoch %d: a Log leads only once (open a new one)", l.dir, epoch)
	}
	l.state, l.epoch = stateTakingOver, epoch
	l.mu.Unlock()

	err := l.takeover(ctx, epoch)

	l.mu.Lock()
	if err == nil && l.stopWanted {
		err = ErrNotLeader // Relinquish was called while we took over
	}
	if err != nil {
		l.failLocked(err)
		l.mu.Unlock()
		l.closeFiles() // no flusher was started: close what the takeover opened
		return err
	}
	l.state = stateServing
	l.log.V(1).Info("Took over partition", "epoch", epoch, "logStart", l.logStart, "logEnd", l.leo, "segments", len(l.closed)+1)
	l.mu.Unlock()
	go l.flush()
	return nil
}

// takeover does steps 1–3 and installs the result in l.
func (l *Log) takeover(ctx context.Context, epoch int32) error {
	fence, err := OpenFence(l.fsys, filepath.Join(l.dir, fenceDirName))
	if err != nil {
		return err
	}
	if err := fence.Claim(epoch); err != nil {
		return err
	}
	l.fence = fence
	names, err := l.fsys.ReadDirNames(l.dir)
	if err != nil {
		return storageErr("recover: list", err)
	}
	var found []diskSegment
	newest := int32(-1)
	for _, n := range names {
		if base, ep, ok := parseStem(n, segmentSuffix); ok {
			found = append(found, diskSegment{base: base, epoch: ep})
			newest = max(newest, ep)
		} else if _, ep, ok := parseStem(n, snapshotSuffix); ok {
			newest = max(newest, ep)
		} else if ep, ok := parseTmpEpoch(n); ok {
			newest = max(newest, ep)
		}
	}
	if newest > epoch {
		// A newer leader claimed after us and has already written: we are stale, and must
		// not touch its files (truncating its active segment under it would cut what it
		// acknowledges next).
		return &FencedError{Epoch: epoch, Fence: newest}
	}
	for _, n := range names {
		if ep, ok := parseTmpEpoch(n); ok && ep < epoch {
			// A crashed writer's interrupted atomic write, or a deposed one's in flight
			// (whose rename then fails, and which then finds itself fenced).
			_ = l.fsys.Remove(filepath.Join(l.dir, n))
		}
	}
	valid, junk := orderSegments(found)
	for _, s := range junk {
		l.log.Info("Removing a deposed leader's segment outside the log", "segment", segmentName(s.base, s.epoch), "nextBase", s.bound)
		_ = l.fsys.Remove(filepath.Join(l.dir, segmentName(s.base, s.epoch)))
		_ = l.fsys.Remove(filepath.Join(l.dir, indexName(s.base, s.epoch)))
	}
	l.mu.Lock()
	cfg := l.cfg
	l.mu.Unlock()

	var rec *recovery
	for _, cand := range l.checkpointCandidates(listSnapshots(names), valid) {
		rec = &recovery{l: l, cfg: cfg, segs: valid, cp: cand.cp, cpSeg: cand.seg, producers: cand.producers}
		err = rec.run(ctx)
		if !errors.Is(err, errBadCheckpoint) {
			break
		}
		l.log.Info("Skipping a producer snapshot that does not match its segment", "snapshot", snapshotName(cand.cp.offset, cand.cp.segEpoch), "err", err.Error())
	}
	if err != nil {
		return err
	}

	logStart, err := l.readLogStart()
	if err != nil {
		return err
	}
	if len(valid) > 0 {
		logStart = max(logStart, valid[0].base)
	}
	leo := rec.leo
	if len(valid) == 0 {
		leo = logStart // an empty partition, or one whose segments were all deleted
	}
	logStart = min(logStart, leo)

	// The epoch history: each epoch's first offset, from the segments (every leader rolls a
	// segment at its takeover), then ours. An epoch that wrote nothing before the next one
	// started is dropped, as Apache's cache drops it when the next epoch is assigned.
	var hist []epochStart
	for _, s := range rec.closed {
		if len(hist) == 0 || hist[len(hist)-1].epoch != s.epoch {
			hist = append(hist, epochStart{s.epoch, s.base})
		}
	}
	hist = append(hist, epochStart{epoch, leo})
	compact := hist[:0]
	for i, e := range hist {
		if i+1 < len(hist) && hist[i+1].start <= e.start {
			continue
		}
		compact = append(compact, e)
	}

	rec.producers.expire(l.opts.Now().UnixMilli(), cfg.ProducerIDExpirationMs)
	f, err := l.createSegment(leo, epoch)
	if err != nil {
		return err
	}
	idx := newSegIndex(leo, cfg.IndexIntervalBytes)
	active := newPinned(cacheKey{owner: l.id, name: segmentName(leo, epoch)}, f, idx)
	l.mu.Lock()
	l.activeFile = active // from here on closed with the log
	l.mu.Unlock()
	if err := l.writeSnapshot(leo, epoch, encodeSnapshot(checkpoint{offset: leo, segBase: leo, segEpoch: epoch}, rec.producers)); err != nil {
		return err
	}
	for _, s := range listSnapshots(names) {
		if s.offset > leo {
			_ = l.fsys.Remove(filepath.Join(l.dir, s.name())) // refers to bytes that are gone
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = rec.closed
	l.activeIdx = idx
	l.logStart, l.leo, l.hw, l.hwPos = logStart, leo, leo, 0
	l.producers = rec.producers
	l.epochs = compact
	return nil
}

// checkpointCandidate is a place recovery may start from.
type checkpointCandidate struct {
	cp        checkpoint
	seg       int // index in the valid segments
	producers *producerState
}

// checkpointCandidates lists the usable snapshots, newest first, then the start of the log
// with empty producer state (always usable). A snapshot is usable when it decodes (CRC) and
// points into a segment of the log at an offset that segment can hold.
func (l *Log) checkpointCandidates(snaps []snapRef, valid []diskSegment) []checkpointCandidate {
	var out []checkpointCandidate
	for _, s := range snaps {
		b, err := readFile(l.fsys, filepath.Join(l.dir, s.name()))
		if err != nil {
			continue
		}
		cp, ps, err := decodeSnapshot(b)
		if err != nil || cp.offset != s.offset {
			continue
		}
		i := slices.IndexFunc(valid, func(d diskSegment) bool { return d.base == cp.segBase && d.epoch == cp.segEpoch })
		if i < 0 || cp.offset > valid[i].bound {
			continue
		}
		out = append(out, checkpointCandidate{cp: cp, seg: i, producers: ps})
	}
	start := checkpoint{}
	if len(valid) > 0 {
		start = checkpoint{offset: valid[0].base, segBase: valid[0].base, segEpoch: valid[0].epoch}
	}
	return append(out, checkpointCandidate{cp: start, seg: 0, producers: newProducerState()})
}

// recovery is one attempt to recover the log from one checkpoint.
type recovery struct {
	l         *Log
	cfg       Config
	segs      []diskSegment
	cp        checkpoint
	cpSeg     int
	producers *producerState

	closed []*segment // result: every recovered segment, now all closed
	leo    int64
}

func (r *recovery) run(ctx context.Context) error {
	r.closed = nil
	for i, s := range r.segs {
		seg, err := r.recoverSegment(ctx, i, s)
		if err != nil {
			return err
		}
		r.closed = append(r.closed, seg)
		r.leo = seg.end
	}
	return nil
}

// recoverSegment recovers segment i: before the checkpoint its index is loaded (or rebuilt
// by walking headers); from the checkpoint on every batch is verified and applied to the
// producer state. A closed segment must hold exactly the batches up to its bound, or the log
// is corrupt; the last one is cut after its last valid batch.
func (r *recovery) recoverSegment(ctx context.Context, i int, s diskSegment) (*segment, error) {
	l := r.l
	last := i == len(r.segs)-1
	name := segmentName(s.base, s.epoch)
	path := filepath.Join(l.dir, name)
	flag := os.O_RDONLY
	if last {
		flag = os.O_RDWR
	}
	f, err := l.fsys.OpenFile(path, flag, 0)
	if err != nil {
		return nil, storageErr("recover: open "+name, err)
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	size, err := f.Size()
	if err != nil {
		return nil, storageErr("recover: size "+name, err)
	}
	if i < r.cpSeg {
		x, err := l.loadIndex(ctx, f, s.base, s.epoch, s.bound, -1, r.cfg.IndexIntervalBytes)
		if err != nil {
			return nil, storageErr("recover", err)
		}
		if err := r.writeIndexIfChanged(s, x); err != nil {
			return nil, err
		}
		return segmentFromIndex(s.epoch, x), nil
	}

	x := newSegIndex(s.base, r.cfg.IndexIntervalBytes)
	pos, next := int64(0), s.base
	if i == r.cpSeg && r.cp.pos == 0 && r.cp.offset != s.base {
		return nil, fmt.Errorf("%w: snapshot at offset %d, byte 0 of %s", errBadCheckpoint, r.cp.offset, name)
	}
	if i == r.cpSeg && r.cp.pos > 0 {
		// The part before the checkpoint was verified when it was written and made durable
		// before the checkpoint was; it only needs its index.
		if r.cp.pos > size {
			return nil, fmt.Errorf("%w: snapshot at byte %d of %s, which has %d", errBadCheckpoint, r.cp.pos, name, size)
		}
		got, err := l.loadIndexPrefix(ctx, f, s, r.cp, x)
		if err != nil {
			return nil, err
		}
		x = got
		pos, next = r.cp.pos, r.cp.offset
	}
	end, err := scanBatches(ctx, f, pos, size, next, s.bound, true, func(h batchHeader, pos int64) {
		x.add(h, pos)
		if h.idempotent() {
			r.producers.apply(h)
		}
	})
	if err != nil {
		return nil, storageErr("recover: scan "+name, err)
	}
	if !last && end.next != s.bound {
		return nil, &StorageError{Op: "recover " + name, Err: fmt.Errorf("%w: batches stop at offset %d (byte %d), the next segment starts at %d: %v", ErrCorruptLog, end.next, end.pos, s.bound, end.refused)}
	}
	if last && end.pos < size {
		// Only the fence holder truncates. (Even a claimer that lost the fence since cuts
		// only bytes after the newer leader's roll point: every byte before it is a valid
		// batch both see.)
		if err := l.fence.Check(l.epoch); err != nil {
			return nil, err
		}
		l.log.Info("Truncating the partition's torn tail", "segment", name, "validBytes", end.pos, "fileBytes", size, "reason", fmt.Sprint(end.refused))
		if err := f.Truncate(end.pos); err != nil {
			return nil, storageErr("recover: truncate "+name, err)
		}
	}
	// What was scanned may have been written by a leader that died before fsyncing it; it is
	// about to be served as durable.
	if err := f.Sync(); err != nil {
		return nil, storageErr("recover: fsync "+name, err)
	}
	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, indexName(s.base, s.epoch)), x.encode(s.epoch), l.epoch); err != nil {
		return nil, storageErr("recover: write index", err)
	}
	return segmentFromIndex(s.epoch, x), nil
}

// loadIndexPrefix returns the index of segment s up to checkpoint cp: from its .index file if
// that ends exactly at the checkpoint, else by walking the headers, which must land exactly on
// the checkpoint (errBadCheckpoint otherwise: the snapshot is not about these bytes).
func (l *Log) loadIndexPrefix(ctx context.Context, f File, s diskSegment, cp checkpoint, x *segIndex) (*segIndex, error) {
	if b, err := readFile(l.fsys, filepath.Join(l.dir, indexName(s.base, s.epoch))); err == nil {
		if got, err := decodeIndex(b, s.base, s.epoch, int32(x.interval)); err == nil && got.next == cp.offset && got.size == cp.pos {
			return got, nil
		}
	}
	end, err := scanBatches(ctx, f, 0, cp.pos, s.base, cp.offset, false, x.add)
	if err != nil {
		return nil, storageErr("recover: index "+segmentName(s.base, s.epoch), err)
	}
	if end.pos != cp.pos || end.next != cp.offset {
		return nil, fmt.Errorf("%w: batches reach offset %d at byte %d, snapshot says %d at %d", errBadCheckpoint, end.next, end.pos, cp.offset, cp.pos)
	}
	return x, nil
}

// writeIndexIfChanged writes a rebuilt index (one whose file was missing or stale).
func (r *recovery) writeIndexIfChanged(s diskSegment, x *segIndex) error {
	path := filepath.Join(r.l.dir, indexName(s.base, s.epoch))
	want := x.encode(s.epoch)
	if b, err := readFile(r.l.fsys, path); err == nil && string(b) == string(want) {
		return nil
	}
	if err := writeFileAtomic(r.l.fsys, path, want, r.l.epoch); err != nil {
		return storageErr("recover: write index", err)
	}
	return nil
}

// readLogStart reads the persisted log-start offset (0 when never written or unreadable:
// the first segment's base then bounds it).
func (l *Log) readLogStart() (int64, error) {
	b, err := readFile(l.fsys, filepath.Join(l.dir, logStartFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, storageErr("read log-start offset", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 || n == math.MaxInt64 {
		l.log.Info("Ignoring an unreadable log-start offset file", "content", string(b))
		return 0, nil
	}
	return n, nil
}

func (l *Log) writeLogStart(offset int64) error {
	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, logStartFileName), []byte(strconv.FormatInt(offset, 10)+"\n"), l.epoch); err != nil {
		return storageErr("persist log-start offset", err)
	}
	return nil
}
