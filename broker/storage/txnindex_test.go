package storage

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// abortedIndex is a copy of l's aborted-transaction index.
func abortedIndex(l *Log) []AbortedTxn {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.producers.aborted)
}

// walkIndex is the aborted-transaction index a walk of every batch l serves builds (from
// the log start: equal to the log's own only while nothing was deleted).
func walkIndex(t testing.TB, l *Log) []AbortedTxn {
	t.Helper()
	walk := newProducerState()
	b := readAll(t, l)
	for _, h := range headersOf(t, b) {
		if h.Attributes&attrControl != 0 {
			if err := parseControl(&h, b[batchHeaderSize:h.size()]); err != nil {
				t.Fatal(err)
			}
		}
		if h.idempotent() {
			walk.apply(h)
		}
		b = b[h.size():]
	}
	return walk.aborted
}

func mustReadCommitted(t testing.TB, l *Log, offset int64, maxBytes int) ReadResult {
	t.Helper()
	res, err := l.ReadCommitted(offset, maxBytes, true)
	if err != nil {
		t.Fatalf("read committed at %d: %v", offset, err)
	}
	return res
}

// TestEveryAbortMarkerIsIndexedAndNoCommitIs: an ABORT marker adds {producer, first offset,
// marker offset, LSO after it}; a COMMIT marker adds nothing; an ABORT with nothing open on
// the partition covers its marker alone (Apache's currentTxnFirstOffset.orElse(offset)).
func TestEveryAbortMarkerIsIndexedAndNoCommitIs(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(2, 1)), AcksAll)                                                                  // 0-1
	mustAppend(t, l, makeBatch(txnal(1, 0, 0, 2)), AcksAll)                                                            // 2-3 producer 1 opens
	mustAppend(t, l, makeBatch(txnal(2, 0, 0, 1)), AcksAll)                                                            // 4 producer 2 opens
	mustAppend(t, l, makeBatch(txnal(1, 0, 2, 1)), AcksAll)                                                            // 5
	mustMarker(t, l, Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 1, TimestampMs: testNow})               // 6 abort 1
	mustMarker(t, l, Marker{ProducerID: 2, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1, TimestampMs: testNow}) // 7 commit 2
	mustAppend(t, l, makeBatch(txnal(2, 0, 1, 1)), AcksAll)                                                            // 8 producer 2 opens again
	mustMarker(t, l, Marker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 1, TimestampMs: testNow})               // 9 abort 2
	mustMarker(t, l, Marker{ProducerID: 3, ProducerEpoch: 0, CoordinatorEpoch: 1, TimestampMs: testNow})               // 10 abort, nothing open
	want := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 2, LastOffset: 6, LastStableOffset: 4}, // producer 2's open transaction holds it at 4
		{ProducerID: 2, FirstOffset: 8, LastOffset: 9, LastStableOffset: 10},
		{ProducerID: 3, FirstOffset: 10, LastOffset: 10, LastStableOffset: 11},
	}
	if got := abortedIndex(l); !slices.Equal(got, want) {
		t.Fatalf("index\n%+v\nwant\n%+v", got, want)
	}
}

// TestAbortedTransactionsOverlapWhenTheirMarkerIsAtOrAfterTheFetchAndTheyBeganBeforeItsEnd is
// the selection rule of Apache's collectAbortedTxns: an entry is returned when its last offset
// ≥ the fetch offset and its first offset < the offset after the returned data; the walk may
// stop at an entry whose LSO reaches that bound.
func TestAbortedTransactionsOverlapWhenTheirMarkerIsAtOrAfterTheFetchAndTheyBeganBeforeItsEnd(t *testing.T) {
	index := []AbortedTxn{
		{ProducerID: 1, FirstOffset: 0, LastOffset: 5, LastStableOffset: 3},
		{ProducerID: 2, FirstOffset: 3, LastOffset: 8, LastStableOffset: 9},
		{ProducerID: 3, FirstOffset: 9, LastOffset: 12, LastStableOffset: 10},
		{ProducerID: 4, FirstOffset: 10, LastOffset: 15, LastStableOffset: 16},
		{ProducerID: 5, FirstOffset: 20, LastOffset: 20, LastStableOffset: 21},
	}
	for _, tc := range []struct {
		name        string
		from, upper int64
		want        []int64 // producer ids
	}{
		{"everything from the start", 0, 100, []int64{1, 2, 3, 4, 5}},
		{"a marker at the fetch offset overlaps", 5, 6, []int64{1, 2}},
		{"a marker before the fetch offset does not", 6, 9, []int64{2}},
		{"a transaction beginning at the upper bound does not", 0, 3, []int64{1}},
		{"a transaction beginning just below the upper bound does", 0, 4, []int64{1, 2}},
		{"a transaction spanning the whole range does", 11, 12, []int64{3, 4}},
		{"nothing past the last marker", 21, 30, nil},
		{"a range between transactions", 16, 20, nil},
		{"the walk stops once an entry's LSO reaches the bound", 9, 10, []int64{3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := abortedOverlapping(index, tc.from, tc.upper)
			if got == nil {
				t.Fatal("nil list")
			}
			var pids []int64
			for _, a := range got {
				pids = append(pids, a.ProducerID)
			}
			if !slices.Equal(pids, tc.want) {
				t.Fatalf("[%d, %d): producers %v, want %v", tc.from, tc.upper, pids, tc.want)
			}
			// The early stop never loses an entry the plain rule selects.
			var plainRule []int64
			for _, a := range index {
				if a.LastOffset >= tc.from && a.FirstOffset < tc.upper {
					plainRule = append(plainRule, a.ProducerID)
				}
			}
			if !slices.Equal(pids, plainRule) {
				t.Fatalf("[%d, %d): walk gives %v, the rule %v", tc.from, tc.upper, pids, plainRule)
			}
		})
	}
}

// TestReadCommittedStopsAtTheLastStableOffset: a READ_COMMITTED read never returns a batch at
// or past the LSO (from a closed segment or the active one, copied or as a section), reads
// nothing at the LSO, and reports the LSO and the aborted transactions of what it returned;
// a READ_UNCOMMITTED read goes on to the high watermark and carries no aborted list.
func TestReadCommittedStopsAtTheLastStableOffset(t *testing.T) {
	cfg := testConfig()
	cfg.SegmentBytes = 512 // the first part of the log in closed segments
	l := openLog(t, partitionDir(t), 1, cfg, Options{})
	for i := range 6 {
		mustAppend(t, l, makeBatch(plain(2, byte(i))), AcksAll) // 0-11
	}
	mustAppend(t, l, makeBatch(txnal(1, 0, 0, 2)), AcksAll)                                              // 12-13
	mustMarker(t, l, Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 1, TimestampMs: testNow}) // 14 abort
	mustAppend(t, l, makeBatch(plain(1, 9)), AcksAll)                                                    // 15
	open := mustAppend(t, l, makeBatch(txnal(2, 0, 0, 1)), AcksAll).BaseOffset                           // 16 open
	mustAppend(t, l, makeBatch(plain(3, 9)), AcksAll)                                                    // 17-19
	o, _ := l.Offsets()
	if got := lso(l); got != open || o.HighWatermark != 20 {
		t.Fatalf("LSO %d HW %d, want %d and 20", got, o.HighWatermark, open)
	}
	for _, section := range []bool{false, true} {
		var got []byte
		var aborted []AbortedTxn
		for off := int64(0); off < open; {
			var res ReadResult
			if section {
				r, sec, err := l.ReadSectionCommitted(off, 1<<20, true)
				if err != nil {
					t.Fatal(err)
				}
				b := make([]byte, sec.Len)
				if _, err := sec.ReadAt(b, 0); err != nil && sec.Len > 0 {
					t.Fatal(err)
				}
				sec.Release()
				r.Records = b
				res = r
			} else {
				res = mustReadCommitted(t, l, off, 1<<20)
			}
			if res.LastStableOffset != open || res.HighWatermark != 20 || res.Aborted == nil {
				t.Fatalf("at %d: LSO %d HW %d aborted %v", off, res.LastStableOffset, res.HighWatermark, res.Aborted)
			}
			hs := headersOf(t, res.Records)
			if len(hs) == 0 {
				t.Fatalf("nothing read at %d below the LSO %d", off, open)
			}
			for _, h := range hs {
				if h.BaseOffset >= open || h.lastOffset() >= open {
					t.Fatalf("batch %d-%d at or past the LSO %d", h.BaseOffset, h.lastOffset(), open)
				}
			}
			got = append(got, res.Records...)
			aborted = append(aborted, res.Aborted...)
			off = hs[len(hs)-1].nextOffset()
		}
		if n := len(headersOf(t, got)); n != 9 {
			t.Fatalf("section=%v: %d batches below the LSO, want 9", section, n)
		}
		if want := []AbortedTxn{{ProducerID: 1, FirstOffset: 12, LastOffset: 14, LastStableOffset: 15}}; !slices.Equal(aborted, want) {
			t.Fatalf("section=%v: aborted %+v, want %+v", section, aborted, want)
		}
	}
	if res := mustReadCommitted(t, l, open, 1<<20); len(res.Records) != 0 || res.Aborted == nil || len(res.Aborted) != 0 {
		t.Fatalf("read at the LSO: %d bytes, aborted %v", len(res.Records), res.Aborted)
	}
	res, err := l.Read(open, 1<<20, true)
	if err != nil || len(headersOf(t, res.Records)) != 2 || res.Aborted != nil || res.LastStableOffset != open {
		t.Fatalf("uncommitted read at the LSO: %v, %d bytes, aborted %v, LSO %d", err, len(res.Records), res.Aborted, res.LastStableOffset)
	}
	// A read before the aborted transaction but ending before it gets no entry for it.
	if res := mustReadCommitted(t, l, 0, 1); len(res.Aborted) != 0 {
		t.Fatalf("read of offsets 0-1: aborted %v", res.Aborted)
	}
	if _, err := l.ReadCommitted(o.LogEnd+1, 1<<20, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("past the log end: %v", err)
	}
}

// writeAbortsAndCommits writes transactions of three producers, some committed, some
// aborted, interleaved with plain batches, over several segments, and returns the index.
func writeAbortsAndCommits(t *testing.T, l *Log) []AbortedTxn {
	t.Helper()
	seq := map[int64]int32{}
	for i := range 12 {
		pid := int64(i%3 + 1)
		mustAppend(t, l, makeBatch(txnal(pid, 0, seq[pid], 2)), AcksAll)
		seq[pid] += 2
		mustAppend(t, l, makeBatch(plain(3, byte(i))), AcksAll)
		if i%2 == 1 {
			mustMarker(t, l, Marker{ProducerID: pid, ProducerEpoch: 0, Commit: i%4 == 1, CoordinatorEpoch: 1, TimestampMs: testNow})
		}
	}
	for pid := int64(1); pid <= 3; pid++ {
		mustMarker(t, l, Marker{ProducerID: pid, ProducerEpoch: 0, CoordinatorEpoch: 1, TimestampMs: testNow})
	}
	got := abortedIndex(l)
	if len(got) < 5 {
		t.Fatalf("only %d aborted transactions written", len(got))
	}
	return got
}

// TestTakeoverRebuildsTheAbortedIndexExactly: after a relinquish, a crash, with every
// snapshot gone (a full scan), and with the newest snapshot torn or overwritten by junk, the
// next leader's index equals the one the writer built.
func TestTakeoverRebuildsTheAbortedIndexExactly(t *testing.T) {
	for _, how := range []string{"relinquish", "crash", "no snapshot", "torn snapshot", "junk snapshot"} {
		t.Run(how, func(t *testing.T) {
			dir := partitionDir(t)
			cfg := testConfig()
			cfg.SegmentBytes = 1024 // several segments: snapshots at rolls hold part of the index
			l1 := openLog(t, dir, 1, cfg, Options{})
			want := writeAbortsAndCommits(t, l1)
			if how == "crash" {
				crash(t, l1)
			} else {
				relinquish(t, l1)
			}
			snaps := snapshotFiles(t, dir)
			if len(snaps) < 2 {
				t.Fatalf("%d snapshots", len(snaps))
			}
			switch how {
			case "no snapshot":
				for _, s := range snaps {
					if err := os.Remove(s); err != nil {
						t.Fatal(err)
					}
				}
			case "torn snapshot", "junk snapshot":
				b, err := os.ReadFile(snaps[len(snaps)-1])
				if err != nil {
					t.Fatal(err)
				}
				if how == "torn snapshot" {
					b = b[:len(b)-20]
				} else {
					b[len(b)-30] ^= 0xff
				}
				if err := os.WriteFile(snaps[len(snaps)-1], b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			l2 := openLog(t, dir, 2, cfg, Options{})
			if got := abortedIndex(l2); !slices.Equal(got, want) {
				t.Fatalf("recovered index\n%+v\nwant\n%+v", got, want)
			}
			// And once more, from the new leader's own checkpoint.
			relinquish(t, l2)
			l3 := openLog(t, dir, 3, cfg, Options{})
			if got := abortedIndex(l3); !slices.Equal(got, want) {
				t.Fatalf("index after a second takeover\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// snapshotFiles lists dir's snapshots, oldest first.
func snapshotFiles(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), snapshotSuffix) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// TestALogStartMoveDropsTheAbortedTransactionsBelowIt: DeleteRecords past markers drops
// their entries (an entry whose marker is at or after the log start stays, even if its
// transaction began below it), in memory and for the next leader.
func TestALogStartMoveDropsTheAbortedTransactionsBelowIt(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	l := openLog(t, dir, 1, cfg, Options{})
	all := writeAbortsAndCommits(t, l)
	cut := all[2].LastOffset // the third entry's marker: the first two go, it stays
	if _, err := l.DeleteRecords(context.Background(), cut); err != nil {
		t.Fatal(err)
	}
	want := all[2:]
	if got := abortedIndex(l); !slices.Equal(got, want) {
		t.Fatalf("after DeleteRecords to %d\n%+v\nwant\n%+v", cut, got, want)
	}
	relinquish(t, l)
	l2 := openLog(t, dir, 2, cfg, Options{})
	if got := abortedIndex(l2); !slices.Equal(got, want) {
		t.Fatalf("after takeover\n%+v\nwant\n%+v", got, want)
	}
	// A READ_COMMITTED read at the log start still gets the entry of a transaction that
	// began below it.
	res := mustReadCommitted(t, l2, cut, 1<<20)
	if len(res.Aborted) == 0 || res.Aborted[0] != all[2] {
		t.Fatalf("read at the log start %d: aborted %+v, want %+v first", cut, res.Aborted, all[2])
	}
}

var txnSeed = flag.Uint64("txnread.seed", 0, "replay one seed of TestReadCommittedViewMatchesTheModel")

// TestReadCommittedViewMatchesTheModel interleaves, at random, transactional batches of
// several producers, commits, aborts (some with nothing open), plain and idempotent batches,
// DeleteRecords, segment rolls and takeovers (clean and crashed). After every step a
// READ_COMMITTED consumer — reading from the log start in random-sized fetches and dropping
// records as Apache's consumer does with each answer's aborted list — must see exactly the
// model's committed view below the LSO: every non-transactional record and every committed
// transaction's records, never an aborted one. Run with -race -count=20;
// -txnread.seed=N replays a failure.
func TestReadCommittedViewMatchesTheModel(t *testing.T) {
	seeds := []uint64{rand.Uint64()}
	if *txnSeed != 0 {
		seeds = []uint64{*txnSeed}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runReadCommittedModel(t, seed) })
	}
}

// txnModel is what the test knows of the log: each record's fate by offset.
type txnModel struct {
	kind     map[int64]recordKind // every data record written
	open     map[int64][]int64    // producer → offsets of its open transaction's records
	seq      map[int64]int32
	logStart int64
}

type recordKind int

const (
	recPlain     recordKind = iota // non-transactional: visible
	recOpen                        // in an open transaction: never below the LSO
	recCommitted                   // visible
	recAborted                     // never visible
)

func runReadCommittedModel(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (-txnread.seed=%d): %s", seed, seed, fmt.Sprintf(format, args...))
	}
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 600 + int64(rng.IntN(1500))
	epoch := int32(1)
	l := openLog(t, dir, epoch, cfg, Options{})
	m := &txnModel{kind: map[int64]recordKind{}, open: map[int64][]int64{}, seq: map[int64]int32{}}
	const producers = 4
	for step := range 150 {
		pid := int64(rng.IntN(producers) + 1)
		switch op := rng.IntN(100); {
		case op < 35: // a transactional batch
			n := rng.IntN(3) + 1
			res := mustAppend(t, l, makeBatch(txnal(pid, 0, m.seq[pid], n)), AcksAll)
			m.seq[pid] += int32(n)
			for o := res.BaseOffset; o <= res.LastOffset; o++ {
				m.kind[o] = recOpen
				m.open[pid] = append(m.open[pid], o)
			}
		case op < 55: // a marker, mostly for an open transaction
			if len(m.open[pid]) == 0 && rng.IntN(3) > 0 {
				continue
			}
			commit := rng.IntN(2) == 0
			mustMarker(t, l, Marker{ProducerID: pid, ProducerEpoch: 0, Commit: commit, CoordinatorEpoch: 1, TimestampMs: testNow})
			for _, o := range m.open[pid] {
				m.kind[o] = map[bool]recordKind{true: recCommitted, false: recAborted}[commit]
			}
			delete(m.open, pid)
		case op < 75: // a plain batch
			n := rng.IntN(4) + 1
			res := mustAppend(t, l, makeBatch(plain(n, byte(step))), AcksAll)
			for o := res.BaseOffset; o <= res.LastOffset; o++ {
				m.kind[o] = recPlain
			}
		case op < 85: // an idempotent batch from a producer with nothing open
			if len(m.open[pid]) > 0 {
				if _, err := l.Append(context.Background(), makeBatch(idem(pid, 0, m.seq[pid], 1)), AcksAll); !isErr(err, ErrInvalidTxnState) {
					fail("non-transactional batch inside a transaction: %v", err)
				}
				continue
			}
			res := mustAppend(t, l, makeBatch(idem(pid, 0, m.seq[pid], 2)), AcksAll)
			m.seq[pid] += 2
			for o := res.BaseOffset; o <= res.LastOffset; o++ {
				m.kind[o] = recPlain
			}
		case op < 90: // DeleteRecords somewhere below the high watermark
			o, err := l.Offsets()
			if err != nil {
				fail("offsets: %v", err)
			}
			if o.HighWatermark > o.LogStart {
				to := o.LogStart + rng.Int64N(min(o.HighWatermark-o.LogStart, 20)+1)
				if _, err := l.DeleteRecords(context.Background(), to); err != nil {
					fail("delete records to %d: %v", to, err)
				}
				m.logStart = max(m.logStart, to)
			}
		default: // a takeover: clean or crashed
			if rng.IntN(2) == 0 {
				relinquish(t, l)
			} else {
				crash(t, l)
			}
			epoch++
			l = openLog(t, dir, epoch, cfg, Options{})
		}
		checkCommittedView(t, l, m, rng, fail)
	}
}

// checkCommittedView consumes l READ_COMMITTED from the log start to the LSO and compares
// what a consumer keeps with the model.
func checkCommittedView(t *testing.T, l *Log, m *txnModel, rng *rand.Rand, fail func(string, ...any)) {
	t.Helper()
	o, err := l.Offsets()
	if err != nil {
		fail("offsets: %v", err)
	}
	stable := lso(l)
	if o.LogStart != m.logStart {
		fail("log start %d, model %d", o.LogStart, m.logStart)
	}
	// The model's LSO: the oldest open transaction's first record, else the high watermark.
	wantLSO := o.HighWatermark
	for _, offs := range m.open {
		if len(offs) > 0 {
			wantLSO = min(wantLSO, offs[0])
		}
	}
	if wantLSO = max(wantLSO, o.LogStart); stable != wantLSO {
		fail("LSO %d, model %d", stable, wantLSO)
	}
	var seen []int64
	for off := o.LogStart; off < stable; {
		res := mustReadCommitted(t, l, off, 1+rng.IntN(400))
		hs := headersOf(t, res.Records)
		if len(hs) == 0 {
			fail("nothing read at %d below the LSO %d", off, stable)
		}
		seen = append(seen, consume(res, hs, off)...)
		off = hs[len(hs)-1].nextOffset()
	}
	var want []int64
	for off, k := range m.kind {
		if off < o.LogStart || off >= stable {
			continue
		}
		switch k {
		case recPlain, recCommitted:
			want = append(want, off)
		case recOpen:
			fail("record %d of an open transaction below the LSO %d", off, stable)
		}
	}
	slices.Sort(want)
	if !slices.Equal(seen, want) {
		fail("a READ_COMMITTED consumer kept\n%v\nthe model says\n%v", seen, want)
	}
}

// consume is what Apache's consumer (CompletedFetch.nextFetchedRecord) keeps of one
// READ_COMMITTED answer read at offset: a producer becomes aborted once a batch reaches the
// first offset of one of the answer's aborted transactions, its transactional batches are
// dropped until its ABORT marker, control batches are never delivered, and records below the
// fetch offset are skipped.
func consume(res ReadResult, hs []batchHeader, offset int64) []int64 {
	queue := slices.Clone(res.Aborted)
	slices.SortFunc(queue, func(a, b AbortedTxn) int { return int(a.FirstOffset - b.FirstOffset) })
	aborted := map[int64]bool{}
	var kept []int64
	pos := 0
	for _, h := range hs {
		b := res.Records[pos : pos+int(h.size())]
		pos += int(h.size())
		if h.ProducerID >= 0 {
			for len(queue) > 0 && queue[0].FirstOffset <= h.lastOffset() {
				aborted[queue[0].ProducerID] = true
				queue = queue[1:]
			}
			if h.Attributes&attrControl != 0 {
				c := h
				if parseControl(&c, b[batchHeaderSize:]) == nil && !c.ctl.commit {
					delete(aborted, h.ProducerID)
				}
				continue
			}
			if h.Attributes&attrTransactional != 0 && aborted[h.ProducerID] {
				continue
			}
		}
		for o := max(h.BaseOffset, offset); o <= h.lastOffset(); o++ {
			kept = append(kept, o)
		}
	}
	return kept
}
