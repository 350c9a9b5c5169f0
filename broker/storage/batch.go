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
