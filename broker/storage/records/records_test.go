package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var codecs = []struct {
	name  string
	codec int
}{{"none", 0}, {"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}}

// sampleRecords covers what the cleaner and Produce validation meet: null keys, tombstones,
// empty but present keys and values, headers with null and empty values, negative
// timestamp deltas and large offset deltas.
func sampleRecords() []Record {
	return []Record{
		{TimestampDelta: 0, OffsetDelta: 0, Key: []byte("k0"), Value: []byte("v0")},
		{TimestampDelta: -5, OffsetDelta: 1, Key: nil, Value: []byte("keyless")},
		{TimestampDelta: 17, OffsetDelta: 2, Key: []byte("k0"), Value: nil}, // tombstone
		{TimestampDelta: -1 << 40, OffsetDelta: 3, Key: []byte{}, Value: []byte{}},
		{Attributes: 0, TimestampDelta: 1 << 33, OffsetDelta: 1<<31 - 1, Key: []byte("h"), Value: bytes.Repeat([]byte("xy"), 300),
			Headers: []Header{{Key: "trace", Value: []byte("abc")}, {Key: "", Value: nil}, {Key: "e", Value: []byte{}}}},
	}
}

func TestEveryCodecRoundTrips(t *testing.T) {
	want := sampleRecords()
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			body, err := Encode(c.codec, want)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(uint16(c.codec), body, int32(len(want)), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestAnEmptyRecordsSectionRoundTrips(t *testing.T) {
	for _, c := range codecs {
		body, err := Encode(c.codec, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := Decode(uint16(c.codec), body, 0, 1<<20)
		if err != nil || len(got) != 0 {
			t.Fatalf("%s: got %v, %v", c.name, got, err)
		}
	}
}

func TestDecodeReadsTheCodecFromTheLowBitsOfTheAttributes(t *testing.T) {
	want := sampleRecords()
	body, err := Encode(4, want)
	if err != nil {
		t.Fatal(err)
	}
	// Transactional and LogAppendTime bits do not change the codec.
	got, err := Decode(4|1<<3|1<<4, body, int32(len(want)), 1<<20)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, %v", got, err)
	}
}

func TestUnknownCodecsAreUnsupported(t *testing.T) {
	for codec := 5; codec <= 7; codec++ {
		if _, err := Decompress(codec, []byte{1}, 1<<20); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Decompress codec %d: %v, want ErrUnsupportedCodec", codec, err)
		}
		if _, err := Compress(codec, []byte{1}); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Compress codec %d: %v, want ErrUnsupportedCodec", codec, err)
		}
		if _, err := Decode(uint16(codec), []byte{1}, 1, 1<<20); !errors.Is(err, ErrUnsupportedCodec) {
			t.Errorf("Decode codec %d: %v, want ErrUnsupportedCodec", codec, err)
		}
	}
}

func TestSnappyWritesTheXerialFraming(t *testing.T) {
	raw := bytes.Repeat([]byte("0123456789"), 10_000) // 100 kB: several 32 KiB chunks
	body, err := Compress(2, raw)
	if err != nil {
		t.Fatal(err)
	}
	wantHeader := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	if !bytes.HasPrefix(body, wantHeader) {
		t.Fatalf("header % x, want % x", body[:16], wantHeader)
	}
	var got []byte
	for rest := body[16:]; len(rest) > 0; {
		n := binary.BigEndian.Uint32(rest)
		block, err := snappy.Decode(nil, rest[4:4+n])
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, block...)
		rest = rest[4+n:]
	}
	if !bytes.Equal(got, raw) {
		t.Fatal("xerial chunks do not concatenate to the input")
	}
}

func TestSnappyReadsBothXerialFramesAndRawBlocks(t *testing.T) {
	raw := Append(nil, sampleRecords())
	xerial := func(chunks ...[]byte) []byte {
		out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
		for _, c := range chunks {
			block := snappy.Encode(nil, c)
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
		}
		return out
	}
	for name, body := range map[string][]byte{
		"raw block":          snappy.Encode(nil, raw),
		"xerial, one chunk":  xerial(raw),
		"xerial, 3 chunks":   xerial(raw[:10], raw[10:11], raw[11:]),
		"xerial, byte-wise":  xerial(splitEvery(raw, 1)...),
		"our own compressor": must(Compress(2, raw)),
	} {
		got, err := Decompress(2, body, 1<<20)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: decoded bytes differ", name)
		}
	}
}

func TestSnappyRefusesACutXerialStream(t *testing.T) {
	body := must(Compress(2, Append(nil, sampleRecords())))
	for _, n := range []int{9, 15, 17, 19, 21, len(body) - 1} {
		if _, err := Decompress(2, body[:n], 1<<20); !errors.Is(err, ErrMalformed) {
			t.Errorf("cut at %d of %d: %v, want ErrMalformed", n, len(body), err)
		}
	}
}

func splitEvery(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		k := min(n, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// bombs compresses 100 MB of zeros with every codec, in the shapes an attacker could choose:
// for zstd both a frame declaring its size and a streamed one that does not.
func bombs(t *testing.T) map[string]struct {
	codec int
	body  []byte
} {
	t.Helper()
	zeros := make([]byte, 100<<20)
	out := map[string]struct {
		codec int
		body  []byte
	}{}
	for _, c := range codecs[1:] {
		out[c.name] = struct {
			codec int
			body  []byte
		}{c.codec, must(Compress(c.codec, zeros))}
	}
	var streamed bytes.Buffer
	zw := must(zstd.NewWriter(&streamed))
	if _, err := zw.Write(zeros); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out["zstd streamed"] = struct {
		codec int
		body  []byte
	}{4, streamed.Bytes()}
	out["snappy raw block"] = struct {
		codec int
		body  []byte
	}{2, snappy.Encode(nil, zeros)}
	return out
}

func TestADecompressionBombIsRefusedWithinTheLimit(t *testing.T) {
	const limit = 1 << 20
	for name, b := range bombs(t) {
		t.Run(name, func(t *testing.T) {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := Decompress(b.codec, b.body, limit)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%v, want ErrTooLarge", err)
			}
			// Allowed: the output up to the limit (with its doublings), plus the
			// decompressors' own windows and block buffers (lz4 blocks up to 4 MiB,
			// a zstd window up to 8 MiB).
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d bytes", allocated)
			if allocated > 16<<20 {
				t.Fatalf("allocated %d bytes refusing a 100 MB bomb with a %d-byte limit", allocated, limit)
			}
		})
	}
}

func TestCodecsAreSafeForConcurrentUse(t *testing.T) {
	want := sampleRecords()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				for _, c := range codecs {
					body, err := Encode(c.codec, want)
					if err != nil {
						t.Error(err)
						return
					}
					got, err := Decode(uint16(c.codec), body, int32(len(want)), 1<<20)
					if err != nil || !reflect.DeepEqual(got, want) {
						t.Errorf("%s: %v", c.name, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func TestOutputOfExactlyTheLimitIsAccepted(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, 100_000)
	for _, c := range codecs {
		got, err := Decompress(c.codec, must(Compress(c.codec, raw)), len(raw))
		if err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%s at the limit: %v", c.name, err)
		}
		if _, err := Decompress(c.codec, must(Compress(c.codec, raw)), len(raw)-1); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s one byte over: %v, want ErrTooLarge", c.name, err)
		}
	}
}

func TestGarbageIsMalformedForEveryCodec(t *testing.T) {
	garbage := []byte("this is not a compressed stream at all")
	for _, c := range codecs[1:] {
		if _, err := Decompress(c.codec, garbage, 1<<20); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", c.name, err)
		}
	}
}

func TestParseRefusesEveryTruncation(t *testing.T) {
	recs := sampleRecords()
	raw := Append(nil, recs)
	for n := range len(raw) {
		got, err := Parse(raw[:n], int32(len(recs)))
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d of %d bytes: %v, %v; want ErrMalformed", n, len(raw), got, err)
		}
	}
}

func TestParseRefusesACountThatDoesNotMatch(t *testing.T) {
	recs := sampleRecords()
	raw := Append(nil, recs)
	for _, count := range []int32{-1, 0, int32(len(recs)) - 1, int32(len(recs)) + 1, 1 << 30} {
		if _, err := Parse(raw, count); !errors.Is(err, ErrMalformed) {
			t.Errorf("count %d for %d records: %v, want ErrMalformed", count, len(recs), err)
		}
	}
	if _, err := Parse(append(raw, 0), int32(len(recs))); !errors.Is(err, ErrMalformed) {
		t.Errorf("a trailing byte: %v, want ErrMalformed", err)
	}
}

func TestParseRefusesLengthsThatLie(t *testing.T) {
	record := func(fields ...[]byte) []byte {
		body := bytes.Join(fields, nil)
		return append(binary.AppendVarint(nil, int64(len(body))), body...)
	}
	v := func(n int64) []byte { return binary.AppendVarint(nil, n) }
	head := []byte{0, 0, 0} // attributes, timestamp delta, offset delta
	for name, raw := range map[string][]byte{
		"key longer than the record":    record(head, v(100), v(-1), v(0)),
		"key length below -1":           record(head, v(-2), v(-1), v(0)),
		"value length below -1":         record(head, v(-1), v(-7), v(0)),
		"negative header count":         record(head, v(-1), v(-1), v(-1)),
		"huge header count":             record(head, v(-1), v(-1), v(1<<30)),
		"null header key":               record(head, v(-1), v(-1), v(1), v(-1), v(-1)),
		"bytes left inside the record":  record(head, v(-1), v(-1), v(0), []byte{9}),
		"record length past the end":    append(v(1000), record(head, v(-1), v(-1), v(0))[1:]...),
		"negative record length":        v(-3),
		"offset delta overflows int32":  record([]byte{0, 0}, v(1<<31), v(-1), v(-1), v(0)),
		"record length of ten 0xff":     bytes.Repeat([]byte{0xff}, 10),
		"record without any attributes": v(0),
	} {
		if _, err := Parse(raw, 1); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestParseAliasesItsInput(t *testing.T) {
	raw := Append(nil, []Record{{Key: []byte("key"), Value: []byte("value")}})
	recs, err := Parse(raw, 1)
	if err != nil {
		t.Fatal(err)
	}
	recs[0].Value[0] = 'V'
	if !bytes.Contains(raw, []byte("Value")) {
		t.Fatal("Value does not alias raw")
	}
	// A value cannot be appended into the bytes of the next field.
	if cap(recs[0].Key) != len(recs[0].Key) {
		t.Fatalf("key has spare capacity %d into raw", cap(recs[0].Key)-len(recs[0].Key))
	}
}

func TestNullKeyFindsAKeylessRecordInACompressedBatch(t *testing.T) {
	keyed := []Record{{OffsetDelta: 0, Key: []byte("a"), Value: []byte("1")}, {OffsetDelta: 1, Key: []byte{}, Value: nil}}
	keyless := append(append([]Record{}, keyed...), Record{OffsetDelta: 2, Key: nil, Value: []byte("x")})
	for _, c := range codecs {
		for name, tc := range map[string]struct {
			recs []Record
			want bool
		}{"all keyed": {keyed, false}, "one keyless": {keyless, true}} {
			body := must(Encode(c.codec, tc.recs))
			got, err := NullKey(uint16(c.codec), body, int32(len(tc.recs)), 1<<20)
			if err != nil || got != tc.want {
				t.Errorf("%s, %s: %v, %v; want %v", c.name, name, got, err, tc.want)
			}
		}
	}
}

func TestNullKeyRefusesAMalformedSection(t *testing.T) {
	raw := Append(nil, []Record{{Key: nil, Value: []byte("x")}})
	if _, err := NullKey(0, append(raw, 1), 1, 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%v, want ErrMalformed", err)
	}
	if _, err := NullKey(1, raw, 1, 1<<20); !errors.Is(err, ErrMalformed) {
		t.Fatalf("uncompressed bytes labelled gzip: %v, want ErrMalformed", err)
	}
}

func TestNullKeyDoesNotAllocatePerRecord(t *testing.T) {
	recs := make([]Record, 1000)
	for i := range recs {
		recs[i] = Record{OffsetDelta: int32(i), Key: []byte("k"), Headers: []Header{{Key: "h", Value: []byte("v")}}}
	}
	raw := Append(nil, recs)
	allocs := testing.AllocsPerRun(10, func() {
		if _, err := NullKey(0, raw, int32(len(recs)), 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Fatalf("%v allocations walking 1000 records", allocs)
	}
}

// TestRecordsMatchFranzGoEncoding cross-checks the record format with a real client's
// codec: records kmsg encodes parse here, and records encoded here parse in kmsg.
func TestRecordsMatchFranzGoEncoding(t *testing.T) {
	recs := sampleRecords()
	var theirs []byte
	for _, r := range recs {
		kr := kmsg.Record{Attributes: r.Attributes, TimestampDelta64: r.TimestampDelta, OffsetDelta: r.OffsetDelta, Key: r.Key, Value: r.Value}
		for _, h := range r.Headers {
			kr.Headers = append(kr.Headers, kmsg.Header{Key: h.Key, Value: h.Value})
		}
		kr.Length = int32(len(kr.AppendTo(nil)) - 1) // less the one-byte varint of Length 0
		theirs = kr.AppendTo(theirs)
	}
	ours := Append(nil, recs)
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("encodings differ:\nours   % x\ntheirs % x", ours, theirs)
	}
	got, err := Parse(theirs, int32(len(recs)))
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("parsing kmsg's encoding: %v, %v", got, err)
	}
	for i, rest := 0, ours; len(rest) > 0; i++ {
		length, n := binary.Varint(rest)
		var kr kmsg.Record
		if err := kr.ReadFrom(rest[:n+int(length)]); err != nil {
			t.Fatalf("kmsg reading record %d: %v", i, err)
		}
		if kr.TimestampDelta64 != recs[i].TimestampDelta || kr.OffsetDelta != recs[i].OffsetDelta ||
			!equalNullable(kr.Key, recs[i].Key) || !equalNullable(kr.Value, recs[i].Value) || len(kr.Headers) != len(recs[i].Headers) {
			t.Fatalf("kmsg read record %d as %+v, want %+v", i, kr, recs[i])
		}
		rest = rest[n+int(length):]
	}
}

func equalNullable(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// TestCompressionMatchesFranzGo cross-checks every codec with franz-go's own compressor and
// decompressor (whose snappy writes raw blocks, not xerial frames).
func TestCompressionMatchesFranzGo(t *testing.T) {
	raw := Append(nil, sampleRecords())
	dec := kgo.DefaultDecompressor()
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
		typ   kgo.CompressionCodecType
	}{
		{"gzip", kgo.GzipCompression(), kgo.CodecGzip},
		{"snappy", kgo.SnappyCompression(), kgo.CodecSnappy},
		{"lz4", kgo.Lz4Compression(), kgo.CodecLz4},
		{"zstd", kgo.ZstdCompression(), kgo.CodecZstd},
	} {
		t.Run(c.name, func(t *testing.T) {
			comp, err := kgo.DefaultCompressor(c.codec)
			if err != nil {
				t.Fatal(err)
			}
			theirs, used := comp.Compress(new(bytes.Buffer), raw)
			if used != c.typ {
				t.Fatalf("franz-go compressed with %v", used)
			}
			got, err := Decompress(int(c.typ), bytes.Clone(theirs), 1<<20)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("decompressing franz-go's %s: %v", c.name, err)
			}
			ours := must(Compress(int(c.typ), raw))
			got, err = dec.Decompress(ours, c.typ)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("franz-go decompressing our %s: %v", c.name, err)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, c := range codecs {
		f.Add(uint16(c.codec), must(Encode(c.codec, sampleRecords())), int32(len(sampleRecords())))
		f.Add(uint16(c.codec), must(Encode(c.codec, sampleRecords()[:1])), int32(1))
	}
	f.Add(uint16(2), snappy.Encode(nil, Append(nil, sampleRecords())), int32(len(sampleRecords())))
	f.Fuzz(func(t *testing.T, attributes uint16, body []byte, count int32) {
		recs, err := Decode(attributes, body, count, 1<<20)
		null, nullErr := NullKey(attributes, body, count, 1<<20)
		if (err == nil) != (nullErr == nil) {
			t.Fatalf("Decode says %v, NullKey says %v", err, nullErr)
		}
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) && !errors.Is(err, ErrUnsupportedCodec) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		anyNull := false
		for _, r := range recs {
			anyNull = anyNull || r.Key == nil
		}
		if null != anyNull {
			t.Fatalf("NullKey %v, records say %v", null, anyNull)
		}
		again, err := Parse(Append(nil, recs), count)
		if err != nil {
			t.Fatalf("re-parsing what Parse accepted: %v", err)
		}
		if !reflect.DeepEqual(again, recs) {
			t.Fatalf("Parse∘Append does not round-trip:\n got %+v\nwant %+v", again, recs)
		}
		for _, c := range codecs {
			back, err := Decode(uint16(c.codec), must(Encode(c.codec, recs)), count, 1<<20+1<<16)
			if err != nil || !reflect.DeepEqual(back, recs) {
				t.Fatalf("re-encoding with %s: %v", c.name, fmt.Sprint(err))
			}
		}
	})
}
