package storage

import (
	"cmp"
	"math"
	"slices"
)

// segment is a closed segment's summary, immutable once the segment is closed. The active
// segment is described by Log.activeIdx instead.
type segment struct {
	base  int64
	epoch int32
	// gen is the cleaned copy the log reads (zero: the file its leader wrote). A cleaned
	// segment's batches leave gaps: offsets the cleaner removed (docs/compaction.md).
	gen cleanGen
	// end is the offset after the segment's last batch, which is the next segment's base
	// offset. Bytes stored after the batch ending at end (a deposed writer's) are never read.
	end int64
	// size is the byte length of the batches below end.
	size        int64
	maxTs       int64 // largest batch maxTimestamp; -1 if no batch has a timestamp
	maxTsOffset int64
}

func (s *segment) name() string      { return segFileName(s.base, s.epoch, s.gen, segmentSuffix) }
func (s *segment) indexName() string { return segFileName(s.base, s.epoch, s.gen, indexSuffix) }

func (s *segment) empty() bool { return s.end == s.base }

func segmentFromIndex(epoch int32, g cleanGen, x *segIndex) *segment {
	return &segment{base: x.base, epoch: epoch, gen: g, end: x.next, size: x.size, maxTs: x.maxTs, maxTsOffset: x.maxTsOffset}
}

// diskSegment is a segment file found in the partition directory.
type diskSegment struct {
	base  int64
	epoch int32
	gen   cleanGen // the copy the journal names
	// bound is the smallest base offset of every segment after this one in log order: the
	// segment holds data only below it. MaxInt64 for the last segment.
	bound int64
}

func (s diskSegment) name() string      { return segFileName(s.base, s.epoch, s.gen, segmentSuffix) }
func (s diskSegment) indexName() string { return segFileName(s.base, s.epoch, s.gen, indexSuffix) }

// orderSegments puts the segment files in log order and finds which are part of the log.
//
// Log order is by epoch, then base offset: epochs only grow along the log (each leader claims
// a higher one before writing), so this order holds even for a segment a deposed leader
// created late at its own, higher, idea of the log end. Each segment is bounded by the
// smallest base offset after it; a segment whose base is above its bound was created by a
// deposed leader after a newer leader had rolled below it, holds nothing of the log, and is
// returned as junk. The valid segments are contiguous: each one's bound is the next one's base.
func orderSegments(found []diskSegment) (valid, junk []diskSegment) {
	segs := slices.Clone(found)
	slices.SortFunc(segs, func(a, b diskSegment) int {
		return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.base, b.base))
	})
	bound := int64(math.MaxInt64)
	for i := len(segs) - 1; i >= 0; i-- {
		segs[i].bound = bound
		bound = min(bound, segs[i].base)
	}
	for _, s := range segs {
		if s.base > s.bound {
			junk = append(junk, s)
		} else {
			valid = append(valid, s)
		}
	}
	return valid, junk
}
