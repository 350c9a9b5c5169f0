package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Metadata records: the fence's claim headers and the holder's journal (journal.go) are
// sequences of framed records, appended and never rewritten:
//
//	length uint32   of kind + payload
//	kind   byte
//	payload
//	crc    uint32   CRC-32C of kind + payload
//
// A reader takes records from the start of the file and stops at the first one that is short
// or fails its CRC (a torn append): what follows it was never relied on, because its writer
// fsyncs each record before acting on it.

const (
	recordOverhead = 4 + 1 + 4
	// maxRecordPayload bounds what a reader allocates for one record, whatever the length
	// field says: far above the largest manifest a partition writes (docs/storage.md).
	maxRecordPayload = 16 << 20
)

var errBadRecord = errors.New("invalid metadata record")

// appendRecord frames payload as one record of kind.
func appendRecord(b []byte, kind byte, payload []byte) []byte {
	be := binary.BigEndian
	b = be.AppendUint32(b, uint32(1+len(payload)))
	start := len(b)
	b = append(b, kind)
	b = append(b, payload...)
	return be.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// metaRecord is one decoded record.
type metaRecord struct {
	kind    byte
	payload []byte
}

// splitRecords decodes the valid records at the start of b. It never trusts a length before
// checking it against the bytes there are.
func splitRecords(b []byte) []metaRecord {
	be := binary.BigEndian
	var out []metaRecord
	for len(b) >= recordOverhead {
		n := be.Uint32(b)
		if n < 1 || n > maxRecordPayload+1 || uint64(len(b)) < 4+uint64(n)+4 {
			break
		}
		body := b[4 : 4+n]
		if crc32.Checksum(body, castagnoli) != be.Uint32(b[4+n:]) {
			break
		}
		out = append(out, metaRecord{kind: body[0], payload: body[1:]})
		b = b[4+n+4:]
	}
	return out
}

// recordReader reads fixed-width big-endian fields from a payload, remembering the first
// shortfall instead of panicking on a short or hostile record.
type recordReader struct {
	b   []byte
	err error
}

func (r *recordReader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		if r.err == nil {
			r.err = fmt.Errorf("%w: %d bytes short", errBadRecord, n-len(r.b))
		}
		return make([]byte, n)
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *recordReader) u64() uint64 { return binary.BigEndian.Uint64(r.take(8)) }
func (r *recordReader) u32() uint32 { return binary.BigEndian.Uint32(r.take(4)) }
func (r *recordReader) i64() int64  { return int64(r.u64()) }
func (r *recordReader) i32() int32  { return int32(r.u32()) }

// done fails unless the payload was consumed exactly.
func (r *recordReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", errBadRecord, len(r.b))
	}
	return r.err
}
