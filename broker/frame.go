package broker

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// minFrameBytes is the smallest request frame: key, version, correlation id and a client id
// length.
const minFrameBytes = 2 + 2 + 4 + 2

// Errors that end a connection. Each one is logged with the connection and counted.
var (
	errFrameTooLarge   = errors.New("frame size exceeds the cap")
	errFrameTooSmall   = errors.New("frame too small for a request header")
	errUnknownKey      = errors.New("unknown api key")
	errVersionRange    = errors.New("api version outside the advertised range")
	errMalformedHeader = errors.New("malformed request header")
	errMalformedBody   = errors.New("malformed request body")
)

// readFrame reads one size-prefixed frame from r into buf (grown as needed) and returns it.
// The size prefix is checked against maxBytes before anything is allocated for the body, so
// a hostile or corrupt prefix (say 2 GiB) costs nothing.
func readFrame(r io.Reader, buf []byte, maxBytes int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return buf, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || int64(n) > int64(maxBytes) {
		return buf, fmt.Errorf("%w: %d bytes, cap %d", errFrameTooLarge, uint32(n), maxBytes)
	}
	if n < minFrameBytes {
		return buf, fmt.Errorf("%w: %d bytes", errFrameTooSmall, n)
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return buf, fmt.Errorf("truncated frame: %w", err)
	}
	return buf, nil
}

// requestHeader is the part of a request header the broker needs.
type requestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// decodeRequest parses a frame (without its size prefix): the request header v1/v2 and the
// body. It returns the header whenever the first eight bytes were readable, so the caller can
// answer or log with the correlation id even when it returns an error.
//
// errUnknownKey: kmsg has no such key or no handler is registered for it.
// errVersionRange: the version is outside the range this broker advertises for the key.
// The frame is not retained: kmsg's ReadFrom copies what it keeps.
func decodeRequest(frame []byte) (requestHeader, kmsg.Request, error) {
	var h requestHeader
	if len(frame) < minFrameBytes {
		return h, nil, errFrameTooSmall
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest := frame[8:]

	// The client id is a nullable string with an int16 length in header v1 and v2 alike.
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case idLen == -1:
	case idLen < -1 || int(idLen) > len(rest):
		return h, nil, fmt.Errorf("%w: client id length %d", errMalformedHeader, idLen)
	default:
		id := string(rest[:idLen])
		h.ClientID = &id
		rest = rest[idLen:]
	}

	api, ok := apis[h.Key]
	req := kmsg.RequestForKey(h.Key)
	if !ok || req == nil {
		return h, nil, fmt.Errorf("%w %d", errUnknownKey, h.Key)
	}
	if h.Version < api.min || h.Version > api.max {
		return h, nil, fmt.Errorf("%w: %s v%d, advertised %d-%d", errVersionRange, kmsg.NameForKey(h.Key), h.Version, api.min, api.max)
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		var err error
		if rest, err = skipTags(rest); err != nil {
			return h, nil, fmt.Errorf("%w: tagged fields: %v", errMalformedHeader, err)
		}
	}
	if err := req.ReadFrom(rest); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", errMalformedBody, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
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
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	if responseHeaderTagged(resp) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
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

// encodeAnswer is the answer frame for resp: a Fetch answer with large record sets as
// vectored buffers that write the records from the buffers storage read them into (one copy
// fewer than encoding them into the frame), everything else appendResponse's one buffer.
func encodeAnswer(correlationID int32, resp kmsg.Response) *answer {
	if f, ok := resp.(*kmsg.FetchResponse); ok {
		if bufs := encodeFetchFrame(correlationID, f); bufs != nil {
			return &answer{bufs: bufs}
		}
	}
	return &answer{b: appendResponse(nil, correlationID, resp)}
}

// encodeFetchFrame encodes resp with a 16-byte marker in place of each record set of at least
// vectoredMinRecords bytes, then splits the frame at the markers: the frame's bytes up to a
// marker's length prefix, the real length prefix, the records themselves, and so on, with
// the frame size fixed for the real lengths. The bytes written are exactly appendResponse's
// (TestFetchFrameIsTheEncodedResponse). resp is restored before it returns. nil when no record
// set is large enough, or when a marker is not found where the encoding puts it (never
// expected; the caller then encodes the frame whole).
func encodeFetchFrame(correlationID int32, resp *kmsg.FetchResponse) net.Buffers {
	var sets []*[]byte
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if p := &resp.Topics[i].Partitions[j]; len(p.RecordBatches) >= vectoredMinRecords {
				sets = append(sets, &p.RecordBatches)
			}
		}
	}
	if len(sets) == 0 {
		return nil
	}
	records := make([][]byte, len(sets))
	for k, s := range sets {
		records[k], *s = *s, recordsMarker(k)
	}
	frame := appendResponse(nil, correlationID, resp)
	for k, s := range sets {
		*s = records[k]
	}
	flexible := resp.IsFlexible()
	bufs := make(net.Buffers, 0, 3*len(sets)+1)
	prefixes := make([]byte, 0, 5*len(sets))
	size, pos := len(frame)-4, 0
	for k, rec := range records {
		i := bytes.Index(frame[pos:], recordsMarker(k))
		if i < 0 {
			return nil
		}
		i += pos
		// The marker's own length prefix: int32 16, or (flexible versions) uvarint 16+1.
		plen := 4
		if flexible {
			plen = 1
		}
		if i-plen < pos || (flexible && frame[i-1] != 17) || (!flexible && binary.BigEndian.Uint32(frame[i-4:]) != 16) {
			return nil
		}
		start := len(prefixes)
		if flexible {
			prefixes = binary.AppendUvarint(prefixes, uint64(len(rec))+1)
		} else {
			prefixes = binary.BigEndian.AppendUint32(prefixes, uint32(len(rec)))
		}
		bufs = append(bufs, frame[pos:i-plen], prefixes[start:len(prefixes):len(prefixes)], rec)
		size += len(prefixes) - start - plen + len(rec) - 16
		pos = i + 16
	}
	bufs = append(bufs, frame[pos:])
	binary.BigEndian.PutUint32(frame, uint32(size))
	return bufs
}
