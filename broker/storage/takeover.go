package storage

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
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
	return sortSnapshots(out)
}

func sortSnapshots(s []snapRef) []snapRef {
	slices.SortFunc(s, func(a, b snapRef) int {
		return cmp.Or(cmp.Compare(b.offset, a.offset), cmp.Compare(b.epoch, a.epoch))
	})
	return slices.Compact(s)
}

var (
	errBadCheckpoint = errors.New("checkpoint does not match the segment")
	errVanished      = errors.New("segment vanished")
)

// vanished reports a file that is no longer there: removed (ENOENT), or removed by another
// client of a network file system while this one held it (ESTALE).
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESTALE) || errors.Is(err, errVanished)
}

// Takeover makes this process the partition's writer at leader epoch (docs/storage.md "The
// fence", "Takeover"), in this order:
//
//  1. claim: the fence takes epoch, or Takeover fails with a *FencedError having written
//     nothing (the fence already holds epoch or more: this broker's view is stale);
//  2. discover, by name: the predecessor's journal says which segments the log has, where it
//     starts and which checkpoints exist (a directory listing only for a log from before
//     journals);
//  3. recover: start at the newest usable checkpoint (producer snapshot), verify every batch
//     after it (length, offsets, CRC-32C), rebuild indexes and producer state. Nothing is cut
//     or deleted: each segment is read only up to the next one's base offset, so a torn tail
//     and a deposed leader's late bytes are simply never read;
//  4. commit the tail: rewrite and fsync the bytes it verified after the checkpoint, which a
//     previous leader may have written without committing them;
//  5. roll: create segment <log end>-<epoch>.log and check the fence — lost, remove the
//     segment and fail;
//  6. record the takeover (recovered segments, log start, roll point) in the claim's journal;
//  7. check the fence again, and only then serve.
//
// Because the claim comes before the discovery, every append a previous leader acknowledged
// (it fsynced, then found its claim still holding) is on the volume before this log looks, and
// so is kept. Until Takeover returns nil every call answers ErrNotLeader; a takeover that lost
// the fence never serves. A failed Takeover leaves the log stopped; a claimed epoch is never
// reused.
func (l *Log) Takeover(ctx context.Context, epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("takeover %s: epoch %d: epochs are non-negative", l.dir, epoch)
	}
	l.mu.Lock()
	if l.state == stateStopped && l.epoch < 0 {
		err := l.stopErr // relinquished before it took over
		l.mu.Unlock()
		return fmt.Errorf("takeover %s at epoch %d: %w", l.dir, epoch, err)
	}
	if l.state != stateOpen {
		l.mu.Unlock()
		return fmt.Errorf("takeover %s at epoch %d: a Log leads only once (open a new one)", l.dir, epoch)
	}
	l.state, l.epoch = stateTakingOver, epoch
	l.mu.Unlock()

	err := l.classify(l.takeover(ctx, epoch)) // overtaken meanwhile: a newer takeover may have removed our temporaries

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
	if c := l.opts.Cleaner; c != nil {
		c.add(l)
	}
	l.log.V(1).Info("Took over partition", "epoch", epoch, "logStart", l.logStart, "logEnd", l.leo, "segments", len(l.closed)+1)
	l.mu.Unlock()
	go l.flush()
	return nil
}

// takeover does steps 1–7 and installs the result in l.
func (l *Log) takeover(ctx context.Context, epoch int32) error {
	if err := l.claimFence(epoch); err != nil {
		return err
	}
	known, err := l.discover(epoch)
	if err != nil {
		return err
	}
	rec, err := l.recoverLog(ctx, known)
	if err != nil {
		return err
	}
	if err := l.commitTail(rec.tail); err != nil {
		return err
	}
	if err := l.rollAtTakeover(rec); err != nil {
		return err
	}
	if err := l.recordTakeover(rec); err != nil {
		return err
	}
	if err := l.checkFence(l.fence, epoch); err != nil {
		return err
	}
	l.install(rec)
	return nil
}

// claimFence is step 1: claim epoch, and open the claim's journal for the records to come.
func (l *Log) claimFence(epoch int32) error {
	fence, err := OpenFence(l.fsys, filepath.Join(l.dir, fenceDirName))
	if err != nil {
		return err
	}
	fence.SetLogger(l.log)
	if err := fence.Claim(epoch); err != nil {
		return err
	}
	ref, path, _ := fence.claimPath(epoch)
	j, err := openJournal(l.fsys, path)
	if err != nil {
		return storageErr("claim fence: open journal", err)
	}
	l.mu.Lock()
	l.fence, l.claim, l.journal = fence, ref, j
	l.mu.Unlock()
	return nil
}

// knownLog is what step 2 learned about the log being taken over.
type knownLog struct {
	segs     []diskSegment // the segments, unordered
	logStart int64
	snaps    []snapRef // checkpoint candidates, newest first
	pred     string    // the claim file whose journal described the log ("" when a listing did)
	// dirtyFrom is the first offset the previous leaders' cleaners had not cleaned, horizon
	// the earliest delete horizon they left (-1: none).
	dirtyFrom, horizon int64
}

// discover is step 2. The predecessor is the newest claim below ours whose takeover completed
// (claims in between never served, and their segments are ignored); its journal names the
// log's segments and checkpoints and its log start. A log with no such claim is new, or was
// written before journals: its segments come from the directory listing, as they used to.
func (l *Log) discover(epoch int32) (*knownLog, error) {
	names, err := l.fsys.ReadDirNames(l.dir)
	if err != nil {
		return nil, storageErr("recover: list", err)
	}
	slices.Sort(names) // the listing is a hint; what follows from it goes in a fixed order
	if newest := newestEpochIn(names); newest > epoch {
		// A newer leader claimed after us and has already written: we are stale.
		return nil, &FencedError{Epoch: epoch, Fence: newest}
	}
	l.removeStaleTemporaries(names, epoch)
	pred, view, firstChained, err := l.predecessor()
	if err != nil {
		return nil, err
	}
	known := &knownLog{pred: pred, horizon: -1}
	l.mu.Lock()
	l.pred = pred
	l.mu.Unlock()
	if pred != "" {
		for _, s := range view.segments() {
			known.segs = append(known.segs, diskSegment{base: s.base, epoch: s.epoch, gen: s.gen})
			known.snaps = append(known.snaps, snapRef{s.base, s.epoch})
		}
		for _, off := range view.checkpoints {
			known.snaps = append(known.snaps, snapRef{off, view.header.epoch})
		}
		known.logStart = max(view.logStart, 0)
		known.dirtyFrom, known.horizon = view.dirtyFrom, view.horizon
	} else {
		known.segs = listedSegments(names, firstChained)
		if known.logStart, err = l.readLegacyLogStart(); err != nil {
			return nil, err
		}
	}
	// Listed snapshots are only more candidates: each is checked against the log before use.
	known.snaps = sortSnapshots(append(known.snaps, listSnapshots(names)...))
	return known, nil
}

// newestEpochIn is the largest epoch stamped on a segment, snapshot or temporary in names.
func newestEpochIn(names []string) int32 {
	newest := int32(-1)
	for _, n := range names {
		if _, ep, ok := parseStem(n, segmentSuffix); ok {
			newest = max(newest, ep)
		} else if _, ep, ok := parseStem(n, snapshotSuffix); ok {
			newest = max(newest, ep)
		} else if ep, ok := parseTmpEpoch(n); ok {
			newest = max(newest, ep)
		}
	}
	return newest
}

// removeStaleTemporaries removes temporaries of lower epochs: a crashed writer's interrupted
// atomic write, or a deposed one's in flight (whose rename then fails, and which then finds
// itself fenced). They hold no data of the log.
func (l *Log) removeStaleTemporaries(names []string, epoch int32) {
	for _, n := range names {
		if ep, ok := parseTmpEpoch(n); ok && ep < epoch {
			_ = l.fsys.Remove(filepath.Join(l.dir, n))
		}
	}
}

// predecessor walks down the chain from our claim to the newest claim whose journal records a
// completed takeover. It returns that claim's file and journal, or "" when there is none, and
// the epoch of the lowest claim of the chain (segments of that epoch or later that no journal
// names are a lost takeover's and never part of the log).
func (l *Log) predecessor() (path string, view journalView, firstChained int32, err error) {
	firstChained = math.MaxInt32
	for n := l.claim.n - 1; n >= 0; n-- {
		b, err := l.fence.readClaimFileBelow(n, math.MaxInt32)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", journalView{}, 0, storageErr("recover: read the previous claim", err)
		}
		v, err := parseJournal(b)
		if err != nil {
			continue // junk holding a number
		}
		firstChained = v.header.epoch
		if v.takeover != nil {
			return filepath.Join(l.dir, fenceDirName, claimName(n)), v, firstChained, nil
		}
	}
	return "", journalView{}, min(firstChained, l.epoch), nil
}

// listedSegments are the segment files a listing shows for a log without a journal, except
// those of chained epochs (a takeover under journals that never completed).
func listedSegments(names []string, firstChained int32) []diskSegment {
	var out []diskSegment
	for _, n := range names {
		if base, ep, ok := parseStem(n, segmentSuffix); ok && ep < firstChained {
			out = append(out, diskSegment{base: base, epoch: ep})
		}
	}
	return out
}

// recovered is the log step 3 rebuilt.
type recovered struct {
	closed    []*segment // every recovered segment, all closed now
	logStart  int64
	leo       int64
	producers *producerState
	history   []epochStart
	tail      tailRange // what step 4 commits
	dirtyFrom int64     // the cleaner's checkpoint: the first offset not cleaned yet
	horizon   int64     // the earliest delete horizon in the cleaned log (-1: none)
}

// tailRange is the part of the last segment that recovery verified after the checkpoint.
type tailRange struct {
	seg      diskSegment
	from, to int64 // bytes
}

// recoverLog is step 3: order the segments, drop those wholly below the log start, recover
// from the newest usable checkpoint (falling back to older ones, then to the log start), and
// rebuild the epoch history.
func (l *Log) recoverLog(ctx context.Context, known *knownLog) (*recovered, error) {
	valid, junk := orderSegments(known.segs)
	for _, s := range junk {
		l.log.V(1).Info("Ignoring a deposed leader's segment outside the log", "segment", s.name(), "nextBase", s.bound)
	}
	valid = slices.DeleteFunc(valid, func(s diskSegment) bool { return s.bound <= known.logStart })
	l.mu.Lock()
	cfg := l.cfg
	l.mu.Unlock()

	var rec *recovery
	var err error
	for _, cand := range l.checkpointCandidates(known.snaps, valid) {
		rec = &recovery{l: l, cfg: cfg, segs: valid, cp: cand.cp, cpSeg: cand.seg, producers: cand.producers, fallback: cand.fallback}
		err = rec.run(ctx)
		if !errors.Is(err, errBadCheckpoint) {
			break
		}
		l.log.Info("Skipping a producer snapshot that does not match its segment", "snapshot", snapshotName(cand.cp.offset, cand.cp.segEpoch), "err", err.Error())
	}
	if err != nil {
		return nil, err
	}
	out := &recovered{closed: rec.closed, producers: rec.producers, tail: rec.tail, dirtyFrom: known.dirtyFrom, horizon: known.horizon}
	out.logStart = known.logStart
	if len(rec.closed) > 0 {
		out.logStart = max(out.logStart, rec.closed[0].base)
		out.leo = rec.closed[len(rec.closed)-1].end
	} else {
		out.leo = out.logStart // an empty partition, or one whose segments were all deleted
	}
	out.logStart = min(out.logStart, out.leo)
	out.dirtyFrom = min(max(out.dirtyFrom, out.logStart), out.leo)
	out.history = epochHistory(rec.closed, l.epoch, out.leo)
	out.producers.expire(l.opts.Now().UnixMilli(), cfg.ProducerIDExpirationMs)
	out.producers.dropAbortedBelow(out.logStart)
	return out, nil
}

// epochHistory is each epoch's first offset, from the segments (every leader rolls a segment
// at its takeover), then ours. An epoch that wrote nothing before the next one started is
// dropped, as Apache's cache drops it when the next epoch is assigned.
func epochHistory(closed []*segment, epoch int32, leo int64) []epochStart {
	var hist []epochStart
	for _, s := range closed {
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
	return compact
}

// commitTail is step 4. On a network file system an fsync commits only the writes this
// client made: bytes a previous leader wrote but never committed may still be lost by the
// server, yet this log is about to serve them as durable. So the takeover writes the bytes it
// verified after the checkpoint again, in place and unchanged, and fsyncs them: they are its
// own writes now (docs/storage.md, "The previous leader's bytes"). Everything before the
// checkpoint was committed by whoever closed it.
func (l *Log) commitTail(t tailRange) error {
	if t.to <= t.from {
		return nil // the checkpoint is at the log end: its writer fsynced everything before it
	}
	name := t.seg.name()
	f, err := l.fsys.OpenFile(filepath.Join(l.dir, name), os.O_RDWR, 0)
	if err != nil {
		return storageErr("recover: commit "+name, err)
	}
	buf := make([]byte, min(t.to-t.from, 1<<20))
	for pos := t.from; pos < t.to && err == nil; {
		n := min(int64(len(buf)), t.to-pos)
		var got int
		got, err = f.ReadAt(buf[:n], pos)
		if err != nil && (!errors.Is(err, io.EOF) || int64(got) != n) {
			break
		}
		_, err = f.WriteAt(buf[:n], pos)
		pos += n
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return storageErr("recover: commit "+name, err)
	}
	return nil
}

// rollAtTakeover is step 5: the new active segment at the log end, then the fence check that
// makes a takeover overtaken meanwhile remove it and fail instead of going on. (A loser that
// crashes before removing it leaves a segment no journal names: never part of the log.)
func (l *Log) rollAtTakeover(rec *recovered) error {
	f, err := l.createSegment(rec.leo, l.epoch)
	if err != nil {
		return err
	}
	if err := l.checkFence(l.fence, l.epoch); err != nil {
		_ = f.Close()
		_ = l.fsys.Remove(filepath.Join(l.dir, segmentName(rec.leo, l.epoch)))
		return err
	}
	l.mu.Lock()
	idx := newSegIndex(rec.leo, l.cfg.IndexIntervalBytes)
	l.activeIdx = idx
	l.activeFile = newPinned(cacheKey{owner: l.id, name: segmentName(rec.leo, l.epoch)}, f, idx) // closed with the log from here on
	l.mu.Unlock()
	return l.writeSnapshot(rec.leo, l.epoch, encodeSnapshot(checkpoint{offset: rec.leo, segBase: rec.leo, segEpoch: l.epoch}, rec.producers))
}

// recordTakeover is step 6: the recovered log and the roll point, durable in the claim's
// journal before the log serves. From now on a later takeover reads the log from here.
//
// The cleaned copies the log reads (and the cleaner's checkpoint) go first, in a record of
// their own: the takeover record counts only with them before it, and an earlier version,
// which skips the unknown record, still reads the takeover record (docs/compaction.md
// "Upgrades").
func (l *Log) recordTakeover(rec *recovered) error {
	t := takeoverRecord{logStart: rec.logStart, roll: rec.leo}
	c := cleanRecord{dirtyFrom: rec.dirtyFrom, horizon: rec.horizon}
	for _, s := range rec.closed {
		t.segments = append(t.segments, segRef{base: s.base, epoch: s.epoch})
		if s.gen.cleaned() {
			c.segments = append(c.segments, segRef{base: s.base, epoch: s.epoch, gen: s.gen})
		}
	}
	if len(c.segments) > 0 || c.dirtyFrom > 0 || c.horizon >= 0 {
		if err := l.journal.append(recClean, encodeClean(c)); err != nil {
			return storageErr("record takeover", err)
		}
	}
	if err := l.journal.append(recTakeover, encodeTakeover(t)); err != nil {
		return storageErr("record takeover", err)
	}
	return nil
}

// install makes the recovered log the serving state.
func (l *Log) install(rec *recovered) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = rec.closed
	l.logStart, l.leo, l.hw, l.hwPos = rec.logStart, rec.leo, rec.leo, 0
	l.producers = rec.producers
	l.epochs = rec.history
	l.dirtyFrom, l.horizon = rec.dirtyFrom, rec.horizon
}

// checkpointCandidate is a place recovery may start from.
type checkpointCandidate struct {
	cp        checkpoint
	seg       int // index in the valid segments
	producers *producerState
	fallback  bool // the start of the log, not a snapshot
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
		if valid[i].gen.cleaned() && (cp.pos != 0 || cp.offset != valid[i].base) {
			continue // a position in the bytes the cleaner has since rewritten
		}
		out = append(out, checkpointCandidate{cp: cp, seg: i, producers: ps})
	}
	start := checkpoint{}
	if len(valid) > 0 {
		start = checkpoint{offset: valid[0].base, segBase: valid[0].base, segEpoch: valid[0].epoch}
	}
	return append(out, checkpointCandidate{cp: start, seg: 0, producers: newProducerState(), fallback: true})
}

// recovery is one attempt to recover the log from one checkpoint.
type recovery struct {
	l         *Log
	cfg       Config
	segs      []diskSegment
	cp        checkpoint
	cpSeg     int
	producers *producerState
	fallback  bool // cp is the start of the log, not a snapshot

	closed []*segment // result: every recovered segment, now all closed
	tail   tailRange  // result: what the last segment's scan verified
}

func (r *recovery) run(ctx context.Context) error {
	r.closed = nil
	for i, s := range r.segs {
		seg, err := r.recoverSegment(ctx, i, s)
		if errors.Is(err, errVanished) && len(r.closed) == 0 {
			if i == r.cpSeg && !r.fallback {
				return fmt.Errorf("%w: its segment %s vanished", errBadCheckpoint, s.name())
			}
			// The oldest segments went since they were recorded: the log start moved past
			// them (retention by a leader whose record this takeover could not see).
			r.l.log.Info("The oldest segment vanished: the log start moved past it", "segment", s.name())
			continue
		}
		if errors.Is(err, errVanished) {
			return &StorageError{Op: "recover " + s.name(), Err: fmt.Errorf("%w: %w", ErrCorruptLog, err)}
		}
		if err != nil {
			return err
		}
		r.closed = append(r.closed, seg)
	}
	return nil
}

// recoverSegment recovers segment i: before the checkpoint its index is loaded (or rebuilt
// by walking headers); from the checkpoint on every batch is verified and applied to the
// producer state. A closed segment must hold exactly the batches up to its bound, or the log
// is corrupt; the last one ends after its last valid batch (whatever follows is never read).
func (r *recovery) recoverSegment(ctx context.Context, i int, s diskSegment) (*segment, error) {
	f, size, err := r.open(s)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only: a close error loses nothing
	if i < r.cpSeg {
		return r.indexBeforeCheckpoint(ctx, f, s)
	}
	x, pos, next, err := r.resumePoint(ctx, f, s, i, size)
	if err != nil {
		return nil, err
	}
	end, err := r.verify(ctx, f, s, x, pos, next, size)
	if err != nil {
		return nil, err
	}
	last := i == len(r.segs)-1
	if err := r.checkReachesBound(s, end, last); err != nil {
		return nil, err
	}
	if last {
		r.tail = tailRange{seg: s, from: pos, to: end.pos}
	} else if err := f.Sync(); err != nil {
		return nil, storageErr("recover: fsync "+s.name(), err)
	}
	if s.gen.cleaned() && !last {
		x.next = s.bound // the cleaner may have removed the segment's last offsets
	}
	if err := writeFileAtomic(r.l.fsys, filepath.Join(r.l.dir, s.indexName()), x.encode(s.epoch), r.l.epoch); err != nil {
		return nil, storageErr("recover: write index", err)
	}
	return segmentFromIndex(s.epoch, s.gen, x), nil
}

// open opens segment s for reading and returns its size.
func (r *recovery) open(s diskSegment) (File, int64, error) {
	name := s.name()
	f, err := r.l.fsys.OpenFile(filepath.Join(r.l.dir, name), os.O_RDONLY, 0)
	if vanished(err) {
		return nil, 0, fmt.Errorf("%w: %s: %w", errVanished, name, err)
	}
	if err != nil {
		return nil, 0, storageErr("recover: open "+name, err)
	}
	size, err := f.Size()
	if err != nil {
		_ = f.Close()
		return nil, 0, storageErr("recover: size "+name, err)
	}
	return f, size, nil
}

// indexBeforeCheckpoint is a closed segment before the checkpoint: verified when written, it
// only needs its index.
func (r *recovery) indexBeforeCheckpoint(ctx context.Context, f File, s diskSegment) (*segment, error) {
	x, err := r.l.loadIndex(ctx, f, s, s.bound, -1, r.cfg.IndexIntervalBytes)
	if err != nil {
		return nil, storageErr("recover", err)
	}
	if err := r.writeIndexIfChanged(s, x); err != nil {
		return nil, err
	}
	return segmentFromIndex(s.epoch, s.gen, x), nil
}

// resumePoint is where verification of segment i starts: its first byte, or the checkpoint's
// position in it (with the index of the bytes before, which were verified when written and
// made durable before the checkpoint was).
func (r *recovery) resumePoint(ctx context.Context, f File, s diskSegment, i int, size int64) (*segIndex, int64, int64, error) {
	x := newSegIndex(s.base, r.cfg.IndexIntervalBytes)
	if i != r.cpSeg {
		return x, 0, s.base, nil
	}
	name := s.name()
	switch {
	case r.cp.pos == 0 && r.cp.offset != s.base:
		return nil, 0, 0, fmt.Errorf("%w: snapshot at offset %d, byte 0 of %s", errBadCheckpoint, r.cp.offset, name)
	case r.cp.pos == 0:
		return x, 0, s.base, nil
	case r.cp.pos > size:
		return nil, 0, 0, fmt.Errorf("%w: snapshot at byte %d of %s, which has %d", errBadCheckpoint, r.cp.pos, name, size)
	}
	got, err := r.l.loadIndexPrefix(ctx, f, s, r.cp, x)
	if err != nil {
		return nil, 0, 0, err
	}
	return got, r.cp.pos, r.cp.offset, nil
}

// verify scans from pos, checking every batch (CRC-32C included) and applying idempotent ones
// to the producer state.
func (r *recovery) verify(ctx context.Context, f File, s diskSegment, x *segIndex, pos, next, size int64) (scanEnd, error) {
	end, err := scanBatches(ctx, f, pos, size, next, s.bound, true, s.gen.cleaned(), func(h batchHeader, pos int64) {
		x.add(h, pos)
		if h.idempotent() {
			r.producers.apply(h)
		}
	})
	if err != nil {
		return end, storageErr("recover: scan "+s.name(), err)
	}
	return end, nil
}

// checkReachesBound fails a closed segment whose batches stop short of the next segment's
// base: bytes lost or damaged in the middle of the log. The last segment just ends where its
// valid batches do (a torn tail is left in place and never read).
func (r *recovery) checkReachesBound(s diskSegment, end scanEnd, last bool) error {
	short := end.next != s.bound
	if s.gen.cleaned() {
		// The cleaner wrote the copy whole: every byte is a batch, the last may end short
		// of the bound (offsets it removed).
		short = end.next > s.bound || end.refused != nil
	}
	if !last && short {
		return &StorageError{Op: "recover " + s.name(), Err: fmt.Errorf("%w: batches stop at offset %d (byte %d), the next segment starts at %d: %v", ErrCorruptLog, end.next, end.pos, s.bound, end.refused)}
	}
	if last && end.refused != nil {
		r.l.log.Info("The partition's last segment ends in a torn tail; the log ends before it", "segment", s.name(), "validBytes", end.pos, "reason", end.refused.Error())
	}
	return nil
}

// loadIndexPrefix returns the index of segment s up to checkpoint cp: from its .index file if
// that ends exactly at the checkpoint, else by walking the headers, which must land exactly on
// the checkpoint (errBadCheckpoint otherwise: the snapshot is not about these bytes).
func (l *Log) loadIndexPrefix(ctx context.Context, f File, s diskSegment, cp checkpoint, x *segIndex) (*segIndex, error) {
	if b, err := readFile(l.fsys, filepath.Join(l.dir, s.indexName())); err == nil {
		if got, err := decodeIndex(b, s.base, s.epoch, int32(x.interval), false); err == nil && got.next == cp.offset && got.size == cp.pos {
			return got, nil
		}
	}
	end, err := scanBatches(ctx, f, 0, cp.pos, s.base, cp.offset, false, false, x.add)
	if err != nil {
		return nil, storageErr("recover: index "+s.name(), err)
	}
	if end.pos != cp.pos || end.next != cp.offset {
		return nil, fmt.Errorf("%w: batches reach offset %d at byte %d, snapshot says %d at %d", errBadCheckpoint, end.next, end.pos, cp.offset, cp.pos)
	}
	return x, nil
}

// writeIndexIfChanged writes a rebuilt index (one whose file was missing or stale).
func (r *recovery) writeIndexIfChanged(s diskSegment, x *segIndex) error {
	path := filepath.Join(r.l.dir, s.indexName())
	want := x.encode(s.epoch)
	if b, err := readFile(r.l.fsys, path); err == nil && string(b) == string(want) {
		return nil
	}
	if err := writeFileAtomic(r.l.fsys, path, want, r.l.epoch); err != nil {
		return storageErr("recover: write index", err)
	}
	return nil
}

// readLegacyLogStart reads the log-start offset file of a log from before journals (0 when
// never written or unreadable: the first segment's base then bounds it).
func (l *Log) readLegacyLogStart() (int64, error) {
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
