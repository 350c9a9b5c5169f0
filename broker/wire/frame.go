package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrameBytes caps a request frame, as Kafka's socket.request.max.bytes does — but
// lower than Apache's 100 MiB, since only Produce needs large frames: a request holds at most
// one batch per partition, each at most message.max.bytes (1 MiB by default), and the Java
// client (max.request.size), librdkafka and Sarama send at most about 1 MB per request
// (docs/bounds.md, "Requests").
const DefaultMaxFrameBytes = 32 << 20

// MinFrameBytes is the smallest request frame: key, version, correlation id and a client id
// length.
const MinFrameBytes = 2 + 2 + 4 + 2

// Errors that end a connection. Each one is logged with the connection and counted.
var (
	// ErrFrameTooLarge: the size prefix is above the cap (or negative).
	ErrFrameTooLarge = errors.New("frame size exceeds the cap")
	// ErrFrameTooSmall: the frame cannot hold a request header.
	ErrFrameTooSmall = errors.New("frame too small for a request header")
	// ErrMalformedHeader: the request header does not parse.
	ErrMalformedHeader = errors.New("malformed request header")
)

// ReadFrame reads one size-prefixed frame from r into buf (grown as needed) and returns it.
// The size prefix is checked against maxBytes before anything is allocated for the body, and
// the body is read incrementally (readBody), so a hostile or corrupt prefix (say 2 GiB, or the
// cap with nothing behind it) costs only what actually arrives.
func ReadFrame(r io.Reader, buf []byte, maxBytes int) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return buf, err
	}
	n, err := checkFrameSize(size, MinFrameBytes, maxBytes)
	if err != nil {
		return buf, err
	}
	return readBody(r, buf[:0], n)
}

// checkFrameSize is the frame size a size prefix claims, refused when above maxBytes (or
// negative) or below minBytes: MinFrameBytes for a request, whose header it must hold, 0 for
// a raw SASL token frame (Conn.ExpectRawFrame), which may be shorter.
func checkFrameSize(size [4]byte, minBytes, maxBytes int) (int, error) {
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || int64(n) > int64(maxBytes) {
		return 0, fmt.Errorf("%w: %d bytes, cap %d", ErrFrameTooLarge, uint32(n), maxBytes)
	}
	if int(n) < minBytes {
		return 0, fmt.Errorf("%w: %d bytes", ErrFrameTooSmall, n)
	}
	return int(n), nil
}

// readChunk is how much of a frame body is read before the buffer is grown for more.
const readChunk = 64 << 10

// readBody appends the rest of an n-byte frame to buf (which holds its first len(buf)
// bytes), growing buf only as bytes arrive — at most doubling, in readChunk steps at least —
// so what a frame costs follows what the client sent, not what its prefix claims.
func readBody(r io.Reader, buf []byte, n int) ([]byte, error) {
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, max(2*cap(buf), readChunk)))
			copy(grown, buf)
			buf = grown
		}
		got, err := io.ReadFull(r, buf[len(buf):min(n, cap(buf))])
		buf = buf[:len(buf)+got]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return buf, fmt.Errorf("truncated frame: %w", err)
		}
	}
	return buf, nil
}

// Header is the part of a request header every version shares (header v1, and the start
// of v2): what the server needs to route a request and to answer it.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	// ClientID is nil when the client sent a null client id.
	ClientID *string
}

// ParseHeader parses the start of a request frame (without its size prefix): key, version,
// correlation id and client id. rest is what follows the client id — the tagged fields of a
// flexible (v2) header, then the body — aliasing frame. It returns the header whenever the
// first eight bytes were readable, so the caller can log the correlation id even with an
// error.
func ParseHeader(frame []byte) (h Header, rest []byte, err error) {
	if len(frame) < MinFrameBytes {
		return h, nil, ErrFrameTooSmall
	}
	h.Key = int16(binary.BigEndian.Uint16(frame[0:]))
	h.Version = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	rest = frame[8:]

	// The client id is a nullable string with an int16 length in header v1 and v2 alike.
	idLen := int16(binary.BigEndian.Uint16(rest))
	rest = rest[2:]
	switch {
	case idLen == -1:
	case idLen < -1 || int(idLen) > len(rest):
		return h, nil, fmt.Errorf("%w: client id length %d", ErrMalformedHeader, idLen)
	default:
		id := string(rest[:idLen])
		h.ClientID = &id
		rest = rest[idLen:]
	}
	return h, rest, nil
}

// AppendFrame appends a complete response frame to dst: the size prefix, the correlation id,
// then body, which the caller encoded after its own response header fields (a tag section
// for a flexible response). The size is filled in when body is appended: pass a function that
// appends the body, so a large answer is encoded once, in place.
func AppendFrame(dst []byte, correlationID int32, body func([]byte) []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlationID))
	dst = body(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
