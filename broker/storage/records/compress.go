package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The compression codecs of a batch's attributes.
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLZ4    = 3
	codecZstd   = 4
)

// Decompress returns the raw records bytes of a records section compressed with codec (0 =
// returned as is), refusing to produce more than limit bytes (ErrTooLarge) — a decompression
// bomb must never allocate beyond limit (+ small constant). An uncompressed section longer
// than limit is refused too. A negative limit is treated as 0.
func Decompress(codec int, body []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	switch codec {
	case codecNone:
		if len(body) > limit {
			return nil, fmt.Errorf("%w: %d bytes > %d", ErrTooLarge, len(body), limit)
		}
		return body, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		return readLimited(zr, len(body), limit, "gzip")
	case codecSnappy:
		return decodeSnappy(body, limit)
	case codecLZ4:
		return readLimited(lz4.NewReader(bytes.NewReader(body)), len(body), limit, "lz4")
	case codecZstd:
		return decodeZstd(body, limit)
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedCodec, codec)
	}
}

// Compress compresses raw records bytes with codec (0 returns raw as is). Snappy output uses
// the xerial framing the Java client writes, which every client reads; LZ4 is the LZ4 frame
// format; gzip and zstd are single streams at their default levels.
func Compress(codec int, raw []byte) ([]byte, error) {
	switch codec {
	case codecNone:
		return raw, nil
	case codecGzip:
		var buf bytes.Buffer
		zw := gzipWriters.Get().(*gzip.Writer)
		defer gzipWriters.Put(zw)
		zw.Reset(&buf)
		if _, err := zw.Write(raw); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	case codecSnappy:
		return encodeXerial(raw), nil
	case codecLZ4:
		var buf bytes.Buffer
		zw := lz4Writers.Get().(*lz4.Writer)
		defer lz4Writers.Put(zw)
		zw.Reset(&buf)
		if _, err := zw.Write(raw); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case codecZstd:
		enc, err := zstdEncoder()
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		return enc.EncodeAll(raw, nil), nil
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnsupportedCodec, codec)
	}
}

var (
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	// lz4Writers write 64 KiB blocks, as Apache's KafkaLZ4BlockOutputStream does by
	// default.
	lz4Writers = sync.Pool{New: func() any {
		zw := lz4.NewWriter(nil)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			panic(err) // a constant, valid option
		}
		return zw
	}}

	// zstdEncoder is shared: EncodeAll is safe for concurrent use.
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil)
	})
)

// readLimited reads r to its end, failing with ErrTooLarge as soon as it yields more than
// limit bytes. The buffer starts from a guess and doubles, never past limit+1 bytes.
func readLimited(r io.Reader, compressed, limit int, codec string) ([]byte, error) {
	ceiling := limit + 1
	if limit == math.MaxInt {
		ceiling = limit
	}
	buf := make([]byte, 0, min(ceiling, max(512, 4*compressed)))
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, fmt.Errorf("%w: %s decompresses past %d bytes", ErrTooLarge, codec, limit)
			}
			grown := make([]byte, len(buf), min(ceiling, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, fmt.Errorf("%w: %s decompresses past %d bytes", ErrTooLarge, codec, limit)
		}
		switch {
		case errors.Is(err, io.EOF):
			return buf, nil
		case err != nil:
			return nil, fmt.Errorf("%w: %s: %w", ErrMalformed, codec, err)
		}
	}
}

// zstdMinWindow is the largest window decodeZstd accepts whatever the limit: a decoder
// allocates the frame's whole window up front, so the window must be bounded too, but the
// windows zstd-jni picks at Kafka's levels (at most 8 MiB below level 20) must pass even
// under a small limit.
const zstdMinWindow = 8 << 20

// zstdStreams are synchronous streaming decoders (concurrency 1: no goroutines), reset for
// each records section.
var zstdStreams sync.Pool

// decodeZstd decodes one or more zstd frames into at most limit bytes. A frame that declares
// more than limit is refused from its header; otherwise the frames are streamed through
// readLimited, so memory stays within limit plus one window (at most max(limit, 8 MiB)).
// DecodeAll is not used here: once its output passes the buffer it was given it grows that
// buffer before noticing, which would let a bomb allocate about twice the limit.
func decodeZstd(body []byte, limit int) ([]byte, error) {
	var h zstd.Header
	if h.Decode(body) == nil && h.HasFCS && h.FrameContentSize > uint64(limit) {
		return nil, fmt.Errorf("%w: zstd frame declares %d bytes > %d", ErrTooLarge, h.FrameContentSize, limit)
	}
	dec, _ := zstdStreams.Get().(*zstd.Decoder)
	if dec == nil {
		var err error
		if dec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecodeBuffersBelow(0)); err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
	}
	defer func() {
		_ = dec.Reset(nil) // drop the reference to body
		zstdStreams.Put(dec)
	}()
	window := uint64(max(limit, zstdMinWindow))
	if err := dec.ResetWithOptions(bytes.NewReader(body), zstd.WithDecoderMaxWindow(window)); err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
	}
	out, err := readLimited(dec, len(body), limit, "zstd")
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		return nil, fmt.Errorf("%w: zstd window above %d bytes", ErrTooLarge, window)
	}
	return out, err
}

// xerialMagic opens a snappy stream in the xerial framing (snappy-java's SnappyOutputStream),
// followed by a big-endian int32 version and compatible version, then chunks of a big-endian
// int32 length and a raw snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const (
	xerialHeaderSize = 16
	// xerialChunk is how much raw input goes into one block; snappy-java's default.
	xerialChunk = 32 << 10
)

// encodeXerial frames raw in the xerial format, version 1, compatible version 1.
func encodeXerial(raw []byte) []byte {
	out := make([]byte, 0, xerialHeaderSize+snappy.MaxEncodedLen(len(raw))+4*(len(raw)/xerialChunk+1))
	out = append(out, xerialMagic...)
	out = binary.BigEndian.AppendUint32(out, 1)
	out = binary.BigEndian.AppendUint32(out, 1)
	scratch := make([]byte, snappy.MaxEncodedLen(min(len(raw), xerialChunk)))
	for len(raw) > 0 {
		chunk := raw[:min(len(raw), xerialChunk)]
		raw = raw[len(chunk):]
		block := snappy.Encode(scratch, chunk)
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
	}
	return out
}

// decodeSnappy decodes a xerial-framed stream (any number of chunks) or a raw snappy block
// (what franz-go writes). Each block's declared decoded length is checked against what is
// left of limit before anything is allocated for it.
func decodeSnappy(body []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(body, xerialMagic) {
		out, err := decodeSnappyBlock(nil, body, limit)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	if len(body) < xerialHeaderSize {
		return nil, fmt.Errorf("%w: snappy: xerial header cut short at %d bytes", ErrMalformed, len(body))
	}
	var out []byte
	rest := body[xerialHeaderSize:]
	for len(rest) > 0 {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: snappy: xerial chunk length cut short", ErrMalformed)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: snappy: xerial chunk of %d bytes with %d left", ErrMalformed, n, len(rest))
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n], limit); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	if out == nil {
		out = []byte{}
	}
	return out, nil
}

// decodeSnappyBlock appends the decoding of one raw snappy block to out, refusing to let out
// grow past limit.
func decodeSnappyBlock(out, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	if n > limit-len(out) {
		return nil, fmt.Errorf("%w: snappy decompresses past %d bytes", ErrTooLarge, limit)
	}
	if cap(out)-len(out) < n {
		grown := make([]byte, len(out), min(limit, max(len(out)+n, 2*cap(out))))
		copy(grown, out)
		out = grown
	}
	dst := out[len(out) : len(out)+n]
	if _, err := snappy.DecodeStrict(dst, block); err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
	}
	return out[:len(out)+n], nil
}
