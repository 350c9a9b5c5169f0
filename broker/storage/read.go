package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// readHeaderAt reads the header of the batch at pos, checking its length against limit (the
// end of the readable bytes) before anything trusts it.
func readHeaderAt(f io.ReaderAt, pos, limit int64) (batchHeader, error) {
	if limit-pos < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes at %d, less than a batch header", ErrCorruptLog, limit-pos, pos)
	}
	var hdr [batchHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], pos); err != nil {
		return batchHeader{}, err
	}
	h := parseHeader(hdr[:])
	if h.Length < minBatchLength || h.size() > limit-pos {
		return batchHeader{}, fmt.Errorf("%w: batch at %d claims %d bytes, %d readable", ErrCorruptLog, pos, h.size(), limit-pos)
	}
	return h, nil
}

// locateBatch finds the batch of f holding offset, searching from pos (a batch boundary at
// or before it) within limit bytes: its position and header; found is false when the
// readable bytes end first.
func locateBatch(f io.ReaderAt, pos, limit, offset int64) (int64, batchHeader, bool, error) {
	for pos < limit {
		h, err := readHeaderAt(f, pos, limit)
		if err != nil {
			return pos, h, false, err
		}
		if h.lastOffset() >= offset {
			return pos, h, true, nil
		}
		pos += h.size()
	}
	return pos, batchHeader{}, false, nil
}

// readBatches returns the batches of f from the one holding offset, searching from pos (a
// batch boundary at or before it), within limit bytes, as a fresh copy: those cut allows
// (batchCut), and the offset after the last of them (offset when none).
func readBatches(f io.ReaderAt, pos, limit, offset int64, c batchCut) ([]byte, int64, error) {
	pos, h, found, err := locateBatch(f, pos, limit, offset)
	if !found || err != nil {
		return nil, offset, err
	}
	n := min(int64(max(c.maxBytes, 0)), limit-pos)
	if h.size() > n {
		if !c.atLeastOne {
			return nil, offset, nil
		}
		n = h.size()
	}
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, pos); err != nil && !(errors.Is(err, io.EOF)) {
		return nil, offset, err
	}
	cut, next := 0, offset
	for cut+batchLogOverhead <= len(buf) {
		length := int32(binary.BigEndian.Uint32(buf[cut+offLength:]))
		if length < minBatchLength {
			return nil, offset, fmt.Errorf("%w: batch at %d has length %d", ErrCorruptLog, pos+int64(cut), length)
		}
		size := int(length) + batchLogOverhead
		if cut+size > len(buf) {
			break
		}
		base := int64(binary.BigEndian.Uint64(buf[cut:]))
		if base >= c.limitOffset {
			break
		}
		next = base + int64(int32(binary.BigEndian.Uint32(buf[cut+offLastOffsetDelta:]))) + 1
		cut += size
	}
	return buf[:cut], next, nil
}

// OffsetForTimestamp answers ListOffsets for a timestamp ts ≥ 0: the first record at or
// after the log start with a timestamp ≥ ts below the high watermark, with its timestamp and
// the epoch it was written at; ok is false when there is none. Batches are found by their
// maxTimestamp through the time index; within an uncompressed CreateTime batch the records are
// examined for the exact record. Within a compressed CreateTime batch the answer is the
// batch's first record at or after the log start (with the batch's base timestamp), which may
// be older than ts: this package does not decompress (docs/storage.md). Records below the log
// start (DeleteRecords moves it inside a segment) are never answered, as Apache skips them. A
// closed segment that vanished meanwhile is a log-start move: the lookup starts again from the
// new log start.
func (l *Log) OffsetForTimestamp(ts int64) (TimestampOffset, bool, error) {
	for {
		got, ok, err := l.offsetForTimestamp(ts)
		if !errors.Is(err, errLogStartMoved) && !errors.Is(err, errSegmentReplaced) {
			return got, ok, err
		}
	}
}

var errLogStartMoved = errors.New("the log start moved")

// errSegmentReplaced is a closed segment that vanished because a cleaning pass replaced it:
// NOT_LEADER_OR_FOLLOWER to a client, which retries (docs/compaction.md "Swapping in, under the fence").
var errSegmentReplaced = fmt.Errorf("%w: segment replaced", ErrNotLeader)

func (l *Log) offsetForTimestamp(ts int64) (TimestampOffset, bool, error) {
	l.mu.Lock()
	if err := l.servingLocked(); err != nil {
		l.mu.Unlock()
		return TimestampOffset{}, false, err
	}
	hw, start := l.hw, l.logStart
	var segs []*segment
	for _, s := range l.closed {
		if s.maxTs >= ts && s.end > start {
			segs = append(segs, s)
		}
	}
	active := l.activeIdx.maxTs >= ts
	l.mu.Unlock()
	for _, seg := range segs {
		e, err := l.acquireClosed(seg)
		if err != nil {
			return TimestampOffset{}, false, l.closedUnavailable(seg, start, err)
		}
		_, pos := e.idx.floorTime(ts)
		found, ok, done, err := l.scanForTimestamp(seg, e, pos, seg.size, ts, start, hw)
		l.cache.release(e)
		if err != nil || ok || done {
			return found, ok, err
		}
	}
	if !active {
		return TimestampOffset{}, false, nil
	}
	l.mu.Lock()
	if err := l.servingLocked(); err != nil {
		l.mu.Unlock()
		return TimestampOffset{}, false, err
	}
	_, pos := l.activeIdx.floorTime(ts)
	limit, e := l.hwPos, l.activeFile
	l.cache.ref(e)
	l.mu.Unlock()
	defer l.cache.release(e)
	found, ok, _, err := l.scanForTimestamp(nil, e, pos, limit, ts, start, hw)
	return found, ok, err
}

// scanForTimestamp walks the batches of e (closed segment seg, or the active one when seg is
// nil) from pos to limit for the first record at or after start with a timestamp ≥ ts; done
// is true when the walk reached the high watermark (nothing later can answer).
func (l *Log) scanForTimestamp(seg *segment, e *cachedSegment, pos, limit, ts, start, hw int64) (found TimestampOffset, ok, done bool, err error) {
	for pos < limit {
		h, err := readHeaderAt(e.f, pos, limit)
		if err != nil {
			return TimestampOffset{}, false, true, l.segmentReadFailed(seg, start, err)
		}
		if h.MaxTimestamp < ts || h.lastOffset() < start {
			pos += h.size()
			continue
		}
		if h.BaseOffset >= hw {
			return TimestampOffset{}, false, true, nil
		}
		b := make([]byte, h.size())
		if _, err := e.f.ReadAt(b, pos); err != nil && !errors.Is(err, io.EOF) {
			return TimestampOffset{}, false, true, l.segmentReadFailed(seg, start, err)
		}
		if off, t, ok := recordAtOrAfter(b, h, ts, start); ok {
			return TimestampOffset{Timestamp: t, Offset: off, LeaderEpoch: h.LeaderEpoch}, true, true, nil
		}
		pos += h.size() // its records at ts or later are all below the log start
	}
	return TimestampOffset{}, false, false, nil
}

// recordAtOrAfter finds, in batch b (header h, maxTimestamp ≥ ts, last offset ≥ start), the
// first record at or after offset start with a timestamp ≥ ts; ok is false when the batch's
// only such records are below start. LogAppendTime batches give every record the batch's
// maxTimestamp; a compressed CreateTime batch is answered with its first record from start;
// an uncompressed one is walked record by record (length, attributes, timestampDelta,
// offsetDelta, ... as zig-zag varints), never past a length it has not checked.
func recordAtOrAfter(b []byte, h batchHeader, ts, start int64) (offset, timestamp int64, ok bool) {
	first := max(h.BaseOffset, start)
	if h.Attributes&attrLogAppendTime != 0 {
		return first, h.MaxTimestamp, true
	}
	if h.Attributes&attrCodecMask != 0 {
		return first, h.BaseTimestamp, true
	}
	below := false // a record ≥ ts lies below the log start
	p := b[batchHeaderSize:]
	for range h.RecordCount {
		length, n := binary.Varint(p)
		if n <= 0 || length < 0 || length > int64(len(p)-n) {
			break
		}
		rec := p[n : n+int(length)]
		p = p[n+int(length):]
		if len(rec) < 1 {
			break
		}
		tsDelta, m := binary.Varint(rec[1:])
		if m <= 0 {
			break
		}
		offDelta, k := binary.Varint(rec[1+m:])
		if k <= 0 {
			break
		}
		if t := h.BaseTimestamp + tsDelta; t >= ts {
			if off := h.BaseOffset + offDelta; off >= start {
				return off, t, true
			}
			below = true
		}
	}
	if below {
		return 0, 0, false
	}
	// maxTimestamp promised a record ≥ ts the records do not hold: answer the batch.
	return first, h.MaxTimestamp, true
}

// MaxTimestamp answers ListOffsets MAX_TIMESTAMP (-3): the largest batch maxTimestamp and, as
// Apache 3.7 does, the last offset of the (first) batch holding it. ok is false when no batch
// has a timestamp or that batch is not below the high watermark yet (Apache filters it out).
func (l *Log) MaxTimestamp() (TimestampOffset, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.servingLocked(); err != nil {
		return TimestampOffset{}, false, err
	}
	best := TimestampOffset{Timestamp: -1, Offset: -1}
	for _, s := range l.closed {
		if s.maxTs > best.Timestamp {
			best.Timestamp, best.Offset = s.maxTs, s.maxTsOffset
		}
	}
	if l.activeIdx.maxTs > best.Timestamp {
		best.Timestamp, best.Offset = l.activeIdx.maxTs, l.activeIdx.maxTsOffset
	}
	if best.Timestamp < 0 || best.Offset >= l.hw {
		return TimestampOffset{}, false, nil
	}
	best.LeaderEpoch = l.epochAtLocked(best.Offset)
	return best, true, nil
}

// EpochAt is the leader epoch offset was written at, from the epoch history (-1 when the
// log is empty or not serving). ListOffsets reports it with the earliest offset.
func (l *Log) EpochAt(offset int64) int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.servingLocked() != nil {
		return -1
	}
	return l.epochAtLocked(offset)
}

func (l *Log) epochAtLocked(offset int64) int32 {
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].start > offset })
	if i == 0 {
		if len(l.epochs) == 0 {
			return -1
		}
		return l.epochs[0].epoch
	}
	return l.epochs[i-1].epoch
}

// EpochEndOffset answers OffsetForLeaderEpoch as Apache's LeaderEpochFileCache.endOffsetFor
// does (docs/dataplane.md "ListOffsets, OffsetForLeaderEpoch, InitProducerId"): this log's own epoch → (epoch, log end offset); an older epoch →
// (the largest epoch ≤ it, the start offset of the epoch after that); older than every epoch
// → (epoch, the first epoch's start); newer than every epoch → (-1, -1).
func (l *Log) EpochEndOffset(epoch int32) (int32, int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.servingLocked(); err != nil {
		return 0, 0, err
	}
	if epoch == l.epoch {
		return epoch, l.leo, nil
	}
	hist := l.epochs
	i := sort.Search(len(hist), func(i int) bool { return hist[i].epoch > epoch })
	switch {
	case i == len(hist):
		return -1, -1, nil
	case i == 0:
		return epoch, max(hist[0].start, l.logStart), nil
	}
	return hist[i-1].epoch, max(hist[i].start, l.logStart), nil
}
