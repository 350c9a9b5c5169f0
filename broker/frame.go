package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
