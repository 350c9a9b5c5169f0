package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock/broker/storage/records"
)

var compactionSeed = flag.Uint64("compaction.seed", 0, "run the compaction property test with this seed only")

// kv is a test record: a nil key is keyless, a nil value a tombstone.
type kv struct{ key, value []byte }

// keyedBatch builds a batch of recs as a producer sends it: producer pid (−1 none) at epoch
// with first sequence seq, transactional when txn, compressed with codec.
// t may be nil (a child process of a crash test): an encoding error then panics.
func keyedBatch(t testing.TB, recs []kv, pid int64, epoch int16, seq int32, txn bool, codec int, ts int64) []byte {
	rs := make([]records.Record, len(recs))
	for i, r := range recs {
		rs[i] = records.Record{TimestampDelta: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
	}
	body, err := records.Encode(codec, rs)
	if err != nil && t == nil {
		panic(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	attrs := uint16(codec)
	if txn {
		attrs |= attrTransactional
	}
	be := binary.BigEndian
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(body))
	be.PutUint32(b[offLength:], uint32(batchHeaderSize-batchLogOverhead+len(body)))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = magicV2
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offBaseTimestamp:], uint64(ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(ts+int64(len(recs)-1)))
	be.PutUint64(b[offProducerID:], uint64(pid))
	be.PutUint16(b[offProducerEpoch:], uint16(epoch))
	be.PutUint32(b[offBaseSequence:], uint32(seq))
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	b = append(b, body...)
	be.PutUint32(b[offCRC:], batchCRC(b))
	return b
}

// storedRecord is one record read back from the log.
type storedRecord struct {
	offset     int64
	ts         int64
	key, value []byte
	control    bool
}

// readRecords reads every batch from the log start to the high watermark and decodes its
// records; it checks that offsets only grow.
func readRecords(t testing.TB, l *Log) ([]storedRecord, []batchHeader) {
	t.Helper()
	var out []storedRecord
	var hs []batchHeader
	b := readAll(t, l)
	last := int64(-1)
	for len(b) > 0 {
		h := parseHeader(b)
		if h.BaseOffset <= last {
			t.Fatalf("batch at offset %d after offset %d", h.BaseOffset, last)
		}
		last = h.lastOffset()
		hs = append(hs, h)
		recs, err := records.Decode(uint16(h.Attributes), b[batchHeaderSize:h.size()], h.RecordCount, 64<<20)
		if err != nil {
			t.Fatalf("batch at %d: %v", h.BaseOffset, err)
		}
		prev := int64(-1)
		for _, r := range recs {
			off := h.BaseOffset + int64(r.OffsetDelta)
			if off <= prev || off > h.lastOffset() {
				t.Fatalf("record at offset %d outside or out of order in batch %d..%d", off, h.BaseOffset, h.lastOffset())
			}
			prev = off
			out = append(out, storedRecord{offset: off, ts: h.BaseTimestamp + r.TimestampDelta, key: r.Key, value: r.Value, control: h.Attributes&attrControl != 0})
		}
		b = b[h.size():]
	}
	return out, hs
}

// modelRecord is what the test appended at one offset.
type modelRecord struct {
	kv
	ts      int64
	aborted bool // its transaction was aborted
	txnPID  int64
}

// compactionModel is the log as appended, by offset.
type compactionModel struct {
	recs map[int64]modelRecord
}

// latest is each key's latest record that a cleaner must keep (not aborted), by key.
func (m *compactionModel) latest(below int64) map[string]int64 {
	out := map[string]int64{}
	for off, r := range m.recs {
		if r.key == nil || r.aborted || off >= below {
			continue
		}
		if cur, ok := out[string(r.key)]; !ok || off > cur {
			out[string(r.key)] = off
		}
	}
	return out
}

// check compares the log's records with the model after a pass that cleaned below dirtyTo:
//   - every record read is the one appended at its offset (nothing invented or moved);
//   - below dirtyTo, only each key's latest record is left, never an aborted or keyless one;
//   - no tombstone below goneBelow is left (a pass after its delete horizon cleaned there);
//   - every key's latest record is there (a tombstone only from goneBelow on);
//   - at and after dirtyTo every keyed record of a committed or non-transactional batch is there.
func (m *compactionModel) check(t *testing.T, got []storedRecord, dirtyTo, goneBelow int64, seed uint64) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (replay: -compaction.seed=%d): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	present := map[int64]bool{}
	latestBelow := m.latest(dirtyTo)
	for _, r := range got {
		if r.control {
			continue
		}
		want, ok := m.recs[r.offset]
		if !ok || !bytes.Equal(want.key, r.key) || !bytes.Equal(want.value, r.value) || (want.value == nil) != (r.value == nil) || want.ts != r.ts {
			fail("offset %d reads key %q value %q ts %d; appended %+v", r.offset, r.key, r.value, r.ts, want)
		}
		present[r.offset] = true
		if r.offset < dirtyTo {
			switch {
			case r.key == nil:
				fail("keyless record at offset %d below the cleaned offset %d", r.offset, dirtyTo)
			case want.aborted:
				fail("aborted record at offset %d below the cleaned offset %d", r.offset, dirtyTo)
			case latestBelow[string(r.key)] != r.offset:
				fail("offset %d (key %q) is not its key's latest below %d (that is %d)", r.offset, r.key, dirtyTo, latestBelow[string(r.key)])
			}
		}
		if r.value == nil && r.offset < goneBelow {
			fail("tombstone at offset %d kept past its delete horizon", r.offset)
		}
	}
	for key, off := range m.latest(1 << 62) {
		r := m.recs[off]
		if r.value == nil && off < goneBelow {
			continue
		}
		if !present[off] {
			fail("key %q lost its latest record (offset %d, value %q)", key, off, r.value)
		}
	}
	for off, r := range m.recs {
		if off >= dirtyTo && r.key != nil && !r.aborted && r.txnPID < 0 && !present[off] {
			fail("offset %d (key %q) at or after the cleaned offset %d is missing", off, r.key, dirtyTo)
		}
	}
}

// compactConfig is a compacted topic with small segments, so a few hundred records make many.
func compactConfig() Config {
	cfg := testConfig()
	cfg.Compact, cfg.NoDelete = true, true
	cfg.SegmentBytes = 2048
	cfg.IndexIntervalBytes = 256
	cfg.MinCleanableDirtyRatio = 0
	cfg.DeleteRetentionMs = 60_000
	cfg.SegmentMs = 1000
	return cfg
}

// TestCleanedLogKeepsTheLatestRecordOfEveryKey is the property test: for random sequences of
// keyed records, keyless ones, tombstones, committed and aborted transactions, from plain,
// idempotent and transactional producers, compressed or not, each cleaning pass leaves
// exactly what the model says (compactionModel.check), takeovers in between — clean, crashed,
// or with every producer snapshot gone so recovery reads the cleaned segments from the log
// start — read the same log, and the idempotent producer goes on without OUT_OF_ORDER.
func TestCleanedLogKeepsTheLatestRecordOfEveryKey(t *testing.T) {
	seeds := 16
	if testing.Short() || raceEnabled {
		seeds = 6
	}
	var list []uint64
	if *compactionSeed != 0 {
		list = []uint64{*compactionSeed}
	} else {
		base := rand.Uint64()
		for i := range seeds {
			list = append(list, base+uint64(i))
		}
	}
	for _, seed := range list {
		runCompactionProperty(t, seed)
	}
}

func runCompactionProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	clock := newFakeClock()
	dir := partitionDir(t)
	cfg := compactConfig()
	opts := Options{Now: clock.now, Cleaner: NewCleaner(CleanerConfig{DedupeBufferBytes: int64(24 * (20 + rng.IntN(200)))})}
	epoch := int32(1)
	l := openLog(t, dir, epoch, cfg, opts)
	m := &compactionModel{recs: map[int64]modelRecord{}}
	const idemPID, txnPID = 7, 9
	idemSeq, txnSeq := int32(0), int32(0)
	txnOpen := false
	var txnOffsets []int64
	var lastIdem []byte
	keys := 3 + rng.IntN(20)
	nextValue := 0
	randomRecords := func() []kv {
		n := 1 + rng.IntN(4)
		recs := make([]kv, n)
		for i := range recs {
			nextValue++
			var k, v []byte
			if rng.IntN(20) != 0 {
				k = []byte(fmt.Sprintf("k%d", rng.IntN(keys)))
			}
			if rng.IntN(8) != 0 {
				v = []byte(fmt.Sprintf("v%d-%s", nextValue, strings.Repeat("x", rng.IntN(40))))
			}
			recs[i] = kv{k, v}
		}
		return recs
	}
	appendBatch := func(recs []kv, pid int64, pepoch int16, seq int32, txn bool) {
		codec := []int{0, 0, 1, 2, 3, 4}[rng.IntN(6)]
		ts := clock.ms.Load()
		b := keyedBatch(t, recs, pid, pepoch, seq, txn, codec, ts)
		if pid == idemPID {
			lastIdem = bytes.Clone(b)
		}
		res := mustAppend(t, l, b, AcksLeader) // durability is not what this test is about
		for i, r := range recs {
			off := res.BaseOffset + int64(i)
			mr := modelRecord{kv: r, ts: ts + int64(i), txnPID: -1}
			if txn {
				mr.txnPID = pid
				txnOffsets = append(txnOffsets, off)
			}
			m.recs[off] = mr
		}
	}
	endTxn := func(commit bool) {
		if _, err := l.AppendMarker(context.Background(), Marker{ProducerID: txnPID, ProducerEpoch: 0, Commit: commit, TimestampMs: clock.ms.Load()}, AcksAll); err != nil {
			t.Fatalf("seed %d: marker: %v", seed, err)
		}
		for _, off := range txnOffsets {
			r := m.recs[off]
			r.aborted = !commit
			r.txnPID = -1 // decided: readable, kept or dropped as any record
			m.recs[off] = r
		}
		txnOffsets, txnOpen = nil, false
	}
	goneBelow := int64(0)
	rounds := 4 + rng.IntN(5)
	for round := range rounds {
		for range 20 + rng.IntN(60) {
			clock.ms.Add(int64(rng.IntN(5)))
			switch x := rng.IntN(10); {
			case x < 4:
				appendBatch(randomRecords(), -1, -1, -1, false)
			case x < 7:
				recs := randomRecords()
				appendBatch(recs, idemPID, 0, idemSeq, false)
				idemSeq += int32(len(recs))
			case x < 9 || txnOpen:
				txnOpen = true
				recs := randomRecords()
				appendBatch(recs, txnPID, 0, txnSeq, true)
				txnSeq += int32(len(recs))
				if rng.IntN(3) == 0 {
					endTxn(rng.IntN(2) == 0)
				}
			default:
				if txnOpen {
					endTxn(rng.IntN(2) == 0)
				}
			}
		}
		if txnOpen && rng.IntN(2) == 0 {
			endTxn(rng.IntN(2) == 0)
		}
		// A roll, so the last records are cleanable too.
		clock.ms.Add(int64(cfg.SegmentMs))
		appendBatch([]kv{{key: []byte("roll"), value: []byte(fmt.Sprint(round))}}, -1, -1, -1, false)
		expiry := rng.IntN(4) == 0
		if expiry {
			// Past every delete horizon: the next pass stamps none, the one after drops
			// the tombstones and the aborted transactions' markers.
			clock.ms.Add(int64(cfg.DeleteRetentionMs + 1))
			waitDurable(t, l)
			cleanAll(t, l, seed)
			clock.ms.Add(int64(cfg.DeleteRetentionMs + 1))
		}
		waitDurable(t, l)
		dirtyTo := cleanAll(t, l, seed)
		if expiry {
			goneBelow = dirtyTo
		}
		got, _ := readRecords(t, l)
		m.check(t, got, dirtyTo, goneBelow, seed)
		// A new leader reads the same log: relinquished, crashed, or with no snapshot left.
		before := readAll(t, l)
		switch rng.IntN(3) {
		case 0:
			relinquish(t, l)
		case 1:
			crash(t, l)
		default:
			relinquish(t, l)
			removeSnapshots(t, dir)
		}
		epoch++
		l = openLog(t, dir, epoch, cfg, opts)
		if after := readAll(t, l); !bytes.Equal(before, after) {
			t.Fatalf("seed %d: the log reads differently after the takeover at epoch %d", seed, epoch)
		}
		if lastIdem != nil {
			// The producer's retry is recognised, its next batch accepted: its state
			// survived the cleaning (its last batch was kept, emptied if need be).
			res, err := l.Append(context.Background(), bytes.Clone(lastIdem), AcksAll)
			if err != nil || !res.Duplicate {
				t.Fatalf("seed %d: the idempotent producer's retry after cleaning: %+v, %v", seed, res, err)
			}
		}
	}
	if len(m.recs) == 0 {
		t.Fatal("the test appended nothing")
	}
}

// cleanAll runs passes until one cleans nothing more and returns the cleaned offset.
func cleanAll(t *testing.T, l *Log, seed uint64) int64 {
	t.Helper()
	for range 100 {
		res, err := l.Clean(context.Background())
		if err != nil {
			t.Fatalf("seed %d: clean: %v", seed, err)
		}
		if !res.Cleaned {
			st, _ := l.CompactionStats()
			return st.DirtyFrom
		}
	}
	t.Fatalf("seed %d: a hundred passes and still dirty", seed)
	return 0
}

func removeSnapshots(t testing.TB, dir string) {
	t.Helper()
	names, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n.Name(), snapshotSuffix) {
			if err := os.Remove(filepath.Join(dir, n.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestADeposedLeadersCleanerNeverChangesWhatTheNewLeaderReads: the leader at epoch 4 cleans,
// the leader at epoch 5 claims while epoch 4 still runs, epoch 4 cleans again — its swap is
// recorded after the claim, fails its fence check and removes nothing — and both epoch 5
// and a later epoch 6 read the log epoch 5 took over, byte for byte, every key's latest
// record included.
func TestADeposedLeadersCleanerNeverChangesWhatTheNewLeaderReads(t *testing.T) {
	dir := partitionDir(t)
	cfg := compactConfig()
	clock := newFakeClock()
	opts := Options{Now: clock.now}
	l4 := openLog(t, dir, 4, cfg, opts)
	for i := range 200 {
		mustAppend(t, l4, keyedBatch(t, []kv{{[]byte(fmt.Sprint("k", i%7)), []byte(fmt.Sprint("v", i))}}, -1, -1, -1, false, 0, clock.ms.Load()), AcksAll)
		clock.ms.Add(1)
	}
	if res, err := l4.Clean(context.Background()); err != nil || !res.Cleaned {
		t.Fatalf("first clean at epoch 4: %+v, %v", res, err)
	}
	for i := 200; i < 400; i++ {
		mustAppend(t, l4, keyedBatch(t, []kv{{[]byte(fmt.Sprint("k", i%7)), []byte(fmt.Sprint("v", i))}}, -1, -1, -1, false, 0, clock.ms.Load()), AcksAll)
		clock.ms.Add(1)
	}
	l5 := openLog(t, dir, 5, cfg, opts)
	want := readAll(t, l5)
	res, err := l4.Clean(context.Background())
	if !errors.Is(err, ErrFenced) || res.Cleaned {
		t.Fatalf("the deposed leader's clean: %+v, %v; want fenced", res, err)
	}
	if got := readAll(t, l5); !bytes.Equal(got, want) {
		t.Fatal("the new leader reads differently after the deposed leader's clean")
	}
	relinquish(t, l5)
	l6 := openLog(t, dir, 6, cfg, opts)
	if got := readAll(t, l6); !bytes.Equal(got, want) {
		t.Fatal("a later leader reads differently from the one the deposed cleaner raced")
	}
	got, _ := readRecords(t, l6)
	latest := map[string]string{}
	for _, r := range got {
		latest[string(r.key)] = string(r.value)
	}
	for k := range 7 {
		// The last value of key k is v<i> for the largest i < 400 with i%7 == k.
		i := 399 - (399-k)%7
		if latest[fmt.Sprint("k", k)] != fmt.Sprint("v", i) {
			t.Fatalf("key k%d reads %q, want v%d", k, latest[fmt.Sprint("k", k)], i)
		}
	}
}

// TestCleaningNeverTouchesTheActiveSegmentOrUndecidedTransactions: with an open transaction
// the cleaner stops at its first offset, and it never rewrites the active segment.
func TestCleaningNeverTouchesTheActiveSegmentOrUndecidedTransactions(t *testing.T) {
	dir := partitionDir(t)
	cfg := compactConfig()
	clock := newFakeClock()
	l := openLog(t, dir, 1, cfg, Options{Now: clock.now})
	for i := range 50 {
		mustAppend(t, l, keyedBatch(t, []kv{{[]byte("k"), []byte(fmt.Sprint("v", i))}}, -1, -1, -1, false, 0, clock.ms.Load()), AcksAll)
	}
	open := mustAppend(t, l, keyedBatch(t, []kv{{[]byte("k"), []byte("in a transaction")}}, 9, 0, 0, true, 0, clock.ms.Load()), AcksAll)
	for i := range 50 {
		mustAppend(t, l, keyedBatch(t, []kv{{[]byte("k"), []byte(fmt.Sprint("w", i))}}, -1, -1, -1, false, 0, clock.ms.Load()), AcksAll)
	}
	if _, err := l.Clean(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, _ := l.CompactionStats()
	if st.DirtyFrom > open.BaseOffset {
		t.Fatalf("cleaned up to %d, past the open transaction at %d", st.DirtyFrom, open.BaseOffset)
	}
	got, _ := readRecords(t, l)
	l.mu.Lock()
	activeBase := l.activeIdx.base
	l.mu.Unlock()
	if activeBase <= open.BaseOffset {
		t.Fatalf("the active segment starts at %d: the test needs closed segments after the transaction at %d", activeBase, open.BaseOffset)
	}
	n := 0
	for _, r := range got {
		if r.offset >= open.BaseOffset {
			n++
		}
	}
	if n != 51 {
		t.Fatalf("%d records at or after the open transaction, want all 51", n)
	}
	if !slices.ContainsFunc(got, func(r storedRecord) bool { return r.offset < open.BaseOffset }) {
		t.Fatal("the latest record before the transaction is gone")
	}
}

// TestLookupsAnswerOverTheCleanersGaps: after a pass removed most offsets, a timestamp lookup
// answers the first surviving record at or after the timestamp, a read at a removed offset
// returns the next surviving batch, OffsetForLeaderEpoch answers as before the pass, and the
// log start has not moved.
func TestLookupsAnswerOverTheCleanersGaps(t *testing.T) {
	dir := partitionDir(t)
	cfg := compactConfig()
	clock := newFakeClock()
	l := openLog(t, dir, 3, cfg, Options{Now: clock.now})
	base := clock.ms.Load()
	for i := range 300 {
		// Key k0 is rewritten every time but every 50th record has a key of its own.
		key := "k0"
		if i%50 == 0 {
			key = fmt.Sprint("unique", i)
		}
		mustAppend(t, l, keyedBatch(t, []kv{{[]byte(key), []byte(fmt.Sprint("v", i))}}, -1, -1, -1, false, 0, base+int64(i)), AcksAll)
	}
	before, err := l.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	epochBefore, endBefore, err := l.EpochEndOffset(3)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := l.Clean(context.Background()); err != nil || !res.Cleaned {
		t.Fatalf("clean: %+v, %v", res, err)
	}
	after, err := l.Offsets()
	if err != nil || after.LogStart != before.LogStart {
		t.Fatalf("offsets after the pass: %+v (before %+v), %v", after, before, err)
	}
	if st, _ := l.CompactionStats(); st.DirtyFrom <= 100 {
		t.Fatalf("cleaned only below %d: the test needs offset 100 cleaned", st.DirtyFrom)
	}
	// Offset 60 held k0, superseded; the next survivor at or after it is unique100's record.
	res, err := l.Read(60, 1<<20, true)
	if err != nil || len(res.Records) == 0 {
		t.Fatalf("read at a removed offset: %v, %d bytes", err, len(res.Records))
	}
	if first := parseHeader(res.Records); first.BaseOffset != 100 {
		t.Fatalf("read at 60 starts with the batch at %d..%d", first.BaseOffset, first.lastOffset())
	}
	got, ok, err := l.OffsetForTimestamp(base + 60)
	if err != nil || !ok {
		t.Fatalf("timestamp lookup: %v, %v", ok, err)
	}
	if got.Offset != 100 || got.Timestamp != base+100 {
		t.Fatalf("timestamp lookup for the record at 60 (removed) answered %+v, want offset 100", got)
	}
	if e, end, err := l.EpochEndOffset(3); err != nil || e != epochBefore || end != endBefore {
		t.Fatalf("OffsetForLeaderEpoch after the pass: %d, %d, %v; before %d, %d", e, end, err, epochBefore, endBefore)
	}
}

// TestTheOffsetMapKeepsEachKeysLatestOffsetAndNeverFillsPastItsLimit pins the map's rules.
func TestTheOffsetMapKeepsEachKeysLatestOffsetAndNeverFillsPastItsLimit(t *testing.T) {
	m := newOffsetMap(24 * 100)
	if m.capacity() != 100 || m.room() != 90 {
		t.Fatalf("capacity %d, room %d; want 100 slots, 90 usable", m.capacity(), m.room())
	}
	for i := range 90 {
		m.put([]byte(fmt.Sprint("key", i)), int64(i))
		m.put([]byte(fmt.Sprint("key", i)), int64(1000+i))
	}
	if m.room() != 0 {
		t.Fatalf("room %d after 90 keys", m.room())
	}
	for i := range 90 {
		if off, ok := m.get([]byte(fmt.Sprint("key", i))); !ok || off != int64(1000+i) {
			t.Fatalf("key%d: %d, %v", i, off, ok)
		}
	}
	if _, ok := m.get([]byte("absent")); ok {
		t.Fatal("an absent key was found")
	}
	if off, ok := m.get([]byte("key0")); !ok || off != 1000 {
		t.Fatal("offset 0 must be storable (slots store offset+1)")
	}
	m.reset()
	if _, ok := m.get([]byte("key1")); ok || m.room() != 90 {
		t.Fatal("reset left entries")
	}
	if tiny := newOffsetMap(1); tiny.capacity() != 2 || tiny.room() != 1 {
		t.Fatalf("a tiny buffer: capacity %d, room %d; want 2 and 1 (one slot always empty)", tiny.capacity(), tiny.room())
	}
}

// TestAPassThatCannotMapOneBatchIsRefusedAndChangesNothing: a map smaller than a batch's
// record count is ErrOffsetMapTooSmall, and the log reads as before.
func TestAPassThatCannotMapOneBatchIsRefusedAndChangesNothing(t *testing.T) {
	dir := partitionDir(t)
	clock := newFakeClock()
	l := openLog(t, dir, 1, compactConfig(), Options{Now: clock.now, Cleaner: NewCleaner(CleanerConfig{DedupeBufferBytes: 24 * 4})})
	recs := make([]kv, 10)
	for i := range recs {
		recs[i] = kv{[]byte(fmt.Sprint("k", i)), []byte("v")}
	}
	for range 40 {
		mustAppend(t, l, keyedBatch(t, recs, -1, -1, -1, false, 0, clock.ms.Load()), AcksAll)
	}
	want := readAll(t, l)
	if _, err := l.Clean(context.Background()); !errors.Is(err, ErrOffsetMapTooSmall) {
		t.Fatalf("clean with a 3-key map of 10-record batches: %v, want ErrOffsetMapTooSmall", err)
	}
	if got := readAll(t, l); !bytes.Equal(got, want) {
		t.Fatal("a refused pass changed the log")
	}
	if l.opts.Cleaner.Uncleanable(l) == nil {
		t.Fatal("the cleaner does not report the log as uncleanable")
	}
}
