package storage

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/paddock-dev/paddock/broker/storage/records"
)

// Compaction (docs/compaction.md): a cleaning pass on a serving log keeps the latest record
// of every key. It reads the log's closed segments and writes a cleaned copy of each beside
// it under a name of its own; the flusher then swaps the copies in by recording them in the
// claim's journal — the point of no return — and checking the fence, as an append is
// acknowledged only after its fence check. Nothing a newer leader reads is ever changed.

// attrDeleteHorizon is batch attribute bit 6: baseTimestamp holds the delete horizon (KIP-534),
// the time after which the cleaner drops the batch's tombstones, or the marker itself.
const attrDeleteHorizon = 1 << 6

// ErrOffsetMapTooSmall is a pass that could not map a single batch of the dirty section:
// log.cleaner.dedupe.buffer.size is too small for it. The partition is not cleaned until the
// buffer grows (docs/compaction.md "Bounded").
var ErrOffsetMapTooSmall = errors.New("the cleaner's offset map is too small for the log's largest batch")

// CleanResult is what one cleaning pass did.
type CleanResult struct {
	// Cleaned is true when a pass ran and its copies were swapped in.
	Cleaned bool
	// Segments is how many segments were replaced by cleaned copies.
	Segments int
	// DirtyFrom and DirtyTo are the dirty section the pass mapped: every record below
	// DirtyTo is now the latest of its key among the offsets below DirtyTo.
	DirtyFrom, DirtyTo int64
	// BytesRead and BytesWritten are the segment bytes the pass read (twice for the dirty
	// section: mapping, then cleaning) and wrote.
	BytesRead, BytesWritten int64
	// RecordsRemoved counts the records the pass dropped.
	RecordsRemoved int64
}

// cleanPlan is what a pass cleans, taken from the serving log at one instant.
type cleanPlan struct {
	epoch     int32
	pass      uint32
	cfg       Config
	segs      []*segment // the cleanable segments from the log start on, in log order
	dirtyFrom int64
	// lastBatch is each producer's last batch's last offset: that batch is kept, emptied if
	// need be, so a log recovered without a snapshot still knows the producer (KAFKA-5443).
	lastBatch map[int64]int64
	aborted   map[int64][]AbortedTxn // the aborted-transaction index by producer
	nowMs     int64
}

// CompactionStats is a compacted log's cleaning state at one instant (the broker's metrics).
type CompactionStats struct {
	// CleanableBytes are the bytes of the closed segments a pass may clean now; DirtyBytes
	// those of them not cleaned yet; DirtyRatio = DirtyBytes / CleanableBytes (0 when none).
	CleanableBytes, DirtyBytes int64
	DirtyRatio                 float64
	// Lag is how long the oldest dirty record has waited (0 when nothing is dirty):
	// max.compaction.lag.ms bounds it.
	Lag time.Duration
	// DirtyFrom is the cleaner's checkpoint: the first offset not cleaned yet.
	DirtyFrom int64
	// HorizonDue: a tombstone's or marker's delete horizon has passed, so a pass has
	// something to drop even when nothing is dirty.
	HorizonDue bool
}

// cleanableLocked is the prefix of the closed segments a pass may clean: from the log start,
// below the active segment and the last stable offset (undecided transactions are never
// cleaned), and older than min.compaction.lag.ms.
func (l *Log) cleanableLocked(nowMs int64) []*segment {
	limit := min(l.activeIdx.base, l.lastStableLocked())
	var segs []*segment
	for _, s := range l.closed {
		if s.end <= l.logStart {
			continue
		}
		if s.end > limit || (l.cfg.MinCompactionLagMs > 0 && s.maxTs > nowMs-l.cfg.MinCompactionLagMs) {
			break
		}
		segs = append(segs, s)
	}
	return segs
}

func (l *Log) compactionStatsLocked(nowMs int64) CompactionStats {
	st := CompactionStats{DirtyFrom: max(l.dirtyFrom, l.logStart), HorizonDue: l.horizon >= 0 && nowMs >= l.horizon}
	oldest := int64(-1)
	for _, s := range l.cleanableLocked(nowMs) {
		st.CleanableBytes += s.size
		if s.end > st.DirtyFrom {
			st.DirtyBytes += s.size
			if oldest < 0 && s.maxTs >= 0 {
				oldest = s.maxTs
			}
		}
	}
	if st.CleanableBytes > 0 {
		st.DirtyRatio = float64(st.DirtyBytes) / float64(st.CleanableBytes)
	}
	if oldest >= 0 && nowMs > oldest {
		st.Lag = time.Duration(nowMs-oldest) * time.Millisecond
	}
	return st
}

// CompactionStats reports the log's cleaning state; ok is false when the log is not
// compacted or not serving.
func (l *Log) CompactionStats() (CompactionStats, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateServing || !l.cfg.Compact {
		return CompactionStats{}, false
	}
	return l.compactionStatsLocked(l.opts.Now().UnixMilli()), true
}

// planCleanLocked is the pass to run now, or nil: the log is compacted and serving, some
// cleanable segment is dirty, and its dirty ratio is above min.cleanable.dirty.ratio or its
// oldest dirty data is past max.compaction.lag.ms (or force).
func (l *Log) planCleanLocked(now time.Time, force bool) *cleanPlan {
	if l.state != stateServing || l.stopWanted || l.broken != nil || !l.cfg.Compact {
		return nil
	}
	nowMs := now.UnixMilli()
	st := l.compactionStatsLocked(nowMs)
	segs := l.cleanableLocked(nowMs)
	if len(segs) == 0 {
		return nil
	}
	dirty := segs[len(segs)-1].end > st.DirtyFrom
	due := st.DirtyRatio > l.cfg.MinCleanableDirtyRatio || st.Lag.Milliseconds() > l.cfg.MaxCompactionLagMs
	// A delete horizon that has passed needs a pass even with nothing dirty: it drops the
	// tombstones and markers past it (and finds the next horizon).
	if wanted := dirty && (due || force); !wanted && !st.HorizonDue {
		return nil
	}
	l.cleanPasses++
	p := &cleanPlan{
		epoch: l.epoch, pass: l.cleanPasses, cfg: l.cfg, segs: segs, dirtyFrom: st.DirtyFrom,
		lastBatch: map[int64]int64{}, aborted: map[int64][]AbortedTxn{}, nowMs: nowMs,
	}
	for pid, e := range l.producers.m {
		if n := len(e.batches); n > 0 {
			p.lastBatch[pid] = e.batches[n-1].lastOffset
		}
	}
	for _, a := range l.producers.aborted {
		p.aborted[a.ProducerID] = append(p.aborted[a.ProducerID], a)
	}
	return p
}

// isAborted reports a transactional batch of an aborted transaction.
func (p *cleanPlan) isAborted(h batchHeader) bool {
	for _, a := range p.aborted[h.ProducerID] {
		if a.FirstOffset <= h.BaseOffset && h.BaseOffset <= a.LastOffset {
			return true
		}
	}
	return false
}

// cleaning is one pass's working state.
type cleaning struct {
	l   *Log
	p   *cleanPlan
	env *cleanerEnv
	m   *offsetMap
	// mapEnd: every record below it was mapped (or is a marker or aborted); the map holds
	// the latest offset below it of every key.
	mapEnd int64
	// txnKept is, per producer, whether a data batch of its transaction since its last
	// marker kept a record: its marker stays while it does (CleanedTransactionMetadata).
	txnKept map[int64]bool
	// horizon is the earliest delete horizon among the batches the copies keep (-1: none).
	horizon int64
	res     CleanResult
}

// cleanPass runs one pass on l with plan p and swaps its copies in. It returns what it did;
// an error is the pass's (the log itself fails only if the swap's journal record or fence
// check does).
func (l *Log) cleanPass(ctx context.Context, env *cleanerEnv, p *cleanPlan) (CleanResult, error) {
	c := &cleaning{l: l, p: p, env: env, m: env.offsetMap(), mapEnd: p.dirtyFrom, txnKept: map[int64]bool{}, horizon: -1}
	c.res.DirtyFrom = p.dirtyFrom
	if err := c.buildMap(ctx); err != nil {
		return c.res, err
	}
	c.res.DirtyTo = c.mapEnd
	var old, fresh []*segment
	for _, s := range p.segs {
		if s.base >= c.mapEnd {
			break
		}
		ns, err := c.cleanSegment(ctx, s)
		if err != nil {
			l.removeCopies(p, fresh)
			return c.res, err
		}
		old, fresh = append(old, s), append(fresh, ns)
	}
	if len(fresh) == 0 {
		return c.res, nil
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		l.removeCopies(p, fresh)
		return c.res, storageErr("clean: sync directory", err)
	}
	swapped, err := l.swapInCopies(ctx, p, old, fresh, c.mapEnd, c.horizon)
	if err != nil || !swapped {
		return c.res, err
	}
	c.res.Cleaned, c.res.Segments = true, len(fresh)
	return c.res, nil
}

// buildMap maps the dirty section, segment by segment, until the map is full: the map then
// holds every key's latest offset below mapEnd. Markers and aborted batches are not mapped
// (an aborted record is never a key's latest).
func (c *cleaning) buildMap(ctx context.Context) error {
	p := c.p
	c.m.reset()
	dirty := false
	for _, s := range p.segs {
		if s.end <= p.dirtyFrom {
			continue
		}
		dirty = true
		full := false
		err := c.eachBatch(ctx, s, func(h batchHeader, b []byte) (bool, error) {
			if h.lastOffset() < p.dirtyFrom {
				return true, nil
			}
			if h.Attributes&attrControl != 0 || (h.Attributes&attrTransactional != 0 && p.isAborted(h)) {
				c.mapEnd = h.nextOffset()
				return true, nil
			}
			if int(h.RecordCount) > c.m.room() {
				full = true
				return false, nil
			}
			recs, err := records.Decode(uint16(h.Attributes), b[batchHeaderSize:], h.RecordCount, decodeLimit(len(b)))
			if err != nil {
				return false, fmt.Errorf("%w: batch at offset %d: %w", ErrCorruptLog, h.BaseOffset, err)
			}
			for _, r := range recs {
				if off := h.BaseOffset + int64(r.OffsetDelta); off >= p.dirtyFrom && r.Key != nil {
					c.m.put(r.Key, off)
				}
			}
			c.mapEnd = h.nextOffset()
			return true, nil
		})
		if err != nil {
			return err
		}
		if full {
			break
		}
		c.mapEnd = s.end
	}
	if dirty && c.mapEnd <= p.dirtyFrom {
		return fmt.Errorf("%w (%d keys in log.cleaner.dedupe.buffer.size)", ErrOffsetMapTooSmall, c.m.limit)
	}
	return nil
}

// decodeLimit bounds a batch's decompressed records: generous for real data, never a bomb.
func decodeLimit(batchBytes int) int { return min(max(64*batchBytes, 1<<20), 256<<20) }

// eachBatch reads segment s's batches in order, each whole and CRC-checked, and hands them
// to visit until it returns false.
func (c *cleaning) eachBatch(ctx context.Context, s *segment, visit func(h batchHeader, b []byte) (bool, error)) error {
	f, err := c.l.fsys.OpenFile(filepath.Join(c.l.dir, s.name()), os.O_RDONLY, 0)
	if err != nil {
		return storageErr("clean: open "+s.name(), err)
	}
	defer func() { _ = f.Close() }() // read only
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, s.size), c.env.ioBufferBytes)
	var hdr [batchHeaderSize]byte
	next := s.base
	for pos := int64(0); pos < s.size; {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return storageErr("clean: read "+s.name(), err)
		}
		h := parseHeader(hdr[:])
		if err := h.storedShapeError(true); err != nil || h.size() > s.size-pos || h.BaseOffset < next || h.nextOffset() > s.end {
			return &StorageError{Op: "clean " + s.name(), Err: fmt.Errorf("%w: batch at byte %d (offset %d) does not belong here: %v", ErrCorruptLog, pos, h.BaseOffset, err)}
		}
		b := c.env.batchBuffer(int(h.size()))
		copy(b, hdr[:])
		if _, err := io.ReadFull(br, b[batchHeaderSize:]); err != nil {
			return storageErr("clean: read "+s.name(), err)
		}
		if batchCRC(b) != h.CRC {
			return &StorageError{Op: "clean " + s.name(), Err: fmt.Errorf("%w: CRC-32C mismatch in the batch at offset %d", ErrCorruptLog, h.BaseOffset)}
		}
		c.res.BytesRead += int64(len(b))
		if err := c.env.throttle(ctx, len(b)); err != nil {
			return err
		}
		more, err := visit(h, b)
		if err != nil || !more {
			return err
		}
		pos += h.size()
		next = h.nextOffset()
	}
	return nil
}

// cleanSegment writes s's cleaned copy (under a temporary name, fsynced, renamed) and its
// index, and returns the copy's summary.
func (c *cleaning) cleanSegment(ctx context.Context, s *segment) (*segment, error) {
	l, p := c.l, c.p
	gen := cleanGen{by: p.epoch, n: p.pass}
	path := filepath.Join(l.dir, segFileName(s.base, s.epoch, gen, segmentSuffix))
	tmp := tmpName(path, p.epoch)
	f, err := l.fsys.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return nil, storageErr("clean: create "+filepath.Base(tmp), err)
	}
	x := newSegIndex(s.base, p.cfg.IndexIntervalBytes)
	w := &copyWriter{f: f, env: c.env, ctx: ctx}
	err = c.eachBatch(ctx, s, func(h batchHeader, b []byte) (bool, error) {
		out, removed, err := c.cleanBatch(h, b)
		if err != nil {
			return false, err
		}
		c.res.RecordsRemoved += int64(removed)
		if out != nil {
			oh := parseHeader(out)
			// A horizon still to come: its tombstones or marker go at the first pass after
			// it. (A past one the copy keeps has nothing left to drop but on a dirty pass.)
			if oh.Attributes&attrDeleteHorizon != 0 && oh.BaseTimestamp > c.p.nowMs && (c.horizon < 0 || oh.BaseTimestamp < c.horizon) {
				c.horizon = oh.BaseTimestamp
			}
			x.add(oh, w.pos)
			if err := w.write(out); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err == nil {
		err = w.flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fsys.Rename(tmp, path)
	}
	if err != nil {
		_ = l.fsys.Remove(tmp)
		return nil, storageErr("clean "+s.name(), err)
	}
	c.res.BytesWritten += w.pos
	x.next = s.end
	ns := segmentFromIndex(s.epoch, gen, x)
	if err := writeFileAtomic(l.fsys, filepath.Join(l.dir, ns.indexName()), x.encode(s.epoch), p.epoch); err != nil {
		_ = l.fsys.Remove(path)
		return nil, storageErr("clean: write index", err)
	}
	return ns, nil
}

// cleanBatch decides what of batch b (header h, CRC checked) the copy keeps: b itself, a
// rebuilt batch, or nil (nothing); removed counts the records dropped.
//
//   - A record is kept iff it has a key, no later record of that key is mapped, and it is
//     not a tombstone past its batch's delete horizon.
//   - An aborted transaction's batches are dropped whole.
//   - A marker goes once no record of its transaction is kept and its horizon has passed.
//   - The first pass that keeps a tombstone or a marker stamps the batch's delete horizon:
//     now + delete.retention.ms in baseTimestamp, attribute bit 6 (record timestamps are
//     re-based, so they read the same).
//   - A producer's last batch is kept when emptied: its header, no records.
func (c *cleaning) cleanBatch(h batchHeader, b []byte) ([]byte, int, error) {
	p := c.p
	horizonSet := h.Attributes&attrDeleteHorizon != 0
	expired := horizonSet && p.nowMs >= h.BaseTimestamp
	lastOff, known := p.lastBatch[h.ProducerID]
	last := h.ProducerID >= 0 && known && lastOff == h.lastOffset()
	newHorizon := p.nowMs + p.cfg.DeleteRetentionMs
	if h.Attributes&attrControl != 0 {
		kept := c.txnKept[h.ProducerID]
		delete(c.txnKept, h.ProducerID)
		switch {
		case !kept && expired && !last:
			return nil, 0, nil
		case horizonSet:
			return b, 0, nil
		}
		// The marker's record keeps its fixed form (its timestamp is nobody's business).
		out := slices.Clone(b)
		be := binary.BigEndian
		be.PutUint16(out[offAttributes:], be.Uint16(out[offAttributes:])|attrDeleteHorizon)
		be.PutUint64(out[offBaseTimestamp:], uint64(newHorizon))
		be.PutUint32(out[offCRC:], batchCRC(out))
		return out, 0, nil
	}
	if h.Attributes&attrTransactional != 0 && p.isAborted(h) {
		if last {
			return emptyBatch(b), int(h.RecordCount), nil
		}
		return nil, int(h.RecordCount), nil
	}
	recs, err := records.Decode(uint16(h.Attributes), b[batchHeaderSize:], h.RecordCount, decodeLimit(len(b)))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: batch at offset %d: %w", ErrCorruptLog, h.BaseOffset, err)
	}
	kept := recs[:0:0]
	tombstones := false
	for _, r := range recs {
		off := h.BaseOffset + int64(r.OffsetDelta)
		if r.Key == nil {
			continue
		}
		if latest, ok := c.m.get(r.Key); ok && latest > off {
			continue
		}
		if r.Value == nil {
			if expired {
				continue
			}
			tombstones = true
		}
		kept = append(kept, r)
	}
	removed := len(recs) - len(kept)
	if h.Attributes&attrTransactional != 0 && len(kept) > 0 {
		c.txnKept[h.ProducerID] = true
	}
	needHorizon := tombstones && !horizonSet
	switch {
	case len(kept) == 0 && last:
		return emptyBatch(b), removed, nil
	case len(kept) == 0:
		return nil, removed, nil
	case removed == 0 && !needHorizon:
		return b, 0, nil
	}
	base := h.BaseTimestamp
	if needHorizon {
		base = newHorizon
	}
	out, err := rebuildBatch(h, b, kept, base)
	return out, removed, err
}

// rebuildBatch is batch b (header h) holding only recs, with baseTimestamp base (a delete
// horizon when it differs from h's): the same base offset, last offset delta, producer fields,
// codec and leader epoch; record timestamps re-based so each reads as before; maxTimestamp
// the largest kept (a LogAppendTime batch keeps its own).
func rebuildBatch(h batchHeader, b []byte, recs []records.Record, base int64) ([]byte, error) {
	attrs := uint16(h.Attributes)
	maxTs := h.MaxTimestamp
	if base != h.BaseTimestamp {
		attrs |= attrDeleteHorizon
	}
	out := make([]records.Record, len(recs))
	if attrs&attrLogAppendTime == 0 {
		maxTs = -1
	}
	for i, r := range recs {
		ts := h.BaseTimestamp + r.TimestampDelta
		if attrs&attrLogAppendTime == 0 {
			maxTs = max(maxTs, ts)
		}
		r.TimestampDelta = ts - base
		out[i] = r
	}
	body, err := records.Encode(int(attrs&attrCodecMask), out)
	if err != nil {
		return nil, err
	}
	nb := make([]byte, batchHeaderSize, batchHeaderSize+len(body))
	copy(nb, b[:batchHeaderSize])
	nb = append(nb, body...)
	be := binary.BigEndian
	be.PutUint32(nb[offLength:], uint32(len(nb)-batchLogOverhead))
	be.PutUint16(nb[offAttributes:], attrs)
	be.PutUint64(nb[offBaseTimestamp:], uint64(base))
	be.PutUint64(nb[offMaxTimestamp:], uint64(maxTs))
	be.PutUint32(nb[offRecordCount:], uint32(len(recs)))
	be.PutUint32(nb[offCRC:], batchCRC(nb))
	return nb, nil
}

// emptyBatch is b's header alone: no records, uncompressed, the same offsets and producer
// fields (Apache's writeEmptyHeader).
func emptyBatch(b []byte) []byte {
	nb := slices.Clone(b[:batchHeaderSize])
	be := binary.BigEndian
	be.PutUint32(nb[offLength:], uint32(batchHeaderSize-batchLogOverhead))
	be.PutUint16(nb[offAttributes:], be.Uint16(nb[offAttributes:])&^attrCodecMask)
	be.PutUint32(nb[offRecordCount:], 0)
	be.PutUint32(nb[offCRC:], crc32.Checksum(nb[offAttributes:], castagnoli))
	return nb
}

// copyWriter writes a cleaned copy through a buffer, throttled.
type copyWriter struct {
	f   File
	env *cleanerEnv
	ctx context.Context
	buf []byte
	pos int64 // bytes written or buffered
	at  int64 // file position of buf[0]
}

func (w *copyWriter) write(b []byte) error {
	if len(w.buf)+len(b) > w.env.ioBufferBytes && len(w.buf) > 0 {
		if err := w.flush(); err != nil {
			return err
		}
	}
	w.buf = append(w.buf, b...)
	w.pos += int64(len(b))
	return nil
}

func (w *copyWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.WriteAt(w.buf, w.at); err != nil {
		return err
	}
	w.at += int64(len(w.buf))
	n := len(w.buf)
	w.buf = w.buf[:0]
	return w.env.throttle(w.ctx, n)
}

// removeCopies removes a pass's copies that were never swapped in.
func (l *Log) removeCopies(p *cleanPlan, fresh []*segment) {
	for _, s := range fresh {
		_ = l.fsys.Remove(filepath.Join(l.dir, s.name()))
		_ = l.fsys.Remove(filepath.Join(l.dir, s.indexName()))
	}
}

// swapInCopies runs on the flusher: the copies in fresh replace the segments in old, unless
// the log changed meanwhile (retention or DeleteRecords removed one of them: the pass is
// dropped, swapped false). Order: the journal record (from here a successor reads the copies —
// they are durable, and their names are in the record), the fence check (failed: the log
// stops; nothing is removed, so whichever of the two a successor reads is whole), then the
// log reads the copies and the files replaced by the previous pass are removed.
func (l *Log) swapInCopies(ctx context.Context, p *cleanPlan, old, fresh []*segment, dirtyTo, horizon int64) (bool, error) {
	swapped := false
	err := l.runOnFlusher(ctx, func() error {
		l.mu.Lock()
		if err := l.servingLocked(); err != nil {
			l.mu.Unlock()
			return err
		}
		at := make([]int, len(old))
		for i, s := range old {
			at[i] = slices.Index(l.closed, s)
			if at[i] < 0 {
				l.mu.Unlock()
				l.removeCopies(p, fresh)
				return nil // the log start moved past it meanwhile: clean again next time
			}
		}
		l.mu.Unlock()
		rec := cleanRecord{dirtyFrom: max(dirtyTo, p.dirtyFrom), horizon: horizon}
		for _, s := range fresh {
			rec.segments = append(rec.segments, segRef{base: s.base, epoch: s.epoch, gen: s.gen})
		}
		if err := l.journalAppend(recClean, encodeClean(rec)); err != nil {
			l.fail(storageErr("clean: record", err))
			return l.Err()
		}
		if err := l.fenceCheck(); err != nil {
			l.fail(err)
			return l.Err()
		}
		l.mu.Lock()
		closed := slices.Clone(l.closed)
		for i, j := range at {
			closed[j] = fresh[i]
		}
		l.closed = closed
		l.dirtyFrom = max(l.dirtyFrom, dirtyTo)
		l.horizon = horizon
		retired := l.retired
		l.retired = nil
		for _, s := range old {
			l.retired = append(l.retired, s.name(), s.indexName())
		}
		l.mu.Unlock()
		for _, s := range old {
			l.cache.forget(l.cacheKey(s))
		}
		l.removeRetired(retired)
		swapped = true
		return nil
	})
	return swapped, err
}

// removeRetired removes the files of segments an earlier pass replaced. They are no longer
// part of the log: the journal names their copies.
func (l *Log) removeRetired(names []string) {
	for _, n := range names {
		if err := l.fsys.Remove(filepath.Join(l.dir, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			l.log.V(1).Info("Could not remove a segment the cleaner replaced", "file", n, "err", err.Error())
		}
	}
}

// journalAppend appends one record to the claim's journal, durably.
func (l *Log) journalAppend(kind byte, payload []byte) error {
	l.journalSem <- struct{}{}
	defer func() { <-l.journalSem }()
	l.mu.Lock()
	j := l.journal
	l.mu.Unlock()
	return j.append(kind, payload)
}

// Clean runs one cleaning pass on the log now, if it is compacted and has dirty cleanable
// segments (or a delete horizon that has passed), whatever its dirty ratio. It uses the
// log's Cleaner (Options.Cleaner), else a shared one with a 16 MiB offset map.
func (l *Log) Clean(ctx context.Context) (CleanResult, error) {
	c := l.opts.Cleaner
	if c == nil {
		fallbackCleanerOnce.Do(func() { fallbackCleaner = NewCleaner(CleanerConfig{DedupeBufferBytes: 16 << 20}) })
		c = fallbackCleaner
	}
	return c.clean(ctx, l, true)
}

var (
	fallbackCleanerOnce sync.Once
	fallbackCleaner     *Cleaner
)
