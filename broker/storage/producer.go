package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
)

// producerBatchesRetained is Apache's NUM_BATCHES_TO_RETAIN: how many of a producer's latest
// batches a partition remembers to recognise a retry.
const producerBatchesRetained = 5

// batchMeta is what the partition remembers of one idempotent batch.
type batchMeta struct {
	firstSeq, lastSeq       int32
	firstOffset, lastOffset int64
	// timestamp is the batch's maxTimestamp as stored (the append time for LogAppendTime
	// topics), returned again for a duplicate.
	timestamp int64
}

// producerEntry is one producer id's state on this partition.
type producerEntry struct {
	epoch   int16
	batches []batchMeta // oldest first, at most producerBatchesRetained
}

func (e *producerEntry) lastTimestamp() int64 {
	if len(e.batches) == 0 {
		return -1
	}
	return e.batches[len(e.batches)-1].timestamp
}

// producerState is the idempotent-producer table of one partition (docs/dataplane.md
// "Idempotence: the sequence rules"). It is
// owned by the Log and guarded by its mu.
type producerState struct {
	m map[int64]*producerEntry
}

func newProducerState() *producerState { return &producerState{m: map[int64]*producerEntry{}} }

// check applies the table of docs/dataplane.md "Idempotence: the sequence rules" to an
// incoming idempotent batch. It returns the
// original batch for a duplicate (nothing must be appended then), nil to append, or
// ErrInvalidProducerEpoch / ErrOutOfOrderSequence.
func (s *producerState) check(h batchHeader) (*batchMeta, error) {
	e := s.m[h.ProducerID]
	if e == nil {
		return nil, nil // unknown producer: any sequence
	}
	firstSeq, lastSeq := h.BaseSequence, h.lastSequence()
	switch {
	case h.ProducerEpoch < e.epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d, partition has seen %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.epoch)
	case h.ProducerEpoch > e.epoch:
		if firstSeq != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, not %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, firstSeq)
		}
		return nil, nil
	}
	for i := range e.batches {
		if b := &e.batches[i]; b.firstSeq == firstSeq && b.lastSeq == lastSeq {
			dup := *b
			return &dup, nil
		}
	}
	if len(e.batches) == 0 {
		return nil, nil
	}
	if last := e.batches[len(e.batches)-1].lastSeq; !inSequence(last, firstSeq) {
		return nil, fmt.Errorf("%w: producer %d sent sequence %d after %d", ErrOutOfOrderSequence, h.ProducerID, firstSeq, last)
	}
	return nil, nil
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// apply records a stored idempotent batch (at append, and for every batch a recovery scan
// passes over).
func (s *producerState) apply(h batchHeader) {
	e := s.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{epoch: h.ProducerEpoch}
		s.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch, e.batches = h.ProducerEpoch, e.batches[:0]
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.lastSequence(),
		firstOffset: h.BaseOffset, lastOffset: h.lastOffset(), timestamp: h.MaxTimestamp,
	})
	if n := len(e.batches); n > producerBatchesRetained {
		e.batches = slices.Delete(e.batches, 0, n-producerBatchesRetained)
	}
}

// expire forgets producers whose last batch is older than expirationMs at nowMs (Apache's
// producer.id.expiration.ms, judged by the batch timestamp as Apache does).
func (s *producerState) expire(nowMs, expirationMs int64) {
	for pid, e := range s.m {
		if nowMs-e.lastTimestamp() >= expirationMs {
			delete(s.m, pid)
		}
	}
}

// checkpoint is where a recovery may start scanning: the state of the log before offset,
// whose batch (if any) starts at byte pos of segment (segBase, segEpoch).
type checkpoint struct {
	offset   int64
	segBase  int64
	segEpoch int32
	pos      int64
}

// The .snapshot file: magic, the checkpoint, the producers, a CRC-32C of all before it.
const (
	snapshotMagic      = "PDKPSN01"
	snapshotHeaderSize = 8 + 8 + 8 + 4 + 8 + 4
	snapshotBatchSize  = 4 + 4 + 8 + 8 + 8
)

var errBadSnapshot = errors.New("invalid producer snapshot")

func encodeSnapshot(cp checkpoint, s *producerState) []byte {
	be := binary.BigEndian
	pids := make([]int64, 0, len(s.m))
	for pid := range s.m {
		pids = append(pids, pid)
	}
	slices.Sort(pids) // deterministic bytes
	b := make([]byte, 0, snapshotHeaderSize+len(pids)*(11+producerBatchesRetained*snapshotBatchSize)+4)
	b = append(b, snapshotMagic...)
	b = be.AppendUint64(b, uint64(cp.offset))
	b = be.AppendUint64(b, uint64(cp.segBase))
	b = be.AppendUint32(b, uint32(cp.segEpoch))
	b = be.AppendUint64(b, uint64(cp.pos))
	b = be.AppendUint32(b, uint32(len(pids)))
	for _, pid := range pids {
		e := s.m[pid]
		b = be.AppendUint64(b, uint64(pid))
		b = be.AppendUint16(b, uint16(e.epoch))
		b = append(b, byte(len(e.batches)))
		for _, m := range e.batches {
			b = be.AppendUint32(b, uint32(m.firstSeq))
			b = be.AppendUint32(b, uint32(m.lastSeq))
			b = be.AppendUint64(b, uint64(m.firstOffset))
			b = be.AppendUint64(b, uint64(m.lastOffset))
			b = be.AppendUint64(b, uint64(m.timestamp))
		}
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot parses a .snapshot file, checking its CRC and that every batch it lists lies
// before the checkpoint offset, so a damaged file is skipped rather than believed.
func decodeSnapshot(b []byte) (checkpoint, *producerState, error) {
	be := binary.BigEndian
	if len(b) < snapshotHeaderSize+4 || string(b[:8]) != snapshotMagic {
		return checkpoint{}, nil, fmt.Errorf("%w: too short or wrong magic", errBadSnapshot)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != be.Uint32(b[len(b)-4:]) {
		return checkpoint{}, nil, fmt.Errorf("%w: CRC mismatch", errBadSnapshot)
	}
	cp := checkpoint{
		offset:   int64(be.Uint64(b[8:])),
		segBase:  int64(be.Uint64(b[16:])),
		segEpoch: int32(be.Uint32(b[24:])),
		pos:      int64(be.Uint64(b[28:])),
	}
	if cp.offset < 0 || cp.segBase < 0 || cp.segBase > cp.offset || cp.segEpoch < 0 || cp.pos < 0 {
		return checkpoint{}, nil, fmt.Errorf("%w: checkpoint out of range", errBadSnapshot)
	}
	count := be.Uint32(b[36:])
	p := body[snapshotHeaderSize:]
	s := newProducerState()
	for range count {
		if len(p) < 11 {
			return checkpoint{}, nil, fmt.Errorf("%w: truncated producer", errBadSnapshot)
		}
		pid, epoch, n := int64(be.Uint64(p)), int16(be.Uint16(p[8:])), int(p[10])
		p = p[11:]
		if pid < 0 || n > producerBatchesRetained || len(p) < n*snapshotBatchSize || s.m[pid] != nil {
			return checkpoint{}, nil, fmt.Errorf("%w: bad producer %d", errBadSnapshot, pid)
		}
		e := &producerEntry{epoch: epoch, batches: make([]batchMeta, n)}
		for i := range e.batches {
			m := batchMeta{
				firstSeq: int32(be.Uint32(p)), lastSeq: int32(be.Uint32(p[4:])),
				firstOffset: int64(be.Uint64(p[8:])), lastOffset: int64(be.Uint64(p[16:])), timestamp: int64(be.Uint64(p[24:])),
			}
			p = p[snapshotBatchSize:]
			if m.firstOffset < 0 || m.lastOffset < m.firstOffset || m.lastOffset >= cp.offset {
				return checkpoint{}, nil, fmt.Errorf("%w: producer %d batch outside the log", errBadSnapshot, pid)
			}
			e.batches[i] = m
		}
		s.m[pid] = e
	}
	if len(p) != 0 {
		return checkpoint{}, nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(p))
	}
	return cp, s, nil
}
