package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// Record batch v2 (docs/dataplane.md "Record batch v2"): a 61-byte header, then the records. The log stores
// batches verbatim except for the base offset and partition leader epoch (both outside the
// CRC), and, for LogAppendTime topics, the timestamp type bit and maxTimestamp (inside it,
// so the CRC is recomputed).
const (
	batchHeaderSize = 61
	// batchLogOverhead is the part of a batch not counted by its length field: baseOffset
	// and the length itself.
	batchLogOverhead = 12
	minBatchLength   = batchHeaderSize - batchLogOverhead

	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21 // CRC-32C covers bytes 21..end
	offLastOffsetDelta = 23
	offBaseTimestamp   = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offRecordCount     = 57

	magicV2           = 2
	attrCodecMask     = 0x07
	attrLogAppendTime = 1 << 3
	attrTransactional = 1 << 4
	attrControl       = 1 << 5
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the decoded 61-byte header.
type batchHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32

	// ctl is a control batch's marker, set by parseControl (not part of the 61 bytes).
	ctl controlMarker
}

// controlMarker is the one record of a transaction-marker control batch.
type controlMarker struct {
	commit     bool
	coordEpoch int32
}

// parseHeader decodes the header; b must hold at least batchHeaderSize bytes.
func parseHeader(b []byte) batchHeader {
	be := binary.BigEndian
	return batchHeader{
		BaseOffset:      int64(be.Uint64(b[0:])),
		Length:          int32(be.Uint32(b[offLength:])),
		LeaderEpoch:     int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             be.Uint32(b[offCRC:]),
		Attributes:      int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(be.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(be.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(be.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(be.Uint32(b[offRecordCount:])),
	}
}

// size is the batch's total size in bytes.
func (h batchHeader) size() int64 { return int64(h.Length) + batchLogOverhead }

// lastOffset is the offset of the batch's last record.
func (h batchHeader) lastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// nextOffset is the offset after the batch.
func (h batchHeader) nextOffset() int64 { return h.lastOffset() + 1 }

// idempotent reports whether the batch carries a producer id.
func (h batchHeader) idempotent() bool { return h.ProducerID >= 0 }

// lastSequence is the sequence of the batch's last record; sequences wrap from MaxInt32 to 0
// as Apache's DefaultRecordBatch.incrementSequence does.
func (h batchHeader) lastSequence() int32 {
	return incrementSequence(h.BaseSequence, h.LastOffsetDelta)
}

func incrementSequence(seq, by int32) int32 {
	if seq > math.MaxInt32-by {
		return by - (math.MaxInt32 - seq) - 1
	}
	return seq + by
}

// shapeError is nil when a stored batch's header is self-consistent: the checks a scan makes
// before trusting anything the header says. It does not check the CRC.
func (h batchHeader) shapeError() error {
	switch {
	case h.Length < minBatchLength:
		return fmt.Errorf("%w: length %d below the %d-byte header", ErrCorruptMessage, h.Length, minBatchLength)
	case h.Magic != magicV2:
		return fmt.Errorf("%w: magic %d, only record batch v2 is accepted", ErrInvalidRecord, h.Magic)
	case h.LastOffsetDelta < 0 || h.RecordCount != h.LastOffsetDelta+1:
		return fmt.Errorf("%w: record count %d does not match lastOffsetDelta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	return nil
}

// storedShapeError is shapeError for a batch in the log: with gaps (a cleaned segment) a
// batch may hold fewer records than its offset range, none at all (a producer's last batch
// the cleaner emptied, kept for its producer state).
func (h batchHeader) storedShapeError(gaps bool) error {
	if !gaps {
		return h.shapeError()
	}
	switch {
	case h.Length < minBatchLength:
		return fmt.Errorf("%w: length %d below the %d-byte header", ErrCorruptMessage, h.Length, minBatchLength)
	case h.Magic != magicV2:
		return fmt.Errorf("%w: magic %d, only record batch v2 is accepted", ErrInvalidRecord, h.Magic)
	case h.LastOffsetDelta < 0 || h.RecordCount < 0 || h.RecordCount > h.LastOffsetDelta+1:
		return fmt.Errorf("%w: record count %d does not fit lastOffsetDelta %d", ErrInvalidRecord, h.RecordCount, h.LastOffsetDelta)
	}
	return nil
}

// batchCRC is the CRC-32C (Castagnoli) of bytes 21..end, as the header's crc field holds it.
func batchCRC(b []byte) uint32 { return crc32.Checksum(b[offAttributes:], castagnoli) }

// validateClientBatch checks a batch a producer sent, in Apache's order (docs/dataplane.md
// "Batch checks"):
// base offset, size limits, length and CRC, then the header's own rules. Policy checks that
// need the request (transactional state, timestamps, compaction keys, compression codec
// against the Produce version) are the produce handler's.
func validateClientBatch(b []byte, cfg *Config) (batchHeader, error) {
	if len(b) < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes, a v2 batch header alone is %d", ErrCorruptMessage, len(b), batchHeaderSize)
	}
	h := parseHeader(b)
	switch {
	case h.Magic != magicV2:
		return h, fmt.Errorf("%w: magic %d, only record batch v2 is accepted", ErrInvalidRecord, h.Magic)
	case h.BaseOffset != 0:
		return h, fmt.Errorf("%w: base offset %d, a producer must send 0", ErrInvalidRecord, h.BaseOffset)
	case int64(len(b)) > int64(cfg.MaxMessageBytes):
		return h, fmt.Errorf("%w: %d bytes > %d", ErrMessageTooLarge, len(b), cfg.MaxMessageBytes)
	case int64(len(b)) > cfg.SegmentBytes:
		return h, fmt.Errorf("%w: %d bytes > %d", ErrRecordListTooLarge, len(b), cfg.SegmentBytes)
	case h.size() != int64(len(b)):
		return h, fmt.Errorf("%w: length field says %d bytes, batch has %d", ErrCorruptMessage, h.size(), len(b))
	case batchCRC(b) != h.CRC:
		return h, fmt.Errorf("%w: CRC-32C mismatch", ErrCorruptMessage)
	}
	if err := h.shapeError(); err != nil {
		return h, err
	}
	if h.Attributes&attrControl != 0 {
		return h, fmt.Errorf("%w: control batches are written by the broker, not producers", ErrInvalidRecord)
	}
	if h.Attributes&attrTransactional != 0 && h.ProducerID < 0 {
		return h, fmt.Errorf("%w: a transactional batch without a producer id", ErrInvalidRecord)
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, fmt.Errorf("%w: producer id %d without a base sequence", ErrInvalidRecord, h.ProducerID)
	}
	return h, nil
}

// stampBatch writes the offsets the log assigned into b: the base offset and the leader epoch
// (outside the CRC), and for LogAppendTime topics the timestamp type and maxTimestamp (inside
// it: the CRC is recomputed). It returns the header as stored.
func stampBatch(b []byte, h batchHeader, base int64, epoch int32, logAppendTime int64) batchHeader {
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[offLeaderEpoch:], uint32(epoch))
	h.BaseOffset, h.LeaderEpoch = base, epoch
	if logAppendTime >= 0 {
		h.Attributes |= attrLogAppendTime
		h.MaxTimestamp = logAppendTime
		be.PutUint16(b[offAttributes:], uint16(h.Attributes))
		be.PutUint64(b[offMaxTimestamp:], uint64(logAppendTime))
		h.CRC = batchCRC(b)
		be.PutUint32(b[offCRC:], h.CRC)
	}
	return h
}

// Transaction-marker control batches (docs/transactions.md "Markers"), as Apache's
// MemoryRecords.withEndTransactionMarker writes them: magic 2, attributes 0x30
// (transactional | control), base sequence -1, one record whose key is int16 version 0 +
// int16 type (0 ABORT, 1 COMMIT) and whose value is int16 version 0 + int32 coordinator epoch.
const (
	controlTypeAbort  = 0
	controlTypeCommit = 1
	// markerRecordSize is the record after its length varint: attributes, timestamp delta,
	// offset delta, key length + 4 key bytes, value length + 6 value bytes, header count.
	markerRecordSize = 1 + 1 + 1 + 1 + 4 + 1 + 6 + 1
	markerBatchSize  = batchHeaderSize + 1 + markerRecordSize
)

// buildMarker returns m's control batch as a producer-side batch (base offset 0, leader
// epoch -1), ready for stampBatch.
func buildMarker(m Marker) []byte {
	be := binary.BigEndian
	b := make([]byte, batchHeaderSize, markerBatchSize)
	be.PutUint32(b[offLength:], uint32(markerBatchSize-batchLogOverhead))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = magicV2
	be.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	be.PutUint32(b[offLastOffsetDelta:], 0)
	be.PutUint64(b[offBaseTimestamp:], uint64(m.TimestampMs))
	be.PutUint64(b[offMaxTimestamp:], uint64(m.TimestampMs))
	be.PutUint64(b[offProducerID:], uint64(m.ProducerID))
	be.PutUint16(b[offProducerEpoch:], uint16(m.ProducerEpoch))
	be.PutUint32(b[offBaseSequence:], 0xffffffff)
	be.PutUint32(b[offRecordCount:], 1)
	typ := uint16(controlTypeAbort)
	if m.Commit {
		typ = controlTypeCommit
	}
	b = binary.AppendVarint(b, markerRecordSize)
	b = append(b, 0)              // record attributes
	b = binary.AppendVarint(b, 0) // timestamp delta
	b = binary.AppendVarint(b, 0) // offset delta
	b = binary.AppendVarint(b, 4) // key length
	b = be.AppendUint16(b, 0)     // key version
	b = be.AppendUint16(b, typ)   // control type
	b = binary.AppendVarint(b, 6) // value length
	b = be.AppendUint16(b, 0)     // value version
	b = be.AppendUint32(b, uint32(m.CoordinatorEpoch))
	b = binary.AppendVarint(b, 0) // no headers
	be.PutUint32(b[offCRC:], batchCRC(b))
	return b
}

// parseControl decodes the marker record of a control batch whose body (the bytes after the
// 61-byte header, at least its first record) is body. Only uncompressed transaction markers
// are accepted: that is all this log ever writes.
func parseControl(h *batchHeader, body []byte) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: control batch at offset %d: %s", ErrCorruptMessage, h.BaseOffset, why)
	}
	if h.Attributes&attrCodecMask != 0 || h.RecordCount != 1 {
		return bad("not one uncompressed record")
	}
	n, k := binary.Varint(body)
	if k <= 0 || n != markerRecordSize || len(body) < k+markerRecordSize {
		return bad("record length")
	}
	r := body[k : k+markerRecordSize]
	// attributes, ts delta, offset delta (any single-byte varints), key len 4 (varint 8), value len 6 (varint 12)
	if r[3] != 8 || r[8] != 12 {
		return bad("key or value length")
	}
	be := binary.BigEndian
	key, val := r[4:8], r[9:15]
	if be.Uint16(key) != 0 || be.Uint16(val) != 0 {
		return bad("key or value version")
	}
	switch be.Uint16(key[2:]) {
	case controlTypeAbort:
		h.ctl.commit = false
	case controlTypeCommit:
		h.ctl.commit = true
	default:
		return bad("unknown control type")
	}
	h.ctl.coordEpoch = int32(be.Uint32(val[2:]))
	return nil
}
