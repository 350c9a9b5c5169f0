package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTakeoverAtOrBelowTheFenceIsRefusedAndChangesNothing(t *testing.T) {
	dir := partitionDir(t)
	l5 := openLog(t, dir, 5, testConfig(), Options{})
	for i := range 4 {
		mustAppend(t, l5, makeBatch(plain(2, byte(i))), AcksAll)
	}
	relinquish(t, l5)
	before := dirListing(t, dir)
	for _, e := range []int32{0, 3, 5} {
		l, _ := Open(dir, testConfig(), Options{})
		err := l.Takeover(context.Background(), e)
		var fe *FencedError
		if !errors.As(err, &fe) || fe.Fence != 5 {
			t.Fatalf("takeover at %d over fence 5: %v, want a FencedError", e, err)
		}
		if _, err := l.Append(context.Background(), makeBatch(plain(1, 0)), AcksAll); !isErr(err, ErrFenced) {
			t.Fatalf("append after a refused takeover: %v", err)
		}
		if after := dirListing(t, dir); !slices.Equal(before, after) {
			t.Fatalf("refused takeover at %d changed the partition directory", e)
		}
	}
	l6 := openLog(t, dir, 6, testConfig(), Options{})
	if off, _ := l6.Offsets(); off.LogEnd != 8 || off.HighWatermark != 8 {
		t.Fatalf("after the refusals epoch 6 finds %+v, want 8 records", off)
	}
}

func TestAppendsBeforeTakeoverCompletesAreRefused(t *testing.T) {
	dir := partitionDir(t)
	l1 := openLog(t, dir, 1, testConfig(), Options{})
	mustAppend(t, l1, makeBatch(plain(1, 1)), AcksAll)
	crash(t, l1)

	inRecovery, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys := FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op == OpRead && strings.HasSuffix(path, segmentSuffix) {
			once.Do(func() { close(inRecovery); <-release })
		}
		return nil
	}}
	l, _ := Open(dir, testConfig(), Options{FS: fsys})
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 2)), AcksAll); !isErr(err, ErrNotLeader) {
		t.Fatalf("append before takeover: %v, want ErrNotLeader", err)
	}
	done := make(chan error)
	go func() { done <- l.Takeover(context.Background(), 2) }()
	<-inRecovery
	if _, err := l.Append(context.Background(), makeBatch(plain(1, 3)), AcksAll); !isErr(err, ErrNotLeader) {
		t.Fatalf("append during recovery: %v, want ErrNotLeader", err)
	}
	if _, err := l.Read(0, 1<<20, true); !isErr(err, ErrNotLeader) {
		t.Fatalf("read during recovery: %v, want ErrNotLeader", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relinquish(t, l) })
	if res := mustAppend(t, l, makeBatch(plain(1, 4)), AcksAll); res.BaseOffset != 1 {
		t.Fatalf("first append after takeover at offset %d, want 1", res.BaseOffset)
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, msg string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal(msg)
	}
}

// TestDeposedLeaderWritesAfterTheRollAreNeverServed holds the epoch-5 leader in the middle of
// a roll — it has fsynced and passed its fence check, and is about to create its next segment
// — while epoch 6 claims, recovers and rolls. Epoch 5 then creates its late segment and its
// waiting appends write into it before it learns it is fenced. Those bytes sit above the next
// segment's base offset in log order, so neither epoch 6 nor a later takeover ever serves
// them, and nothing epoch 5 acknowledged is lost.
func TestDeposedLeaderWritesAfterTheRollAreNeverServed(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 4096
	inRoll, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fsys := FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		name := filepath.Base(path)
		if op == OpOpen && strings.HasSuffix(name, "-0000000005.log") && !strings.HasPrefix(name, "00000000000000000000-") {
			once.Do(func() { close(inRoll); <-release })
		}
		return nil
	}}
	l5 := openLog(t, dir, 5, cfg, Options{FS: fsys})
	acked5 := map[int64][]byte{}
	var refused [][]byte
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Go(func() {
			for n := 0; ; n++ {
				b := makeBatch(plain(4, byte(p*50+n)))
				res, err := l5.Append(context.Background(), b, AcksAll)
				mu.Lock()
				if err != nil {
					refused = append(refused, b)
					mu.Unlock()
					return
				}
				acked5[res.BaseOffset] = bytes.Clone(b)
				mu.Unlock()
			}
		})
	}
	<-inRoll
	l6 := openLog(t, dir, 6, cfg, Options{})
	rollPoint, _ := l6.Offsets()
	acked6 := map[int64][]byte{}
	for i := range 5 {
		b := makeBatch(plain(2, byte(200+i)))
		res := mustAppend(t, l6, b, AcksAll)
		acked6[res.BaseOffset] = bytes.Clone(b)
	}
	close(release)
	waitOrFail(t, &wg, "epoch 5 never learned it was fenced")

	late := filepath.Join(dir, segmentName(rollPoint.LogEnd, 5))
	st, err := os.Stat(late)
	if err != nil || st.Size() == 0 {
		t.Fatalf("the deposed leader's late segment %s should exist with bytes in it: %v", late, err)
	}
	for _, l := range []*Log{l6} {
		got := readAll(t, l)
		verifyLog(t, got, acked5, acked6, refused)
	}
	relinquish(t, l6)
	l7 := openLog(t, dir, 7, cfg, Options{})
	verifyLog(t, readAll(t, l7), acked5, acked6, refused)
}

// verifyLog checks that the log holds every acknowledged batch and none of the refused ones.
func verifyLog(t *testing.T, log []byte, acked5, acked6 map[int64][]byte, refused [][]byte) {
	t.Helper()
	got := batchesByOffset(t, log)
	for _, acked := range []map[int64][]byte{acked5, acked6} {
		for off, b := range acked {
			if !bytes.Equal(got[off], b) {
				t.Fatalf("acknowledged batch at %d missing or different", off)
			}
		}
	}
	for _, b := range refused {
		body := b[offAttributes:] // the CRC-covered part: same whatever offset was stamped
		for off, g := range got {
			if bytes.Equal(g[offAttributes:], body) && acked5[off] == nil {
				t.Fatalf("a batch the deposed leader wrote after the roll is served at offset %d", off)
			}
		}
	}
}

// TestASegmentNoJournalNamesIsNeverServed: a segment file the log's journals do not name — a
// deposed leader's roll at its own, later, idea of the log end, or a takeover that lost and
// crashed before removing its roll segment — is not part of the log: never served, never
// counted, and left alone (a takeover deletes nothing).
func TestASegmentNoJournalNamesIsNeverServed(t *testing.T) {
	dir := partitionDir(t)
	l5 := openLog(t, dir, 5, testConfig(), Options{})
	mustAppend(t, l5, makeBatch(plain(3, 1)), AcksAll)
	relinquish(t, l5)
	l6 := openLog(t, dir, 6, testConfig(), Options{})
	mustAppend(t, l6, makeBatch(plain(3, 2)), AcksAll)
	want := readAll(t, l6)
	relinquish(t, l6)
	strays := map[string][]byte{
		segmentName(50, 5): stored(makeBatch(plain(2, 9)), 50, 5), // a deposed epoch 5's roll at its own idea of the log end
		segmentName(4, 6):  stored(makeBatch(plain(2, 8)), 4, 6),  // inside epoch 6's segment: a listing would cut it there
		segmentName(6, 5):  nil,                                   // an empty roll no record names
	}
	for name, b := range strays {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l7 := openLog(t, dir, 7, testConfig(), Options{})
	if got := readAll(t, l7); !bytes.Equal(got, want) {
		t.Fatalf("a segment no journal names changed what is served")
	}
	if off, _ := l7.Offsets(); off.LogEnd != 6 {
		t.Fatalf("log end %d, want 6", off.LogEnd)
	}
	if _, err := os.Stat(filepath.Join(dir, segmentName(50, 5))); err != nil {
		t.Fatalf("the takeover removed a file: %v", err)
	}
}

func TestTakeoverRefusesWhenANewerLeaderHasAlreadyWritten(t *testing.T) {
	dir := partitionDir(t)
	l := openLog(t, dir, 9, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(1, 1)), AcksAll)
	relinquish(t, l)
	// A claimer of epoch 4 whose claim got through anyway — say the fence directory was
	// lost, or its listing was stale — finds epoch 9's segment and must not touch it.
	if err := os.RemoveAll(filepath.Join(dir, fenceDirName)); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)
	l4, _ := Open(dir, testConfig(), Options{})
	if err := l4.Takeover(context.Background(), 4); !isErr(err, ErrFenced) {
		t.Fatalf("takeover at 4 with epoch-9 segments present: %v, want ErrFenced", err)
	}
	// Everything but the fence (where epoch 4's own claim now sits) is as it was.
	notFence := func(s string) bool { return strings.Contains(s, string(filepath.Separator)+fenceDirName) }
	after := slices.DeleteFunc(dirListing(t, dir), notFence)
	if !slices.Equal(slices.DeleteFunc(before, notFence), after) {
		t.Fatalf("a stale takeover changed the partition's files")
	}
}

// tornCase mutates a crashed log's only segment of 10 batches; keep is how many the log keeps.
type tornCase struct {
	name   string
	mutate func(t *testing.T, path string, ends []int64)
	keep   int
}

// TestTornTailEndsTheLogAtTheLastValidBatchAndNothingBeforeIsLost: whatever damage ends a
// crashed leader's last segment, the log ends at the last valid batch before it, everything
// before is served, the next append follows it, and the damaged bytes are left in the file
// and never read again (no destructive step at takeover: the next segment's base bounds them).
func TestTornTailEndsTheLogAtTheLastValidBatchAndNothingBeforeIsLost(t *testing.T) {
	flip := func(at func(ends []int64) int64) func(*testing.T, string, []int64) {
		return func(t *testing.T, path string, ends []int64) {
			b, _ := os.ReadFile(path)
			b[at(ends)] ^= 0x40
			_ = os.WriteFile(path, b, 0o644)
		}
	}
	truncate := func(at func(ends []int64) int64) func(*testing.T, string, []int64) {
		return func(t *testing.T, path string, ends []int64) { _ = os.Truncate(path, at(ends)) }
	}
	appendBytes := func(extra []byte) func(*testing.T, string, []int64) {
		return func(t *testing.T, path string, ends []int64) {
			f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			_, _ = f.Write(extra)
			_ = f.Close()
		}
	}
	cases := []tornCase{
		{"last batch missing its final byte", truncate(func(e []int64) int64 { return e[9] - 1 }), 9},
		{"last batch cut inside its header", truncate(func(e []int64) int64 { return e[8] + 30 }), 9},
		{"last batch cut after 5 bytes", truncate(func(e []int64) int64 { return e[8] + 5 }), 9},
		{"byte flipped in the last batch's records", flip(func(e []int64) int64 { return e[9] - 3 }), 9},
		{"byte flipped in the fifth batch's records", flip(func(e []int64) int64 { return e[4] - 10 }), 4},
		{"byte flipped in the fifth batch's length", flip(func(e []int64) int64 { return e[3] + offLength + 3 }), 4},
		{"byte flipped in the fifth batch's base offset", flip(func(e []int64) int64 { return e[3] + 7 }), 4},
		{"preallocated zeros after the last batch", appendBytes(make([]byte, 4096)), 10},
		{"a whole batch with the wrong base offset after the last", appendBytes(stored(makeBatch(plain(1, 7)), 99, 1)), 10},
		{"garbage after the last batch", appendBytes([]byte("not a record batch at all, but long enough to be read as a header")), 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := partitionDir(t)
			l1 := openLog(t, dir, 1, testConfig(), Options{})
			var ends []int64
			var want [][]byte
			pos := int64(0)
			for i := range 10 {
				b := makeBatch(plain(3, byte(i)))
				mustAppend(t, l1, b, AcksAll)
				want = append(want, b)
				pos += int64(len(b))
				ends = append(ends, pos)
			}
			crash(t, l1) // no checkpoint: recovery scans the segment from its start
			path := filepath.Join(dir, segmentName(0, 1))
			tc.mutate(t, path, ends)
			damaged, _ := os.ReadFile(path)

			l2 := openLog(t, dir, 2, testConfig(), Options{})
			off, _ := l2.Offsets()
			if off.LogEnd != int64(3*tc.keep) || off.HighWatermark != off.LogEnd {
				t.Fatalf("recovered log end %d (hw %d), want %d", off.LogEnd, off.HighWatermark, 3*tc.keep)
			}
			wantBytes := bytes.Join(want[:tc.keep], nil)
			if got := readAll(t, l2); !bytes.Equal(got, wantBytes) {
				t.Fatalf("recovered %d bytes, want the first %d batches (%d bytes)", len(got), tc.keep, len(wantBytes))
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
				t.Fatalf("the takeover changed the damaged segment (%d bytes before, %d after)", len(damaged), len(after))
			}
			next := makeBatch(plain(1, 50))
			if res := mustAppend(t, l2, bytes.Clone(next), AcksAll); res.BaseOffset != int64(3*tc.keep) {
				t.Fatalf("next append at %d", res.BaseOffset)
			}
			wantBytes = append(wantBytes, stored(next, int64(3*tc.keep), 2)...)
			crash(t, l2)
			l3 := openLog(t, dir, 3, testConfig(), Options{})
			if got := readAll(t, l3); !bytes.Equal(got, wantBytes) {
				t.Fatalf("after another takeover %d bytes served, want %d", len(got), len(wantBytes))
			}
		})
	}
}

func TestMissingBytesBeforeTheTailRefuseTakeoverInsteadOfDroppingAcknowledgedData(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 1024
	l1 := openLog(t, dir, 1, cfg, Options{})
	for i := range 20 {
		mustAppend(t, l1, makeBatch(plain(3, byte(i))), AcksAll)
	}
	relinquish(t, l1)
	first := filepath.Join(dir, segmentName(0, 1))
	st, _ := os.Stat(first)
	_ = os.Truncate(first, st.Size()-1)
	_ = os.Remove(filepath.Join(dir, indexName(0, 1)))
	l2, _ := Open(dir, cfg, Options{})
	err := l2.Takeover(context.Background(), 2)
	if !isErr(err, ErrCorruptLog) || !isErr(err, ErrStorage) {
		t.Fatalf("takeover over a damaged closed segment: %v, want ErrCorruptLog", err)
	}
}

func TestRecreatedTopicStartsEmpty(t *testing.T) {
	data := t.TempDir()
	old := PartitionDir(data, "c1", "orders", [16]byte{1}, 0)
	l := openLog(t, old, 1, testConfig(), Options{})
	for i := range 5 {
		mustAppend(t, l, makeBatch(plain(2, byte(i))), AcksAll)
	}
	relinquish(t, l)
	again := PartitionDir(data, "c1", "orders", [16]byte{2}, 0)
	if again == old {
		t.Fatal("a new topic id must give a new directory")
	}
	l2 := openLog(t, again, 1, testConfig(), Options{})
	off, _ := l2.Offsets()
	if off != (Offsets{}) {
		t.Fatalf("re-created topic starts at %+v, want empty", off)
	}
	if res := mustAppend(t, l2, makeBatch(plain(1, 9)), AcksAll); res.BaseOffset != 0 {
		t.Fatalf("first offset of the re-created topic is %d", res.BaseOffset)
	}
}

func TestRelinquishLeavesACheckpointSoTheNextTakeoverReadsNoSegment(t *testing.T) {
	dir := partitionDir(t)
	cfg := testConfig()
	cfg.SegmentBytes = 2048
	l1 := openLog(t, dir, 1, cfg, Options{})
	for i := range 30 {
		mustAppend(t, l1, makeBatch(plain(2, byte(i))), AcksAll)
	}
	want := readAll(t, l1)
	relinquish(t, l1)
	noSegmentReads := FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op == OpRead && strings.HasSuffix(path, segmentSuffix) {
			return fmt.Errorf("recovery read a segment")
		}
		return nil
	}}
	l2, _ := Open(dir, cfg, Options{FS: noSegmentReads})
	if err := l2.Takeover(context.Background(), 2); err != nil {
		t.Fatalf("takeover from a clean checkpoint read segment data: %v", err)
	}
	relinquish(t, l2)
	l3 := openLog(t, dir, 3, cfg, Options{})
	if got := readAll(t, l3); !bytes.Equal(got, want) {
		t.Fatal("data changed across clean takeovers")
	}
}

func TestSnapshotThatDoesNotMatchItsSegmentIsSkipped(t *testing.T) {
	dir := partitionDir(t)
	l1 := openLog(t, dir, 1, testConfig(), Options{})
	for i := range 6 {
		mustAppend(t, l1, makeBatch(idem(7, 0, int32(i), 1)), AcksAll)
	}
	want := readAll(t, l1)
	crash(t, l1)
	// A checkpoint claiming offset 6 sits in the middle of a batch.
	bogus := encodeSnapshot(checkpoint{offset: 6, segBase: 0, segEpoch: 1, pos: 17}, newProducerState())
	if err := os.WriteFile(filepath.Join(dir, snapshotName(6, 1)), bogus, 0o644); err != nil {
		t.Fatal(err)
	}
	l2 := openLog(t, dir, 2, testConfig(), Options{})
	if got := readAll(t, l2); !bytes.Equal(got, want) {
		t.Fatal("a bad snapshot changed the recovered log")
	}
	// The producer state was rebuilt by scanning: a retry of the last batch is a duplicate.
	res := mustAppend(t, l2, makeBatch(idem(7, 0, 5, 1)), AcksAll)
	if !res.Duplicate || res.BaseOffset != 5 {
		t.Fatalf("retry after recovery: %+v, want the duplicate at 5", res)
	}
}

func TestEpochHistoryAnswersOffsetForLeaderEpoch(t *testing.T) {
	dir := partitionDir(t)
	l1 := openLog(t, dir, 1, testConfig(), Options{})
	for range 5 {
		mustAppend(t, l1, makeBatch(plain(2, 1)), AcksAll) // epoch 1: offsets 0..9
	}
	relinquish(t, l1)
	l2 := openLog(t, dir, 2, testConfig(), Options{}) // epoch 2 writes nothing
	relinquish(t, l2)
	l4 := openLog(t, dir, 4, testConfig(), Options{})
	for range 5 {
		mustAppend(t, l4, makeBatch(plain(2, 1)), AcksAll) // epoch 4: 10..19
	}
	relinquish(t, l4)
	l6 := openLog(t, dir, 6, testConfig(), Options{})
	mustAppend(t, l6, makeBatch(plain(1, 1)), AcksAll) // epoch 6: 20
	for _, tc := range []struct {
		ask       int32
		epoch     int32
		endOffset int64
	}{
		{6, 6, 21},  // the current epoch: the log end
		{4, 4, 20},  // an older epoch: where the next began
		{5, 4, 20},  // an epoch never held: the largest below it
		{2, 1, 10},  // an epoch that wrote nothing is dropped, as Apache drops it
		{1, 1, 10},  // the first epoch
		{0, 0, 0},   // older than every epoch: the first epoch's start
		{7, -1, -1}, // newer than every epoch
	} {
		e, off, err := l6.EpochEndOffset(tc.ask)
		if err != nil || e != tc.epoch || off != tc.endOffset {
			t.Errorf("EpochEndOffset(%d) = (%d, %d, %v), want (%d, %d)", tc.ask, e, off, err, tc.epoch, tc.endOffset)
		}
	}
	if got := l6.EpochAt(12); got != 4 {
		t.Errorf("EpochAt(12) = %d, want 4", got)
	}
	res, _ := l6.Read(12, 1<<20, true)
	if h := parseHeader(res.Records); h.LeaderEpoch != 4 {
		t.Errorf("batch at 12 is stamped with leader epoch %d, want 4", h.LeaderEpoch)
	}
}

// TestATakeoverCommitsThePreviousLeadersBytesBeforeServingThem: on NFS an fsync commits only
// the writes of the client that makes it. The old leader's node wrote batches that reached the
// server but were never committed, and died; the new leader serves them. They must survive a
// server crash: the new leader rewrote and committed them before they became readable (before
// the rule, its fsync committed nothing of them and a server crash took back records that had
// been served).
func TestATakeoverCommitsThePreviousLeadersBytesBeforeServingThem(t *testing.T) {
	sim := NewNFSSim(NFSSimOptions{Writeback: 1, Seed: 3})
	dir := "/data/cluster/topics/t-x/0"
	old := sim.Client()
	l4 := openLog(t, dir, 4, testConfig(), Options{FS: old})
	mustAppend(t, l4, makeBatch(plain(2, 1)), AcksAll)
	g := newGatedSync()
	g.set(true)
	t.Cleanup(func() { g.set(false) })
	l4.fsys = FaultFS{FS: old, Fault: g.fault} // from here its segment fsyncs hang
	l4.activeFile.f = faultFile{inner: l4.activeFile.f, fs: FaultFS{FS: old, Fault: g.fault}, name: segmentName(0, 4)}
	for i := range 4 {
		mustAppend(t, l4, makeBatch(plain(3, byte(10+i))), AcksNone) // written back, never committed
	}
	old.Crash()
	g.set(false)

	next := sim.Client()
	l5 := openLog(t, dir, 5, testConfig(), Options{FS: next})
	served := readAll(t, l5)
	if n := len(headersOf(t, served)); n != 5 {
		t.Fatalf("the new leader serves %d batches, want the 5 the old one wrote", n)
	}
	next.Crash() // the whole site loses power: the server and every node
	sim.CrashServer()

	l6 := openLog(t, dir, 6, testConfig(), Options{FS: sim.Client()})
	if got := readAll(t, l6); !bytes.Equal(got, served) {
		t.Fatalf("after a server crash %d bytes are served where %d were before: served records vanished", len(got), len(served))
	}
}
