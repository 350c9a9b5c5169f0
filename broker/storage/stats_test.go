package storage

import (
	"errors"
	"testing"
)

// The size a dashboard shows is the bytes of the batches kept, summed over every segment
// (the rolled ones and the active one), and it agrees with the offsets read at the same time.
func TestStatsCountEverySegmentsBatchBytes(t *testing.T) {
	cfg := testConfig()
	batch := makeBatch(plain(3, 1))
	cfg.SegmentBytes = int64(len(batch)) * 2 // two batches a segment: five make three segments
	l := openLog(t, partitionDir(t), 1, cfg, Options{})
	for i := 0; i < 5; i++ {
		mustAppend(t, l, makeBatch(plain(3, byte(i))), AcksAll)
	}
	s, err := l.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(5 * len(batch)); s.Bytes != want {
		t.Errorf("Bytes = %d, want %d (five batches of %d)", s.Bytes, want, len(batch))
	}
	if s.Segments != 3 {
		t.Errorf("Segments = %d, want 3 (two batches a segment)", s.Segments)
	}
	if s.LogStart != 0 || s.HighWatermark != 15 || s.LogEnd != 15 {
		t.Errorf("offsets = %+v, want start 0, high watermark and end 15", s.Offsets)
	}
}

func TestStatsAnswerOnlyWhileServing(t *testing.T) {
	l, err := Open(partitionDir(t), testConfig(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Stats(); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("Stats before the takeover: %v, want ErrNotLeader", err)
	}
}
