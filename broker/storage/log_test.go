package storage

import (
	"bytes"
	"context"
	"testing"
)

func TestAppendThenReadReturnsTheStoredBatches(t *testing.T) {
	dir := partitionDir(t)
	l := openLog(t, dir, 1, testConfig(), Options{})
	var want []byte
	for i := range 10 {
		b := makeBatch(plain(3, byte(i)))
		res := mustAppend(t, l, b, AcksAll)
		if res.BaseOffset != int64(i*3) || res.LastOffset != int64(i*3+2) {
			t.Fatalf("batch %d got offsets %d..%d", i, res.BaseOffset, res.LastOffset)
		}
		want = append(want, stored(makeBatch(plain(3, byte(i))), int64(i*3), 1)...)
	}
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, want %d", len(got), len(want))
	}
	off, _ := l.Offsets()
	if off != (Offsets{LogStart: 0, HighWatermark: 30, LogEnd: 30}) {
		t.Fatalf("offsets %+v", off)
	}
	relinquish(t, l)
	l2 := openLog(t, dir, 2, testConfig(), Options{})
	if got := readAll(t, l2); !bytes.Equal(got, want) {
		t.Fatalf("after takeover read %d bytes, want %d", len(got), len(want))
	}
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 0)), AcksAll); !isErr(err, ErrNotLeader) {
		t.Fatalf("append to a relinquished log: %v", err)
	}
}
