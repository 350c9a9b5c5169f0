package storage

import (
	"bytes"
	"testing"
)

// A section holds exactly the batches Read copies, for every offset and size, so a Fetch that
// sends a section from the file sends what it would have copied.
func TestSectionHoldsTheBatchesReadCopies(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 8 << 10 // several segments: closed ones and the active one
	l := openLog(t, partitionDir(t), 1, cfg, Options{})
	for i := range 40 {
		s := plain(1+i%5, byte(i))
		s.valueSize = 64 * (1 + i%7)
		s.codec = int16(i % 5)
		mustAppend(t, l, makeBatch(s), AcksAll)
	}
	o, err := l.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	for offset := o.LogStart; offset < o.HighWatermark; offset += 3 {
		for _, maxBytes := range []int{0, 100, 1000, 5000, 1 << 20} {
			for _, atLeastOne := range []bool{false, true} {
				want, err := l.Read(offset, maxBytes, atLeastOne)
				if err != nil {
					t.Fatal(err)
				}
				_, sec, err := l.ReadSection(offset, maxBytes, atLeastOne)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]byte, sec.Len)
				if sec.Len > 0 {
					if _, err := sec.ReadAt(got, 0); err != nil {
						t.Fatal(err)
					}
					if sec.File() == nil {
						t.Fatal("a section of the OS file system has no *os.File")
					}
				}
				for c := range 5 {
					if sec.HasCodec(c) != hasCodec(t, want.Records, c) {
						t.Fatalf("offset %d, maxBytes %d: HasCodec(%d) = %v, the copied batches say otherwise", offset, maxBytes, c, sec.HasCodec(c))
					}
				}
				sec.Release()
				sec.Release() // twice is safe
				if !bytes.Equal(got, want.Records) {
					t.Fatalf("offset %d, maxBytes %d, atLeastOne %v: section holds %d bytes, Read copied %d", offset, maxBytes, atLeastOne, len(got), len(want.Records))
				}
			}
		}
	}
}

func hasCodec(t *testing.T, b []byte, c int) bool {
	for _, h := range headersOf(t, b) {
		if int(h.Attributes&attrCodecMask) == c {
			return true
		}
	}
	return false
}
