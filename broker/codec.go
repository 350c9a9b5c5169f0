package broker

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// Decoding requests and encoding answers with kmsg, over the frames broker/wire reads and
// writes.

// Errors that end a connection. Each one is logged with the connection and counted.
var (
	errUnknownKey    = errors.New("unknown api key")
	errVersionRange  = errors.New("api version outside the advertised range")
	errMalformedBody = errors.New("malformed request body")
)

// decodeRequest decodes the request after header h: rest is what follows the client id (the
// tagged fields of a flexible request header, then the body).
//
// errUnknownKey: kmsg has no such key or no handler is registered for it.
// errVersionRange: the version is outside the range this broker advertises for the key.
// The bytes are not retained: kmsg's ReadFrom copies what it keeps (but []byte fields alias
// rest: see answerLater).
func decodeRequest(h wire.Header, rest []byte) (kmsg.Request, error) {
	api, ok := apis[h.Key]
	req := kmsg.RequestForKey(h.Key)
	if !ok || req == nil {
		return nil, fmt.Errorf("%w %d", errUnknownKey, h.Key)
	}
	if h.Version < api.min || h.Version > api.max {
		return nil, fmt.Errorf("%w: %s v%d, advertised %d-%d", errVersionRange, kmsg.NameForKey(h.Key), h.Version, api.min, api.max)
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return nil, fmt.Errorf("%w: tagged fields: %v", wire.ErrMalformedHeader, err)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return nil, fmt.Errorf("%w: %s v%d: %v", errMalformedBody, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return req, nil
}

// errorReason is the metric reason of a request decodeRequest refused.
func errorReason(err error) string {
	switch {
	case errors.Is(err, errUnknownKey):
		return "unknown_key"
	case errors.Is(err, errVersionRange):
		return "unsupported_version"
	case errors.Is(err, wire.ErrMalformedHeader), errors.Is(err, wire.ErrFrameTooSmall):
		return "bad_header"
	default:
		return "bad_body"
	}
}

// skipTags skips a tagged-field section (uvarint count, then per field a uvarint tag, a
// uvarint size and that many bytes). The broker knows no request-header tags.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[w:]
	for ; n > 0; n-- {
		if _, w = binary.Uvarint(b); w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tag size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// appendResponse appends a complete response frame: size, correlation id, the header tag
// byte when the response header has one (responseHeaderTagged), then the body.
func appendResponse(dst []byte, correlationID int32, resp kmsg.Response) []byte {
	if dst == nil {
		dst = make([]byte, 0, responseSizeHint(resp)) // one allocation for a large Fetch, not a doubling series
	}
	return wire.AppendFrame(dst, correlationID, func(b []byte) []byte {
		if responseHeaderTagged(resp) {
			b = append(b, 0)
		}
		return resp.AppendTo(b)
	})
}

// appendRequestFrame appends req as a complete request frame (size, header v1 or v2 with the
// client id "paddock", body): what a client sends. Tests use it.
func appendRequestFrame(dst []byte, req kmsg.Request, correlationID int32) []byte {
	return appendRequestFrameFrom(dst, "paddock", req, correlationID)
}

// appendRequestFrameFrom is appendRequestFrame with the given client id.
func appendRequestFrameFrom(dst []byte, clientID string, req kmsg.Request, correlationID int32) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.Key()))
	dst = binary.BigEndian.AppendUint16(dst, uint16(req.GetVersion()))
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(clientID)))
	dst = append(dst, clientID...)
	if req.IsFlexible() {
		dst = append(dst, 0)
	}
	dst = req.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// vectoredMinRecords is the smallest record set a Fetch answer writes from its own buffer
// (a vectored write) rather than copying it into the encoded frame.
const vectoredMinRecords = 4 << 10

// recordsMarkerSeed starts every records placeholder of encodeFetchFrame: random per process
// after a 0x00 0xff start that no topic name (legal characters [a-zA-Z0-9._-]) or host name
// holds, so no other field of a Fetch answer can be mistaken for one.
var recordsMarkerSeed = func() [12]byte {
	var s [12]byte
	if _, err := crand.Read(s[:]); err != nil {
		panic(fmt.Sprintf("broker: random records marker: %v", err)) // crypto/rand does not fail on Linux
	}
	s[0], s[1] = 0x00, 0xff
	return s
}()

// recordsMarker is the 16-byte placeholder of the k-th large record set.
func recordsMarker(k int) []byte {
	m := make([]byte, 0, 16)
	m = append(m, recordsMarkerSeed[:]...)
	return binary.BigEndian.AppendUint32(m, uint32(k))
}

// encodeAnswer is the answer frame for resp: a Fetch answer with large record sets in pieces
// — the records as storage read them, or the segment sections held sends from the file —
// around the rest of the encoded answer (one copy fewer than encoding them into the frame, or
// none at all), everything else appendResponse's one buffer. The answer lets go of what held
// holds once written (wire.Answer.Release).
func encodeAnswer(correlationID int32, resp kmsg.Response, held *heldRecords) wire.Answer {
	var ans wire.Answer
	if held != nil && !held.empty() {
		ans.Release = held.release
	}
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		if ans.Pieces = encodeFetchFrame(correlationID, f, held); ans.Pieces != nil {
			return ans
		}
		readHeldIn(held)
	}
	ans.Frame = appendResponse(nil, correlationID, resp)
	return ans
}

// readHeldIn reads the sections held into their partitions' records, for an answer encoded
// into one buffer after all (never expected: encodeFetchFrame found no marker where the
// encoding puts it). A section that cannot be read leaves its partition empty.
func readHeldIn(held *heldRecords) {
	if held == nil {
		return
	}
	for p, sec := range held.files {
		buf := make([]byte, sec.Len)
		if _, err := sec.ReadAt(buf, 0); err == nil {
			p.RecordBatches = buf
		}
	}
	for p, chunks := range held.chunks {
		p.RecordBatches = bytes.Join(chunks, nil)
	}
}

// encodeFetchFrame encodes resp with a 16-byte marker in place of each record set of at least
// vectoredMinRecords bytes and of each section held sends from its file, then splits the
// frame at the markers: the frame's bytes up to a marker's length prefix, the real length
// prefix, the records themselves (bytes, or the file range), and so on, with the frame size
// fixed for the real lengths. The bytes written are exactly appendResponse's
// (TestFetchFrameIsTheEncodedResponse). resp is restored before it returns. nil when there is
// nothing to split out, or when a marker is not found where the encoding puts it (never
// expected; the caller then encodes the frame whole).
func encodeFetchFrame(correlationID int32, resp *kmsg.FetchResponse, held *heldRecords) []wire.Piece {
	sets, records := largeRecordSets(resp, held)
	if len(sets) == 0 {
		return nil
	}
	saved := make([][]byte, len(sets))
	for k, s := range sets {
		saved[k], *s = *s, recordsMarker(k)
	}
	frame := appendResponse(nil, correlationID, resp)
	for k, s := range sets {
		*s = saved[k]
	}
	return splitAtMarkers(frame, records, resp.IsFlexible())
}

// largeRecordSets points at every record set of resp worth sending apart from the frame, with
// the pieces each is sent as: a section held (from its file), the chunks held, or the
// records' own bytes.
func largeRecordSets(resp *kmsg.FetchResponse, held *heldRecords) ([]*[]byte, [][]wire.Piece) {
	var (
		sets   []*[]byte
		pieces [][]wire.Piece
	)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			var set []wire.Piece
			switch {
			case held != nil && held.files[p] != nil:
				sec := held.files[p]
				set = []wire.Piece{{File: sec.File(), Offset: sec.Pos, Len: sec.Len}}
			case held != nil && held.chunks[p] != nil:
				for _, c := range held.chunks[p] {
					set = append(set, wire.Piece{Bytes: c})
				}
			case len(p.RecordBatches) >= vectoredMinRecords:
				set = []wire.Piece{{Bytes: p.RecordBatches}}
			default:
				continue
			}
			sets, pieces = append(sets, &p.RecordBatches), append(pieces, set)
		}
	}
	return sets, pieces
}

// piecesLen is the length of pieces' bytes and file ranges.
func piecesLen(pieces []wire.Piece) int64 {
	var n int64
	for _, p := range pieces {
		if p.File != nil {
			n += p.Len
		} else {
			n += int64(len(p.Bytes))
		}
	}
	return n
}

// splitAtMarkers cuts frame (encoded with recordsMarker(k) in place of records[k]) into the
// pieces of the real frame: the bytes before each marker's length prefix, the real length
// prefix, the records, and the tail; the frame's size prefix is fixed for the real lengths.
// nil when a marker is not where the encoding puts it.
func splitAtMarkers(frame []byte, records [][]wire.Piece, flexible bool) []wire.Piece {
	pieces := make([]wire.Piece, 0, 3*len(records)+1)
	prefixes := make([]byte, 0, 5*len(records))
	size, pos := int64(len(frame)-4), 0
	// The marker's own length prefix: int32 16, or (flexible versions) uvarint 16+1.
	plen := 4
	if flexible {
		plen = 1
	}
	for k, rec := range records {
		i := bytes.Index(frame[pos:], recordsMarker(k))
		if i < 0 {
			return nil
		}
		i += pos
		if i-plen < pos || (flexible && frame[i-1] != 17) || (!flexible && binary.BigEndian.Uint32(frame[i-4:]) != 16) {
			return nil
		}
		n := piecesLen(rec)
		start := len(prefixes)
		if flexible {
			prefixes = binary.AppendUvarint(prefixes, uint64(n)+1)
		} else {
			prefixes = binary.BigEndian.AppendUint32(prefixes, uint32(n))
		}
		pieces = append(pieces, wire.Piece{Bytes: frame[pos : i-plen]}, wire.Piece{Bytes: prefixes[start:len(prefixes):len(prefixes)]})
		pieces = append(pieces, rec...)
		size += int64(len(prefixes)-start-plen) + n - 16
		pos = i + 16
	}
	pieces = append(pieces, wire.Piece{Bytes: frame[pos:]})
	binary.BigEndian.PutUint32(frame, uint32(size))
	return pieces
}
