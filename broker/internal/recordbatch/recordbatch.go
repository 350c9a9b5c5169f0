// Package recordbatch builds record batches v2 as a producer sends them, for tests that speak
// the wire protocol raw (broker's own tests and broker/brokertest). Test support only.
package recordbatch

import (
	"encoding/binary"
	"hash/crc32"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Batch describes a record batch v2 as a producer would send it, for raw Produce requests.
type Batch struct {
	// Values are the records' values; each record has a nil key and no headers.
	Values [][]byte
	// ProducerID, ProducerEpoch and BaseSequence: -1, -1, -1 for a producer without
	// idempotence (the zero value is producer id 0, epoch 0, sequence 0: set them).
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// Timestamp is every record's CreateTime (ms).
	Timestamp int64
	// Zstd compresses the records with zstd (codec 4).
	Zstd bool
	// Attributes are ORed into the batch attributes (bit 4 transactional, 5 control).
	Attributes uint16
	// Magic overrides the magic byte (2 when zero).
	Magic int8
}

// Idempotent returns b with the idempotence fields set.
func (b Batch) Idempotent(producerID int64, epoch int16, sequence int32) Batch {
	b.ProducerID, b.ProducerEpoch, b.BaseSequence = producerID, epoch, sequence
	return b
}

// Plain returns a batch of values from a producer without idempotence, stamped now (an old
// timestamp would make the broker forget an idempotent producer's state at its next
// takeover: producer.id.expiration.ms is judged by batch timestamps).
func Plain(values ...[]byte) Batch {
	return Batch{Values: values, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Timestamp: time.Now().UnixMilli()}
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Bytes encodes the batch: base offset 0, leader epoch -1, a correct length and CRC-32C.
func (b Batch) Bytes() []byte {
	var recs []byte
	for i, v := range b.Values {
		var body []byte
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, -1)       // null key
		body = binary.AppendVarint(body, int64(len(v)))
		body = append(body, v...)
		body = binary.AppendVarint(body, 0) // no headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	attrs := b.Attributes
	if b.Zstd {
		enc, err := zstd.NewWriter(nil)
		if err != nil {
			panic(err)
		}
		recs = enc.EncodeAll(recs, nil)
		_ = enc.Close()
		attrs |= 4
	}
	magic := b.Magic
	if magic == 0 {
		magic = 2
	}
	be := binary.BigEndian
	out := make([]byte, 0, 61+len(recs))
	out = be.AppendUint64(out, 0)          // base offset
	out = be.AppendUint32(out, 0)          // length, below
	out = be.AppendUint32(out, 0xffffffff) // partition leader epoch -1
	out = append(out, byte(magic))         // magic
	out = be.AppendUint32(out, 0)          // crc, below
	out = be.AppendUint16(out, attrs)      // attributes
	out = be.AppendUint32(out, uint32(len(b.Values)-1))
	out = be.AppendUint64(out, uint64(b.Timestamp))
	out = be.AppendUint64(out, uint64(b.Timestamp))
	out = be.AppendUint64(out, uint64(b.ProducerID))
	out = be.AppendUint16(out, uint16(b.ProducerEpoch))
	out = be.AppendUint32(out, uint32(b.BaseSequence))
	out = be.AppendUint32(out, uint32(len(b.Values)))
	out = append(out, recs...)
	be.PutUint32(out[8:], uint32(len(out)-12))
	be.PutUint32(out[17:], crc32.Checksum(out[21:], castagnoli))
	return out
}
