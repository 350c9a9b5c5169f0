package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// batchSpec describes a test record batch.
type batchSpec struct {
	records   int
	valueSize int
	seed      byte  // fills values, so batches differ
	baseTs    int64 // first record's timestamp; records step by tsStep
	tsStep    int64
	pid       int64 // -1 for non-idempotent
	pepoch    int16
	seq       int32
	codec     int16 // attribute codec bits (the records are not really compressed)
	// keySeed, when not zero, gives record i the 8-byte key keySeed+i (unique in practice
	// for random seeds: a compacted log's cleaner then removes nothing); else keys are null.
	keySeed uint64
}

func plain(records int, seed byte) batchSpec {
	return batchSpec{records: records, valueSize: 16, seed: seed, baseTs: testNow, tsStep: 1, pid: -1, pepoch: -1, seq: -1}
}

func idem(pid int64, epoch int16, seq int32, records int) batchSpec {
	s := plain(records, byte(seq))
	s.pid, s.pepoch, s.seq = pid, epoch, seq
	return s
}

// testNow is the record timestamp test batches carry: recent, so producer state does not
// expire (producer.id.expiration.ms is judged by batch timestamps).
var testNow = time.Now().UnixMilli()

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// makeBatch builds a valid record batch v2 as a producer sends it (base offset 0, leader
// epoch -1), with real uncompressed records.
func makeBatch(s batchSpec) []byte {
	if s.records == 0 {
		s.records = 1
	}
	var recs []byte
	maxTs := s.baseTs
	for i := 0; i < s.records; i++ {
		ts := s.baseTs + int64(i)*s.tsStep
		maxTs = max(maxTs, ts)
		var r []byte
		r = append(r, 0)                 // attributes
		r = appendVarint(r, ts-s.baseTs) // timestamp delta
		r = appendVarint(r, int64(i))    // offset delta
		if s.keySeed != 0 {
			r = appendVarint(r, 8)
			r = binary.BigEndian.AppendUint64(r, s.keySeed+uint64(i))
		} else {
			r = appendVarint(r, -1) // null key
		}
		r = appendVarint(r, int64(s.valueSize))
		for j := 0; j < s.valueSize; j++ {
			r = append(r, s.seed+byte(i)+byte(j))
		}
		r = appendVarint(r, 0) // no headers
		recs = appendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	be := binary.BigEndian
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-batchLogOverhead+len(recs)))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = magicV2
	be.PutUint16(b[offAttributes:], uint16(s.codec))
	be.PutUint32(b[offLastOffsetDelta:], uint32(s.records-1))
	be.PutUint64(b[offBaseTimestamp:], uint64(s.baseTs))
	be.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	be.PutUint64(b[offProducerID:], uint64(s.pid))
	be.PutUint16(b[offProducerEpoch:], uint16(s.pepoch))
	be.PutUint32(b[offBaseSequence:], uint32(s.seq))
	be.PutUint32(b[offRecordCount:], uint32(s.records))
	b = append(b, recs...)
	be.PutUint32(b[offCRC:], batchCRC(b))
	return b
}

// stored is how batch b looks in the log at base offset with leader epoch.
func stored(b []byte, base int64, epoch int32) []byte {
	c := bytes.Clone(b)
	binary.BigEndian.PutUint64(c[0:], uint64(base))
	binary.BigEndian.PutUint32(c[offLeaderEpoch:], uint32(epoch))
	return c
}

func testConfig() Config {
	c := DefaultConfig()
	c.RetentionMs = -1
	return c
}

// openLog opens and takes over the partition in dir at epoch.
func openLog(t testing.TB, dir string, epoch int32, cfg Config, opts Options) *Log {
	t.Helper()
	l, err := Open(dir, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Takeover(context.Background(), epoch); err != nil {
		t.Fatalf("takeover at %d: %v", epoch, err)
	}
	t.Cleanup(func() { _ = l.Relinquish(context.Background()) })
	return l
}

func mustAppend(t testing.TB, l *Log, b []byte, acks Acks) AppendResult {
	t.Helper()
	res, err := l.Append(context.Background(), b, acks)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return res
}

func relinquish(t testing.TB, l *Log) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.Relinquish(ctx); err != nil {
		t.Fatal(err)
	}
}

// crash stops l as a killed process would: no final fsync round, no checkpoint. (The bytes it
// wrote stay in the page cache, as they do when a process is SIGKILLed.)
func crash(t testing.TB, l *Log) {
	t.Helper()
	l.fail(ErrNotLeader)
	<-l.stopped
}

// readAll reads every batch from the log start to the high watermark.
func readAll(t testing.TB, l *Log) []byte {
	t.Helper()
	off, err := l.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for o := off.LogStart; o < off.HighWatermark; {
		res, err := l.Read(o, 1<<20, true)
		if err != nil {
			t.Fatalf("read at %d: %v", o, err)
		}
		if len(res.Records) == 0 {
			t.Fatalf("read at %d returned nothing below the high watermark %d", o, off.HighWatermark)
		}
		out = append(out, res.Records...)
		for _, h := range headersOf(t, res.Records) {
			o = h.nextOffset()
		}
	}
	return out
}

// headersOf splits stored batches and returns their headers.
func headersOf(t testing.TB, b []byte) []batchHeader {
	t.Helper()
	var hs []batchHeader
	for len(b) > 0 {
		if len(b) < batchHeaderSize {
			t.Fatalf("%d trailing bytes", len(b))
		}
		h := parseHeader(b)
		if h.size() > int64(len(b)) {
			t.Fatalf("batch of %d bytes, %d left", h.size(), len(b))
		}
		if batchCRC(b[:h.size()]) != h.CRC {
			t.Fatalf("batch at offset %d fails its CRC", h.BaseOffset)
		}
		hs = append(hs, h)
		b = b[h.size():]
	}
	return hs
}

// batchesByOffset maps each batch's base offset to its bytes.
func batchesByOffset(t testing.TB, b []byte) map[int64][]byte {
	t.Helper()
	m := map[int64][]byte{}
	for _, h := range headersOf(t, b) {
		m[h.BaseOffset] = b[:h.size()]
		b = b[h.size():]
	}
	return m
}

func partitionDir(t testing.TB) string {
	t.Helper()
	return PartitionDir(t.TempDir(), "cluster", "orders", [16]byte{1, 2, 3}, 0)
}

func isErr(err, target error) bool { return errors.Is(err, target) }

var _ = filepath.Join

// waitDurable waits until the high watermark reaches the log end.
func waitDurable(t testing.TB, l *Log) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		hw, moved := l.HighWatermark()
		off, err := l.Offsets()
		if err != nil {
			t.Fatal(err)
		}
		if hw == off.LogEnd {
			return
		}
		select {
		case <-moved:
		case <-deadline:
			t.Fatalf("high watermark stuck at %d below the log end %d", hw, off.LogEnd)
		}
	}
}
