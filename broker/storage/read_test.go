package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestReadReturnsWholeBatchesWithinTheLimitAndAtLeastOneWhenAsked(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	var sizes []int
	for i := range 6 {
		b := makeBatch(plain(3, byte(i)))
		sizes = append(sizes, len(b))
		mustAppend(t, l, b, AcksAll)
	}
	for _, tc := range []struct {
		name       string
		offset     int64
		max        int
		atLeastOne bool
		batches    int
		first      int64
	}{
		{"limit fits two and a half batches", 0, sizes[0]*5/2 + 1, false, 2, 0},
		{"limit fits everything", 0, 1 << 20, false, 6, 0},
		{"limit below the first batch, at least one", 0, 10, true, 1, 0},
		{"limit below the first batch, strict", 0, 10, false, 0, 0},
		{"offset inside a batch returns that batch", 4, 1 << 20, false, 5, 3},
		{"offset of the last batch", 17, 1 << 20, false, 1, 15},
		{"offset at the high watermark reads nothing", 18, 1 << 20, true, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.Read(tc.offset, tc.max, tc.atLeastOne)
			if err != nil {
				t.Fatal(err)
			}
			hs := headersOf(t, r.Records)
			if len(hs) != tc.batches || (len(hs) > 0 && hs[0].BaseOffset != tc.first) {
				t.Fatalf("%d batches from %v, want %d from %d", len(hs), hs, tc.batches, tc.first)
			}
			if r.HighWatermark != 18 || r.LogEndOffset != 18 || r.LogStartOffset != 0 {
				t.Fatalf("offsets %+v", r)
			}
		})
	}
	for _, off := range []int64{-1, 19} {
		if _, err := l.Read(off, 100, true); !isErr(err, ErrOffsetOutOfRange) {
			t.Fatalf("Read(%d): %v, want ErrOffsetOutOfRange", off, err)
		}
	}
}

func TestReadFindsEveryOffsetInClosedSegmentsThroughTheIndex(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 2000
	cfg.IndexIntervalBytes = 100
	l := openLog(t, dir, 1, cfg, Options{})
	for i := range 40 {
		mustAppend(t, l, makeBatch(plain(1+i%3, byte(i))), AcksAll)
	}
	relinquish(t, l)
	for _, rebuild := range []bool{false, true} {
		if rebuild { // indexes are rebuildable: losing them changes no answer
			for _, n := range segmentFiles(t, dir) {
				b, e, _ := parseStem(n, segmentSuffix)
				_ = removeFile(dir, indexName(b, e))
			}
		}
		epoch := int32(2)
		if rebuild {
			epoch = 3
		}
		l2 := openLog(t, dir, epoch, cfg, Options{})
		off, _ := l2.Offsets()
		for o := int64(0); o < off.HighWatermark; o++ {
			r, err := l2.Read(o, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			h := parseHeader(r.Records)
			if h.BaseOffset > o || h.lastOffset() < o {
				t.Fatalf("Read(%d) returned the batch %d..%d", o, h.BaseOffset, h.lastOffset())
			}
		}
		relinquish(t, l2)
	}
}

func removeFile(dir, name string) error { return OSFS{}.Remove(filepath.Join(dir, name)) }

// timestampedLog is a log at epoch 3 of four batches of three records, offsets 3i..3i+2 at
// timestamps 1000(i+1) + 0, 10, 20, in segments of 400 bytes; the last batch is flagged gzip
// (its records are not decoded).
func timestampedLog(t *testing.T) *Log {
	t.Helper()
	clock := newFakeClock()
	cfg := testConfig()
	cfg.SegmentBytes = 400
	l := openLog(t, partitionDir(t), 3, cfg, Options{Now: clock.now})
	for i := range 4 {
		s := plain(3, byte(i))
		s.baseTs, s.tsStep = int64(1000*(i+1)), 10
		if i == 3 {
			s.codec = 1
		}
		mustAppend(t, l, makeBatch(s), AcksAll)
	}
	return l
}

func TestListOffsetsLookups(t *testing.T) {
	l := timestampedLog(t)
	for _, tc := range []struct {
		ts      int64
		ok      bool
		offset  int64
		stamped int64
	}{
		{0, true, 0, 1000},    // before everything: the first record
		{1000, true, 0, 1000}, // exactly the first
		{1005, true, 1, 1010}, // inside an uncompressed batch: the exact record
		{1021, true, 3, 2000}, // between batches (and segments): the next batch's first
		{2020, true, 5, 2020},
		{3500, true, 9, 4000}, // a compressed batch answers with its first record
		{4020, true, 9, 4000}, //   even when that record is older than asked
		{4021, false, 0, 0},   // after every record: none
	} {
		got, ok, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || ok != tc.ok || (ok && (got.Offset != tc.offset || got.Timestamp != tc.stamped || got.LeaderEpoch != 3)) {
			t.Errorf("OffsetForTimestamp(%d) = %+v %v %v, want offset %d timestamp %d", tc.ts, got, ok, err, tc.offset, tc.stamped)
		}
	}
	maxTs, ok, err := l.MaxTimestamp()
	if err != nil || !ok || maxTs.Timestamp != 4020 || maxTs.Offset != 11 || maxTs.LeaderEpoch != 3 {
		t.Errorf("MaxTimestamp = %+v %v %v, want 4020 at the batch's last offset 11", maxTs, ok, err)
	}
}

func TestLogAppendTimeStampsTheBatchAndRecomputesItsCRC(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.LogAppendTime = true
	l := openLog(t, partitionDir(t), 1, cfg, Options{Now: clock.now})
	res := mustAppend(t, l, makeBatch(idem(3, 0, 0, 2)), AcksAll)
	if res.LogAppendTime != clock.ms.Load() {
		t.Fatalf("LogAppendTime %d, want the clock %d", res.LogAppendTime, clock.ms.Load())
	}
	r, _ := l.Read(0, 1<<20, true)
	h := headersOf(t, r.Records)[0] // headersOf checks the CRC
	if h.Attributes&attrLogAppendTime == 0 || h.MaxTimestamp != res.LogAppendTime {
		t.Fatalf("stored batch attributes %x maxTimestamp %d", h.Attributes, h.MaxTimestamp)
	}
	clock.ms.Add(5000)
	dup := mustAppend(t, l, makeBatch(idem(3, 0, 0, 2)), AcksAll)
	if !dup.Duplicate || dup.LogAppendTime != res.LogAppendTime {
		t.Fatalf("a duplicate answers %+v, want the original append time %d", dup, res.LogAppendTime)
	}
	if got, ok, _ := l.OffsetForTimestamp(res.LogAppendTime); !ok || got.Offset != 0 {
		t.Fatalf("timestamp lookup by append time: %+v %v", got, ok)
	}
}

func TestAppendRefusesBadBatchesAndChangesNothing(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 2000
	cfg.SegmentBytes = 1500
	good := func() []byte { return makeBatch(plain(2, 1)) }
	mutate := func(f func(b []byte)) []byte {
		b := good()
		f(b)
		return b
	}
	recrc := func(b []byte) { binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b)) }
	for _, tc := range []struct {
		name  string
		batch []byte
		acks  Acks
		want  error
	}{
		{"shorter than a header", good()[:40], AcksAll, ErrCorruptMessage},
		{"magic 1", mutate(func(b []byte) { b[offMagic] = 1 }), AcksAll, ErrInvalidRecord},
		{"base offset not 0", mutate(func(b []byte) { b[7] = 5 }), AcksAll, ErrInvalidRecord},
		{"CRC mismatch", mutate(func(b []byte) { b[len(b)-1] ^= 1 }), AcksAll, ErrCorruptMessage},
		{"length field disagrees", mutate(func(b []byte) { b[offLength+3]++ }), AcksAll, ErrCorruptMessage},
		{"record count disagrees", mutate(func(b []byte) { b[offRecordCount+3] = 9; recrc(b) }), AcksAll, ErrInvalidRecord},
		{"control bit from a producer", mutate(func(b []byte) { b[offAttributes+1] |= attrControl; recrc(b) }), AcksAll, ErrInvalidRecord},
		{"producer id without a sequence", mutate(func(b []byte) {
			binary.BigEndian.PutUint64(b[offProducerID:], 7)
			recrc(b)
		}), AcksAll, ErrInvalidRecord},
		{"larger than max.message.bytes", makeBatch(batchSpec{records: 1, valueSize: 2100, pid: -1, seq: -1}), AcksAll, ErrMessageTooLarge},
		{"larger than segment.bytes", makeBatch(batchSpec{records: 1, valueSize: 1600, pid: -1, seq: -1}), AcksAll, ErrRecordListTooLarge},
		{"acks=2", good(), 2, ErrInvalidRequiredAcks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := openLog(t, partitionDir(t), 1, cfg, Options{})
			if _, err := l.Append(context.Background(), tc.batch, tc.acks); !isErr(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if off, _ := l.Offsets(); off.LogEnd != 0 {
				t.Fatalf("a refused batch moved the log end to %d", off.LogEnd)
			}
			mustAppend(t, l, good(), AcksAll) // the log still serves
		})
	}
}

// TestStoredBatchesAreRealKafkaBatches decodes what the log stores with franz-go's kmsg: the
// header layout, stamped offsets and epoch, and records all read back as Kafka defines them.
func TestStoredBatchesAreRealKafkaBatches(t *testing.T) {
	cfg := testConfig()
	cfg.LogAppendTime = true
	l := openLog(t, partitionDir(t), 7, cfg, Options{})
	mustAppend(t, l, makeBatch(plain(2, 0)), AcksAll)
	mustAppend(t, l, makeBatch(idem(9, 1, 0, 4)), AcksAll)
	r, _ := l.Read(0, 1<<20, true)
	b := r.Records
	for i, want := range []struct {
		base  int64
		count int32
	}{{0, 2}, {2, 4}} {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatal(err)
		}
		if rb.FirstOffset != want.base || rb.NumRecords != want.count || rb.PartitionLeaderEpoch != 7 || rb.Magic != 2 {
			t.Fatalf("batch %d decodes as %+v", i, rb)
		}
		if rb.Attributes&0x08 == 0 || rb.MaxTimestamp < testNow {
			t.Fatalf("batch %d: LogAppendTime not stamped: attributes %x", i, rb.Attributes)
		}
		if uint32(rb.CRC) != batchCRC(b[:int(rb.Length)+12]) {
			t.Fatalf("batch %d: CRC field does not cover bytes 21..end", i)
		}
		recs := rb.Records
		for n := range int(rb.NumRecords) {
			var rec kmsg.Record
			length, k := binary.Varint(recs)
			if err := rec.ReadFrom(recs[:k+int(length)]); err != nil {
				t.Fatal(err)
			}
			if rec.OffsetDelta != int32(n) {
				t.Fatalf("record %d has offset delta %d", n, rec.OffsetDelta)
			}
			recs = recs[k+int(length):]
		}
		b = b[int(rb.Length)+12:]
	}
	if len(b) != 0 {
		t.Fatalf("%d bytes left after the batches", len(b))
	}
}

func TestClosedSegmentsAreOpenedThroughTheBoundedCache(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 300
	cf := newCountingFS(OSFS{})
	cache := NewFileCache(2)
	l := openLog(t, dir, 1, cfg, Options{FS: cf, Cache: cache})
	var want []byte
	for i := range 20 {
		b := makeBatch(plain(2, byte(i)))
		mustAppend(t, l, b, AcksAll)
		want = append(want, stored(makeBatch(plain(2, byte(i))), int64(2*i), 1)...)
	}
	relinquish(t, l)
	l2 := openLog(t, dir, 2, cfg, Options{FS: cf, Cache: cache})
	if n := cf.openCount(); n != 1 {
		t.Fatalf("after takeover %d files open (%s), want only the active segment", n, cf.openNames())
	}
	if got := readAll(t, l2); !bytes.Equal(got, want) {
		t.Fatal("reads through the cache returned other bytes")
	}
	if n := cf.openCount(); n > 1+2 {
		t.Fatalf("%d files open after reading %d closed segments through a cache of 2: %s", n, len(segmentFiles(t, dir))-1, cf.openNames())
	}
	relinquish(t, l2)
	if n := cf.openCount(); n != 0 {
		t.Fatalf("a relinquished log holds %d files: %s", n, cf.openNames())
	}
}

// TestOffsetForTimestampNeverAnswersBelowTheLogStart: after DeleteRecords moved the log start
// into the middle of a batch, a lookup of a timestamp older than everything answers the first
// record at or after the log start, as Apache does, never a deleted offset.
func TestOffsetForTimestampNeverAnswersBelowTheLogStart(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	s := plain(5, 1)
	s.baseTs, s.tsStep = 1000, 10 // offsets 0..4 at 1000..1040
	mustAppend(t, l, makeBatch(s), AcksAll)
	s.baseTs = 2000 // offsets 5..9 at 2000..2040
	mustAppend(t, l, makeBatch(s), AcksAll)
	if _, err := l.DeleteRecords(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ts, offset, stamped int64
	}{
		{0, 3, 1030},    // older than everything: the log start's record
		{1010, 3, 1030}, // a deleted record's timestamp: the log start's record
		{1035, 4, 1040}, // after the log start: the exact record
		{1500, 5, 2000},
	} {
		got, ok, err := l.OffsetForTimestamp(tc.ts)
		if err != nil || !ok || got.Offset != tc.offset || got.Timestamp != tc.stamped {
			t.Errorf("OffsetForTimestamp(%d) = %+v %v %v, want offset %d at %d", tc.ts, got, ok, err, tc.offset, tc.stamped)
		}
	}
}

// After DeleteRecords moves the log start inside a batch, a timestamp lookup never answers a
// record below it: it takes the first record at or after the log start whose timestamp is at
// least the one asked, in that batch or a later one (Apache's findOffsetByTimestamp with the
// log start as its starting offset).
func TestATimestampLookupNeverAnswersBelowTheLogStart(t *testing.T) {
	l := timestampedLog(t)
	for _, step := range []struct {
		logStart int64
		ts       int64
		offset   int64
		stamped  int64
	}{
		{1, 0, 1, 1010},    // inside the first batch: its next record
		{1, 1000, 1, 1010}, // the record at 1000 is gone
		{2, 1015, 2, 1020},
		{4, 0, 4, 2010},    // inside the second batch (another segment)
		{4, 1005, 4, 2010}, // the first batch is all below: the next batch answers
		{4, 2000, 4, 2010},
		{10, 0, 10, 4000}, // inside the compressed batch: its first record from the log start
		{10, 3500, 10, 4000},
	} {
		low, err := l.DeleteRecords(context.Background(), step.logStart)
		if err != nil || low != step.logStart {
			t.Fatalf("DeleteRecords(%d) = %d %v", step.logStart, low, err)
		}
		got, ok, err := l.OffsetForTimestamp(step.ts)
		if err != nil || !ok || got.Offset != step.offset || got.Timestamp != step.stamped {
			t.Errorf("log start %d: OffsetForTimestamp(%d) = %+v %v %v, want offset %d timestamp %d", step.logStart, step.ts, got, ok, err, step.offset, step.stamped)
		}
	}
	if _, ok, err := l.OffsetForTimestamp(4021); ok || err != nil {
		t.Errorf("after every record: %v %v", ok, err)
	}
}
