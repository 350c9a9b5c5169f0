package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// indexEntry is one entry of a segment's sparse index: the batch starting at offset begins at
// byte pos, and every batch before it has maxTimestamp ≤ maxTsBefore. One entry type serves
// both lookups Kafka keeps separate files for: by offset (the offset index) and by timestamp
// (the time index, since maxTsBefore only grows).
type indexEntry struct {
	offset      int64
	pos         int64
	maxTsBefore int64
}

// segIndex is a segment's index and summary. It is built batch by batch (append, recovery
// scan or rebuild) with the same rule, so a rebuilt index equals the one written at append.
// It is never on the fsync path: appends update it in memory; it is written to the segment's
// .index file when the segment is closed (roll, relinquish, takeover).
type segIndex struct {
	base     int64
	interval int64
	entries  []indexEntry
	// lastEntryPos is the byte position of the last entry (0, the segment start, when none).
	lastEntryPos int64

	next        int64 // offset after the last batch; base when empty
	size        int64 // bytes of batches
	maxTs       int64 // largest batch maxTimestamp; -1 when no batch has a timestamp
	maxTsOffset int64 // last offset of the first batch holding maxTs; -1 with maxTs
	batches     int64
}

func newSegIndex(base int64, interval int32) *segIndex {
	return &segIndex{base: base, interval: int64(interval), next: base, maxTs: -1, maxTsOffset: -1}
}

// add records the batch h stored at pos, which must be x.size (batches are contiguous).
func (x *segIndex) add(h batchHeader, pos int64) {
	if pos-x.lastEntryPos >= x.interval {
		x.entries = append(x.entries, indexEntry{offset: h.BaseOffset, pos: pos, maxTsBefore: x.maxTs})
		x.lastEntryPos = pos
	}
	if h.MaxTimestamp > x.maxTs {
		// Apache 3.7 answers ListOffsets MAX_TIMESTAMP with the batch's last offset.
		x.maxTs, x.maxTsOffset = h.MaxTimestamp, h.lastOffset()
	}
	x.next = h.nextOffset()
	x.size = pos + h.size()
	x.batches++
}

// floorOffset is where to start walking batches to find offset: the last entry at or before
// it, else the segment start.
func (x *segIndex) floorOffset(offset int64) (start, pos int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].offset > offset })
	if i == 0 {
		return x.base, 0
	}
	e := x.entries[i-1]
	return e.offset, e.pos
}

// floorTime is where to start walking batches to find the first with maxTimestamp ≥ ts: the
// last entry all of whose predecessors are older than ts, else the segment start.
func (x *segIndex) floorTime(ts int64) (start, pos int64) {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].maxTsBefore >= ts })
	if i == 0 {
		return x.base, 0
	}
	e := x.entries[i-1]
	return e.offset, e.pos
}

// The .index file: magic, the summary, the entries, then a CRC-32C of everything before it.
const (
	indexMagic      = "PDKIDX01"
	indexHeaderSize = 8 + 8 + 4 + 8*6 + 4
	indexEntrySize  = 24
)

var errBadIndex = errors.New("invalid index file")

func (x *segIndex) encode(epoch int32) []byte {
	be := binary.BigEndian
	b := make([]byte, 0, indexHeaderSize+len(x.entries)*indexEntrySize+4)
	b = append(b, indexMagic...)
	b = be.AppendUint64(b, uint64(x.base))
	b = be.AppendUint32(b, uint32(epoch))
	for _, v := range []int64{x.next, x.size, x.maxTs, x.maxTsOffset, x.batches, x.lastEntryPos} {
		b = be.AppendUint64(b, uint64(v))
	}
	b = be.AppendUint32(b, uint32(len(x.entries)))
	for _, e := range x.entries {
		b = be.AppendUint64(b, uint64(e.offset))
		b = be.AppendUint64(b, uint64(e.pos))
		b = be.AppendUint64(b, uint64(e.maxTsBefore))
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIndex parses an .index file written for segment (base, epoch). It checks everything it
// relies on — length, CRC, identity, and that the entries are ordered and inside the summary —
// so a damaged or foreign file is rejected (and the index rebuilt from the segment) instead of
// misdirecting a read.
//
// A cleaned segment's index (gaps) has next at the segment's end, which its last batch may not
// reach, and may describe no batch at all.
func decodeIndex(b []byte, base int64, epoch int32, interval int32, gaps bool) (*segIndex, error) {
	be := binary.BigEndian
	if len(b) < indexHeaderSize+4 || string(b[:8]) != indexMagic {
		return nil, fmt.Errorf("%w: too short or wrong magic", errBadIndex)
	}
	body, sum := b[:len(b)-4], be.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, fmt.Errorf("%w: CRC mismatch", errBadIndex)
	}
	p := b[8:]
	gotBase, gotEpoch := int64(be.Uint64(p)), int32(be.Uint32(p[8:]))
	p = p[12:]
	var v [6]int64
	for i := range v {
		v[i] = int64(be.Uint64(p[8*i:]))
	}
	p = p[48:]
	count := be.Uint32(p)
	p = p[4:]
	if gotBase != base || gotEpoch != epoch {
		return nil, fmt.Errorf("%w: written for segment %s", errBadIndex, stem(gotBase, gotEpoch))
	}
	if uint64(len(body)) != uint64(indexHeaderSize)+uint64(count)*indexEntrySize {
		return nil, fmt.Errorf("%w: %d entries do not fit %d bytes", errBadIndex, count, len(b))
	}
	x := &segIndex{base: base, interval: int64(interval), next: v[0], size: v[1], maxTs: v[2], maxTsOffset: v[3], batches: v[4], lastEntryPos: v[5]}
	switch {
	case x.next < base || x.size < 0 || x.batches < 0 || x.lastEntryPos < 0 || x.lastEntryPos > x.size:
		return nil, fmt.Errorf("%w: summary out of range", errBadIndex)
	case (x.batches == 0) != (x.size == 0) || (!gaps && (x.batches == 0) != (x.next == base)):
		return nil, fmt.Errorf("%w: summary inconsistent", errBadIndex)
	case x.maxTs < -1 || (x.maxTs == -1) != (x.maxTsOffset == -1) || (x.maxTsOffset != -1 && (x.maxTsOffset < base || x.maxTsOffset >= x.next)):
		return nil, fmt.Errorf("%w: max timestamp out of range", errBadIndex)
	}
	x.entries = make([]indexEntry, count)
	prev := indexEntry{offset: base, pos: 0, maxTsBefore: -1}
	for i := range x.entries {
		e := indexEntry{offset: int64(be.Uint64(p)), pos: int64(be.Uint64(p[8:])), maxTsBefore: int64(be.Uint64(p[16:]))}
		p = p[indexEntrySize:]
		if e.offset <= prev.offset || e.pos <= prev.pos || e.offset >= x.next || e.pos >= x.size ||
			e.maxTsBefore < prev.maxTsBefore || e.maxTsBefore > x.maxTs {
			return nil, fmt.Errorf("%w: entry %d out of order or range", errBadIndex, i)
		}
		x.entries[i] = e
		prev = e
	}
	if x.lastEntryPos != prev.pos {
		return nil, fmt.Errorf("%w: last entry position disagrees", errBadIndex)
	}
	return x, nil
}
