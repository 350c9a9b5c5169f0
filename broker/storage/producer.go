package storage

import (
	"cmp"
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
	// txnFirst is the first offset of the producer's open transaction on this partition
	// (its first transactional batch since its last marker), -1 when none is open.
	txnFirst int64
	// coordEpoch is the coordinator epoch of the producer's last marker, -1 before any.
	coordEpoch int32
	// lastTs is the timestamp of the producer's last batch or marker (expiration).
	lastTs int64
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, txnFirst: -1, coordEpoch: -1, lastTs: -1}
}

func (e *producerEntry) lastTimestamp() int64 { return e.lastTs }

// producerState is the idempotent-producer table of one partition (docs/dataplane.md
// "Idempotence: the sequence rules"), with the partition's open transactions and its
// aborted-transaction index. It is owned by the Log and guarded by its mu. All of it is a
// function of the log before the offset it has applied batches up to, which is why it is
// the recovery checkpoint's content (the .snapshot file).
type producerState struct {
	m map[int64]*producerEntry
	// open is every open transaction's first offset by producer id: the producers of m
	// whose txnFirst is ≥ 0, kept apart so the last stable offset costs O(open
	// transactions), not O(producers).
	open map[int64]int64
	// aborted is the aborted-transaction index (Apache's .txnindex), one entry per ABORT
	// marker at or above the log start, in log order (so by LastOffset, strictly growing).
	aborted []AbortedTxn
}

func newProducerState() *producerState {
	return &producerState{m: map[int64]*producerEntry{}, open: map[int64]int64{}}
}

// AbortedTxn is one entry of the aborted-transaction index: the transaction producer
// ProducerID ended with the ABORT marker at LastOffset, whose first batch on this partition
// was at FirstOffset (the marker's own offset when none was open, as Apache records it);
// LastStableOffset is the partition's last stable offset right after the marker, ignoring the
// high watermark — the first offset of the oldest other transaction still open then, else
// LastOffset+1 (Apache's ProducerStateManager.lastStableOffset). No later entry's FirstOffset
// is below it.
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// check applies the table of docs/dataplane.md "Idempotence: the sequence rules" to an
// incoming idempotent batch. It returns the
// original batch for a duplicate (nothing must be appended then), nil to append, or
// ErrInvalidProducerEpoch / ErrOutOfOrderSequence / ErrInvalidTxnState.
func (s *producerState) check(h batchHeader) (*batchMeta, error) {
	e := s.m[h.ProducerID]
	if e == nil {
		return nil, nil // unknown producer: any sequence
	}
	dup, err := e.checkSequence(h)
	if dup != nil || err != nil {
		return dup, err
	}
	// Apache's ProducerAppendInfo.appendDataBatch, after the duplicate, epoch and sequence
	// checks: once a transaction is open on the partition, only the producer's
	// transactional batches may follow until its marker ("Expected transactional write").
	if e.txnFirst >= 0 && h.Attributes&attrTransactional == 0 {
		return nil, fmt.Errorf("%w: producer %d has a transaction open at offset %d and sent a non-transactional batch", ErrInvalidTxnState, h.ProducerID, e.txnFirst)
	}
	return nil, nil
}

func (e *producerEntry) checkSequence(h batchHeader) (*batchMeta, error) {
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

// checkMarker applies Apache's ProducerAppendInfo.appendEndTxnMarker checks to a marker for
// producer pid: a stale producer epoch is ErrInvalidProducerEpoch, a coordinator epoch below
// the one the partition last saw for the producer is ErrTransactionCoordinatorFenced. A
// marker for a producer with no open transaction (or none known) is still written.
func (s *producerState) checkMarker(m Marker) error {
	e := s.m[m.ProducerID]
	switch {
	case e == nil:
		return nil
	case m.ProducerEpoch < e.epoch:
		return fmt.Errorf("%w: marker for producer %d at epoch %d, partition has seen %d", ErrInvalidProducerEpoch, m.ProducerID, m.ProducerEpoch, e.epoch)
	case m.CoordinatorEpoch < e.coordEpoch:
		return fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, partition has seen %d", ErrTransactionCoordinatorFenced, m.ProducerID, m.CoordinatorEpoch, e.coordEpoch)
	}
	return nil
}

// oldestOpenTxn is the smallest first offset of an open transaction, -1 when none is open.
func (s *producerState) oldestOpenTxn() int64 { return s.oldestOpenTxnBut(-1) }

// oldestOpenTxnBut is oldestOpenTxn ignoring producer pid's transaction.
func (s *producerState) oldestOpenTxnBut(pid int64) int64 {
	oldest := int64(-1)
	for p, first := range s.open {
		if p != pid && (oldest < 0 || first < oldest) {
			oldest = first
		}
	}
	return oldest
}

func inSequence(last, next int32) bool {
	return next == last+1 || (last == math.MaxInt32 && next == 0)
}

// apply records a stored idempotent batch or transaction marker (at append, and for every
// batch a recovery scan passes over). A control batch's header must carry its parsed marker
// (h.ctl, set by parseControl).
func (s *producerState) apply(h batchHeader) {
	e := s.m[h.ProducerID]
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		s.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.epoch {
		e.epoch, e.batches = h.ProducerEpoch, e.batches[:0]
	}
	e.lastTs = h.MaxTimestamp
	if h.Attributes&attrControl != 0 {
		// Apache's ProducerStateEntry.update: the marker closes the transaction (if one is
		// open) and records the coordinator epoch; it is not a batch a retry can match.
		if !h.ctl.commit {
			s.addAborted(h.ProducerID, e.txnFirst, h.BaseOffset)
		}
		e.txnFirst, e.coordEpoch = -1, h.ctl.coordEpoch
		delete(s.open, h.ProducerID)
		return
	}
	if h.Attributes&attrTransactional != 0 && e.txnFirst < 0 {
		e.txnFirst = h.BaseOffset
		s.open[h.ProducerID] = h.BaseOffset
	}
	e.batches = append(e.batches, batchMeta{
		firstSeq: h.BaseSequence, lastSeq: h.lastSequence(),
		firstOffset: h.BaseOffset, lastOffset: h.lastOffset(), timestamp: h.MaxTimestamp,
	})
	if n := len(e.batches); n > producerBatchesRetained {
		e.batches = slices.Delete(e.batches, 0, n-producerBatchesRetained)
	}
}

// addAborted indexes the ABORT marker at offset marker for producer pid, whose open
// transaction began at first (-1: none open, the entry then covers the marker alone), as
// Apache's UnifiedLog.append does for each completed transaction before completing it.
func (s *producerState) addAborted(pid, first, marker int64) {
	if first < 0 {
		first = marker
	}
	lso := s.oldestOpenTxnBut(pid)
	if lso < 0 {
		lso = marker + 1
	}
	s.aborted = append(s.aborted, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: marker, LastStableOffset: lso})
}

// dropAbortedBelow forgets the aborted transactions whose markers are below start (the log
// start moved past them: nothing of them is readable). The rest are copied, so the memory of
// the dropped ones goes too.
func (s *producerState) dropAbortedBelow(start int64) {
	i, _ := slices.BinarySearchFunc(s.aborted, start, func(a AbortedTxn, off int64) int { return cmp.Compare(a.LastOffset, off) })
	if i > 0 {
		s.aborted = slices.Clone(s.aborted[i:])
	}
}

// abortedOverlapping is Apache's collectAbortedTxns over an aborted-transaction index (in
// log order): the aborted transactions with LastOffset ≥ from and FirstOffset < upper (upper
// is the offset after the fetched data), in log order. The walk starts at the first marker at
// or after from and stops at the first entry whose LastStableOffset reaches upper, since no
// later entry's FirstOffset is below that. It returns a fresh, non-nil slice.
func abortedOverlapping(index []AbortedTxn, from, upper int64) []AbortedTxn {
	out := []AbortedTxn{}
	i, _ := slices.BinarySearchFunc(index, from, func(a AbortedTxn, off int64) int { return cmp.Compare(a.LastOffset, off) })
	for _, a := range index[i:] {
		if a.FirstOffset < upper {
			out = append(out, a)
		}
		if a.LastStableOffset >= upper {
			break
		}
	}
	return out
}

// expire forgets producers whose last batch is older than expirationMs at nowMs (Apache's
// producer.id.expiration.ms, judged by the batch timestamp as Apache does).
func (s *producerState) expire(nowMs, expirationMs int64) {
	for pid, e := range s.m {
		// A producer with an open transaction is kept (Apache's isProducerExpired): its
		// first offset holds the last stable offset until its marker comes.
		if e.txnFirst < 0 && nowMs-e.lastTimestamp() >= expirationMs {
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
// Version 02 (written since transactions) adds to each producer, after its batches, the
// coordinator epoch (int32), the open transaction's first offset (int64, -1 none) and the
// last timestamp (int64). Version 03 (since the aborted-transaction index) adds after the
// producers the index: int32 count, then per entry producer id, first offset, last offset
// and last stable offset (int64 each). Versions 01 and 02 are still read, with no aborted
// transactions before their offset: no broker that wrote them could append an ABORT marker
// (a v01 writer refused control batches; a v02 writer's broker never called AppendMarker).
const (
	snapshotMagicV1     = "PDKPSN01"
	snapshotMagicV2     = "PDKPSN02"
	snapshotMagic       = "PDKPSN03"
	snapshotTxnSize     = 4 + 8 + 8
	snapshotHeaderSize  = 8 + 8 + 8 + 4 + 8 + 4
	snapshotBatchSize   = 4 + 4 + 8 + 8 + 8
	snapshotAbortedSize = 8 + 8 + 8 + 8
)

var errBadSnapshot = errors.New("invalid producer snapshot")

func encodeSnapshot(cp checkpoint, s *producerState) []byte {
	be := binary.BigEndian
	pids := make([]int64, 0, len(s.m))
	for pid := range s.m {
		pids = append(pids, pid)
	}
	slices.Sort(pids) // deterministic bytes
	b := make([]byte, 0, snapshotHeaderSize+len(pids)*(11+producerBatchesRetained*snapshotBatchSize+snapshotTxnSize)+4+len(s.aborted)*snapshotAbortedSize+4)
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
		b = be.AppendUint32(b, uint32(e.coordEpoch))
		b = be.AppendUint64(b, uint64(e.txnFirst))
		b = be.AppendUint64(b, uint64(e.lastTs))
	}
	b = be.AppendUint32(b, uint32(len(s.aborted)))
	for _, a := range s.aborted {
		b = be.AppendUint64(b, uint64(a.ProducerID))
		b = be.AppendUint64(b, uint64(a.FirstOffset))
		b = be.AppendUint64(b, uint64(a.LastOffset))
		b = be.AppendUint64(b, uint64(a.LastStableOffset))
	}
	return be.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot parses a .snapshot file, checking its CRC and that every batch it lists lies
// before the checkpoint offset, so a damaged file is skipped rather than believed.
func decodeSnapshot(b []byte) (checkpoint, *producerState, error) {
	be := binary.BigEndian
	version := 0
	if len(b) >= 8 {
		version = map[string]int{snapshotMagicV1: 1, snapshotMagicV2: 2, snapshotMagic: 3}[string(b[:8])]
	}
	if len(b) < snapshotHeaderSize+4 || version == 0 {
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
		e := newProducerEntry(epoch)
		e.batches = make([]batchMeta, n)
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
			e.lastTs = m.timestamp
		}
		if version >= 2 {
			if len(p) < snapshotTxnSize {
				return checkpoint{}, nil, fmt.Errorf("%w: truncated producer %d", errBadSnapshot, pid)
			}
			e.coordEpoch, e.txnFirst, e.lastTs = int32(be.Uint32(p)), int64(be.Uint64(p[4:])), int64(be.Uint64(p[12:]))
			p = p[snapshotTxnSize:]
			if e.txnFirst < -1 || e.txnFirst >= cp.offset {
				return checkpoint{}, nil, fmt.Errorf("%w: producer %d transaction outside the log", errBadSnapshot, pid)
			}
			if e.txnFirst >= 0 {
				s.open[pid] = e.txnFirst
			}
		}
		s.m[pid] = e
	}
	if version >= 3 {
		var err error
		if p, err = decodeAborted(p, cp.offset, s); err != nil {
			return checkpoint{}, nil, err
		}
	}
	if len(p) != 0 {
		return checkpoint{}, nil, fmt.Errorf("%w: %d trailing bytes", errBadSnapshot, len(p))
	}
	return cp, s, nil
}

// decodeAborted reads a version 03 snapshot's aborted-transaction index from p into s and
// returns what follows it. Every entry must lie before the checkpoint offset, cover at least
// its marker, and follow the one before it in log order; otherwise the snapshot is refused.
func decodeAborted(p []byte, offset int64, s *producerState) ([]byte, error) {
	be := binary.BigEndian
	if len(p) < 4 {
		return nil, fmt.Errorf("%w: truncated aborted transactions", errBadSnapshot)
	}
	n := uint64(be.Uint32(p))
	p = p[4:]
	if uint64(len(p)) < n*snapshotAbortedSize {
		return nil, fmt.Errorf("%w: %d aborted transactions do not fit %d bytes", errBadSnapshot, n, len(p))
	}
	s.aborted = make([]AbortedTxn, n)
	prev := int64(-1)
	for i := range s.aborted {
		a := AbortedTxn{
			ProducerID: int64(be.Uint64(p)), FirstOffset: int64(be.Uint64(p[8:])),
			LastOffset: int64(be.Uint64(p[16:])), LastStableOffset: int64(be.Uint64(p[24:])),
		}
		p = p[snapshotAbortedSize:]
		if a.ProducerID < 0 || a.FirstOffset < 0 || a.FirstOffset > a.LastOffset || a.LastOffset <= prev ||
			a.LastOffset >= offset || a.LastStableOffset < 0 || a.LastStableOffset > a.LastOffset+1 {
			return nil, fmt.Errorf("%w: aborted transaction %d out of order or outside the log", errBadSnapshot, i)
		}
		s.aborted[i] = a
		prev = a.LastOffset
	}
	return p, nil
}

// ActiveProducer is one producer's state on a partition, as DescribeProducers reports it
// (Apache's ProducerStateManager.activeProducers).
type ActiveProducer struct {
	ProducerID    int64
	ProducerEpoch int16
	// LastSequence is the last sequence of its last batch (-1: none, a marker only).
	LastSequence int32
	// LastTimestamp is the timestamp of its last batch or marker (-1: none known).
	LastTimestamp int64
	// CoordinatorEpoch is the coordinator epoch of its last marker (-1: none).
	CoordinatorEpoch int32
	// CurrentTxnStartOffset is the first offset of its open transaction (-1: none).
	CurrentTxnStartOffset int64
}

// ActiveProducers lists the producers this partition keeps state for (idempotent and
// transactional, not yet expired), by producer id.
func (l *Log) ActiveProducers() []ActiveProducer {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]ActiveProducer, 0, len(l.producers.m))
	for pid, e := range l.producers.m {
		last := int32(-1)
		if n := len(e.batches); n > 0 {
			last = e.batches[n-1].lastSeq
		}
		out = append(out, ActiveProducer{ProducerID: pid, ProducerEpoch: e.epoch, LastSequence: last,
			LastTimestamp: e.lastTs, CoordinatorEpoch: e.coordEpoch, CurrentTxnStartOffset: e.txnFirst})
	}
	slices.SortFunc(out, func(a, b ActiveProducer) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
