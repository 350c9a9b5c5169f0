package records

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Header is a record header.
type Header struct {
	// Key is the header's key; Kafka forbids a null header key.
	Key string
	// Value is the header's value, nil for a null value.
	Value []byte
}

// Record is one record of a v2 batch. Key and Value are nil for a null key/value (a null
// Value is a tombstone); an empty but present key or value is a non-nil empty slice.
type Record struct {
	// Attributes are the record's attributes; record batch v2 defines none, they are kept
	// as the producer sent them.
	Attributes int8
	// TimestampDelta is the record's timestamp minus the batch's base timestamp (ms).
	TimestampDelta int64
	// OffsetDelta is the record's offset minus the batch's base offset.
	OffsetDelta int32
	// Key and Value are the record's key and value, nil when null.
	Key, Value []byte
	// Headers are the record's headers in wire order, nil when there are none.
	Headers []Header
}

var (
	// ErrTooLarge means the decompressed records exceed the caller's limit.
	ErrTooLarge = errors.New("records: decompressed records exceed the limit")
	// ErrMalformed means the records section does not parse: a bad compressed stream, a
	// length that points past the bytes that exist, a record count that does not match.
	// It is wrapped with detail.
	ErrMalformed = errors.New("records: malformed records")
	// ErrUnsupportedCodec means the attributes name a compression codec Kafka does not
	// define (5 to 7).
	ErrUnsupportedCodec = errors.New("records: unsupported compression codec")
)

// minRecordSize is the smallest encoded record: one byte each for the length, attributes,
// timestamp delta, offset delta, key length, value length and header count. Parse uses it
// to refuse a record count the bytes cannot hold before allocating for it.
const minRecordSize = 7

// minHeaderSize is the smallest encoded header: key length and value length.
const minHeaderSize = 2

// Parse decodes count records from raw (already decompressed) bytes. Every length is checked
// against the bytes that exist before allocating; count must match exactly (trailing bytes
// or fewer records → ErrMalformed). Key/Value/Header values may alias raw.
func Parse(raw []byte, count int32) ([]Record, error) {
	if err := checkCount(raw, count); err != nil {
		return nil, err
	}
	recs := make([]Record, count)
	rest := raw
	for i := range recs {
		var err error
		if rest, err = parseRecord(rest, &recs[i], true); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last of %d records", ErrMalformed, len(rest), count)
	}
	return recs, nil
}

// walk checks that raw holds exactly count records and calls visit for each, without
// keeping headers; NullKey uses it to look at every record without allocating.
func walk(raw []byte, count int32, visit func(*Record)) error {
	if err := checkCount(raw, count); err != nil {
		return err
	}
	rest := raw
	var rec Record
	for i := range count {
		var err error
		if rest, err = parseRecord(rest, &rec, false); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		visit(&rec)
	}
	if len(rest) != 0 {
		return fmt.Errorf("%w: %d bytes after the last of %d records", ErrMalformed, len(rest), count)
	}
	return nil
}

// checkCount refuses a negative count or one the bytes could not hold even if every record
// were as small as a record can be.
func checkCount(raw []byte, count int32) error {
	switch {
	case count < 0:
		return fmt.Errorf("%w: negative record count %d", ErrMalformed, count)
	case int64(count) > int64(len(raw)/minRecordSize):
		return fmt.Errorf("%w: %d records cannot fit in %d bytes", ErrMalformed, count, len(raw))
	}
	return nil
}

// parseRecord decodes the record at the front of b into rec and returns the bytes after it.
// The record's length prefix bounds every field: a record must consume exactly the bytes its
// length says (as Apache's DefaultRecord.readFrom insists). With keepHeaders false, headers
// are checked but not stored.
func parseRecord(b []byte, rec *Record, keepHeaders bool) ([]byte, error) {
	length, b, err := varint32(b, "record length")
	if err != nil {
		return nil, err
	}
	if length < 0 || int64(length) > int64(len(b)) {
		return nil, fmt.Errorf("%w: record length %d with %d bytes left", ErrMalformed, length, len(b))
	}
	body, rest := b[:length], b[length:]
	if len(body) < 1 {
		return nil, fmt.Errorf("%w: record without attributes", ErrMalformed)
	}
	*rec = Record{Attributes: int8(body[0])}
	body = body[1:]
	if rec.TimestampDelta, body, err = varint64(body, "timestamp delta"); err != nil {
		return nil, err
	}
	if rec.OffsetDelta, body, err = varint32(body, "offset delta"); err != nil {
		return nil, err
	}
	if rec.Key, body, err = nullableBytes(body, "key"); err != nil {
		return nil, err
	}
	if rec.Value, body, err = nullableBytes(body, "value"); err != nil {
		return nil, err
	}
	n, body, err := varint32(body, "header count")
	if err != nil {
		return nil, err
	}
	if n < 0 || int64(n) > int64(len(body)/minHeaderSize) {
		return nil, fmt.Errorf("%w: header count %d with %d bytes left", ErrMalformed, n, len(body))
	}
	if keepHeaders && n > 0 {
		rec.Headers = make([]Header, n)
	}
	for i := range n {
		var key, value []byte
		if key, body, err = nullableBytes(body, "header key"); err != nil {
			return nil, err
		}
		if key == nil {
			return nil, fmt.Errorf("%w: header %d has a null key", ErrMalformed, i)
		}
		if value, body, err = nullableBytes(body, "header value"); err != nil {
			return nil, err
		}
		if keepHeaders {
			rec.Headers[i] = Header{Key: string(key), Value: value}
		}
	}
	if len(body) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left inside the record after its headers", ErrMalformed, len(body))
	}
	return rest, nil
}

// varint64 reads a zigzag varint (Kafka's varlong).
func varint64(b []byte, what string) (int64, []byte, error) {
	v, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad varint for %s", ErrMalformed, what)
	}
	return v, b[n:], nil
}

// varint32 reads a zigzag varint that must fit an int32 (Kafka's varint).
func varint32(b []byte, what string) (int32, []byte, error) {
	v, rest, err := varint64(b, what)
	if err != nil {
		return 0, nil, err
	}
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, nil, fmt.Errorf("%w: %s %d overflows an int32", ErrMalformed, what, v)
	}
	return int32(v), rest, nil
}

// nullableBytes reads a varint length (-1 for null) and that many bytes, aliasing b. A
// present but empty field is returned as a non-nil empty slice so that it stays distinct
// from null.
func nullableBytes(b []byte, what string) ([]byte, []byte, error) {
	n, b, err := varint32(b, what)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case n == -1:
		return nil, b, nil
	case n < -1 || int64(n) > int64(len(b)):
		return nil, nil, fmt.Errorf("%w: %s length %d with %d bytes left", ErrMalformed, what, n, len(b))
	}
	return b[:n:n], b[n:], nil
}

// Append encodes recs (varint length-prefixed records, as Kafka writes them) after dst.
func Append(dst []byte, recs []Record) []byte {
	for i := range recs {
		r := &recs[i]
		dst = binary.AppendVarint(dst, int64(bodySize(r)))
		dst = append(dst, byte(r.Attributes))
		dst = binary.AppendVarint(dst, r.TimestampDelta)
		dst = binary.AppendVarint(dst, int64(r.OffsetDelta))
		dst = appendNullable(dst, r.Key)
		dst = appendNullable(dst, r.Value)
		dst = binary.AppendVarint(dst, int64(len(r.Headers)))
		for _, h := range r.Headers {
			dst = binary.AppendVarint(dst, int64(len(h.Key)))
			dst = append(dst, h.Key...)
			dst = appendNullable(dst, h.Value)
		}
	}
	return dst
}

// bodySize is the encoded size of r after its length prefix.
func bodySize(r *Record) int {
	n := 1 + varintSize(r.TimestampDelta) + varintSize(int64(r.OffsetDelta)) +
		nullableSize(r.Key) + nullableSize(r.Value) + varintSize(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintSize(int64(len(h.Key))) + len(h.Key) + nullableSize(h.Value)
	}
	return n
}

func appendNullable(dst, b []byte) []byte {
	if b == nil {
		return binary.AppendVarint(dst, -1)
	}
	dst = binary.AppendVarint(dst, int64(len(b)))
	return append(dst, b...)
}

func nullableSize(b []byte) int {
	if b == nil {
		return varintSize(-1)
	}
	return varintSize(int64(len(b))) + len(b)
}

// varintSize is the length of v as a zigzag varint.
func varintSize(v int64) int {
	u := uint64(v<<1) ^ uint64(v>>63)
	n := 1
	for u >= 0x80 {
		u >>= 7
		n++
	}
	return n
}

// Decode is Decompress (with limit) then Parse.
func Decode(attributes uint16, body []byte, count int32, limit int) ([]Record, error) {
	raw, err := Decompress(codecOf(attributes), body, limit)
	if err != nil {
		return nil, err
	}
	return Parse(raw, count)
}

// Encode is Append then Compress with codec.
func Encode(codec int, recs []Record) ([]byte, error) {
	return Compress(codec, Append(nil, recs))
}

// NullKey reports whether any record of the records section has a null key (Produce refuses
// such batches on compacted topics); it decompresses with limit and walks records without
// keeping them. It checks the whole section, so a malformed one is an error even after a
// null key was seen.
func NullKey(attributes uint16, body []byte, count int32, limit int) (bool, error) {
	raw, err := Decompress(codecOf(attributes), body, limit)
	if err != nil {
		return false, err
	}
	found := false
	err = walk(raw, count, func(r *Record) {
		if r.Key == nil {
			found = true
		}
	})
	if err != nil {
		return false, err
	}
	return found, nil
}

// codecOf is the compression codec in a batch's attributes (the low three bits).
func codecOf(attributes uint16) int { return int(attributes & 0x07) }
