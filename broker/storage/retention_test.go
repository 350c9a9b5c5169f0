package storage

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type fakeClock struct{ ms atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ms.Store(testNow)
	return c
}

func (c *fakeClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

const day = 24 * 3600 * 1000

// filledLog writes batches with the given record timestamps into a log with small
// segments (one batch per segment) and returns it.
func filledLog(t *testing.T, dir string, cfg Config, fsys FS, clock *fakeClock, timestamps ...int64) *Log {
	t.Helper()
	l := openLog(t, dir, 1, cfg, Options{FS: fsys, Now: clock.now})
	for i, ts := range timestamps {
		s := plain(2, byte(i))
		s.baseTs = ts
		if ts < 0 {
			s.tsStep = 0 // every record without a timestamp (-1)
		}
		mustAppend(t, l, makeBatch(s), AcksAll)
	}
	return l
}

func retentionConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 150 // every batch of plain(2, …) (~136 bytes) gets its own segment
	cfg.RetentionMs = 7 * day
	return cfg
}

func applyRetention(t *testing.T, l *Log) Offsets {
	t.Helper()
	if err := l.ApplyRetention(context.Background()); err != nil {
		t.Fatal(err)
	}
	off, err := l.Offsets()
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func TestRetentionNeverDeletesTheActiveSegment(t *testing.T) {
	clock := newFakeClock()
	cfg := retentionConfig()
	cfg.SegmentBytes = 1 << 20 // a single, active segment
	l := filledLog(t, partitionDir(t), cfg, nil, clock, testNow-30*day, testNow-30*day)
	clock.ms.Add(60 * day)
	if off := applyRetention(t, l); off.LogStart != 0 {
		t.Fatalf("retention moved the log start to %d with only the active segment", off.LogStart)
	}
	if len(headersOf(t, readAll(t, l))) != 2 {
		t.Fatal("the active segment lost batches to retention")
	}
}

func TestRetentionDeletesOldClosedSegmentsAndKeepsASegmentWithARecentRecord(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t)
	// Segments: [old] [old] [old, then one recent record] [old] [active].
	l := openLog(t, dir, 1, retentionConfig(), Options{Now: clock.now})
	for i, ts := range []int64{testNow - 30*day, testNow - 20*day, testNow - 20*day, testNow - 20*day, testNow - 20*day} {
		s := plain(2, byte(i))
		s.baseTs = ts
		if i == 2 {
			s.tsStep = 20*day - 1000 // its second record is recent
		}
		mustAppend(t, l, makeBatch(s), AcksAll)
	}
	if off := applyRetention(t, l); off.LogStart != 4 {
		t.Fatalf("log start %d after retention, want 4 (two old segments gone, the one with a recent record kept)", off.LogStart)
	}
	if len(segmentFiles(t, dir)) != 3 {
		t.Fatalf("segments left: %v", segmentFiles(t, dir))
	}
	if _, err := l.Read(0, 100, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the new log start: %v", err)
	}
	relinquish(t, l)
	l2 := openLog(t, dir, 2, retentionConfig(), Options{Now: clock.now})
	if off, _ := l2.Offsets(); off.LogStart != 4 {
		t.Fatalf("log start after takeover %d, want 4", off.LogStart)
	}
}

// TestRetentionDatesSegmentsByRecordTimestampsNeverFileTimes pins the seed failure: segments
// adopted after a restart, dated 1970 by their files, deleted by retention.
func TestRetentionDatesSegmentsByRecordTimestampsNeverFileTimes(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t)
	l := filledLog(t, dir, retentionConfig(), nil, clock, testNow, testNow, testNow)
	relinquish(t, l)
	for _, n := range segmentFiles(t, dir) {
		if err := os.Chtimes(filepath.Join(dir, n), time.Unix(0, 0), time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
	}
	_ = os.Remove(filepath.Join(dir, indexName(0, 1))) // make it rebuild the summary too
	l2 := openLog(t, dir, 2, retentionConfig(), Options{Now: clock.now})
	if off := applyRetention(t, l2); off.LogStart != 0 {
		t.Fatalf("segments with recent records but 1970 file times were deleted (log start %d)", off.LogStart)
	}
}

func TestSegmentWithoutTimestampsIsNeverDeletedByTimeButIsBySize(t *testing.T) {
	clock := newFakeClock()
	cfg := retentionConfig()
	l := filledLog(t, partitionDir(t), cfg, nil, clock, -1, -1, -1) // producers that set no timestamp
	clock.ms.Add(365 * day)
	if off := applyRetention(t, l); off.LogStart != 0 {
		t.Fatalf("undated segments deleted by time (log start %d)", off.LogStart)
	}
	cfg.RetentionBytes = 1
	if err := l.SetConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if off := applyRetention(t, l); off.LogStart != 4 {
		t.Fatalf("retention.bytes=1 kept the log from %d, want every closed segment gone (4)", off.LogStart)
	}
}

func TestRetentionBytesDeletesOnlyWhatTheLogCanSpare(t *testing.T) {
	clock := newFakeClock()
	cfg := retentionConfig()
	cfg.RetentionMs = -1
	l := filledLog(t, partitionDir(t), cfg, nil, clock, testNow, testNow, testNow, testNow, testNow)
	size := int64(len(makeBatch(plain(2, 0))))
	cfg.RetentionBytes = 3 * size // keep at least three batches' worth
	_ = l.SetConfig(cfg)
	if off := applyRetention(t, l); off.LogStart != 4 {
		t.Fatalf("log start %d, want 4: five segments of one batch, retention.bytes of three", off.LogStart)
	}
}

func TestDeleteRecordsAdvancesAndPersistsTheLogStart(t *testing.T) {
	dir := partitionDir(t)
	cfg := retentionConfig()
	cfg.RetentionMs = -1
	l := filledLog(t, dir, cfg, nil, newFakeClock(), testNow, testNow, testNow, testNow)
	if _, err := l.DeleteRecords(context.Background(), 9); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete past the high watermark: %v", err)
	}
	low, err := l.DeleteRecords(context.Background(), 3)
	if err != nil || low != 3 {
		t.Fatalf("DeleteRecords(3) = %d, %v", low, err)
	}
	if _, err := l.Read(2, 100, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below the deleted offset: %v", err)
	}
	if r, err := l.Read(3, 1000, true); err != nil || parseHeader(r.Records).BaseOffset != 2 {
		t.Fatalf("read at the new log start returns its batch (from 2): %v", err)
	}
	if low, _ := l.DeleteRecords(context.Background(), 1); low != 3 {
		t.Fatalf("deleting below the log start moved it to %d", low)
	}
	if len(segmentFiles(t, dir)) != 3 {
		t.Fatalf("only the segment wholly below offset 3 goes: %v", segmentFiles(t, dir))
	}
	relinquish(t, l)
	l2 := openLog(t, dir, 2, cfg, Options{})
	if off, _ := l2.Offsets(); off.LogStart != 3 {
		t.Fatalf("log start after takeover %d, want the persisted 3", off.LogStart)
	}
	if low, err := l2.DeleteRecords(context.Background(), -1); err != nil || low != 8 {
		t.Fatalf("DeleteRecords(-1) = %d, %v; want the high watermark 8", low, err)
	}
}

// TestDeposedLeadersRetentionIsALogStartMoveForTheNewLeader: a deposed leader whose retention
// passed its fence check just before the new leader claimed goes on to delete closed
// segments the new leader already counts as part of its log. For the new leader that is the
// log start moving: a read there answers OFFSET_OUT_OF_RANGE, a timestamp lookup answers from
// the new log start, and the log keeps serving (before the fix its first read of a vanished
// segment failed the whole partition with a storage error).
func TestDeposedLeadersRetentionIsALogStartMoveForTheNewLeader(t *testing.T) {
	clock := newFakeClock()
	dir := partitionDir(t)
	cfg := retentionConfig()
	// The deposed leader is held at the first step of its retention after the fence check:
	// persisting the new log start, or removing the first segment.
	stall := newStallingFS(OSFS{})
	stall.holdOn = func(op Op, path string) bool {
		name := filepath.Base(path)
		return (op == OpOpen && strings.HasPrefix(name, logStartFileName+".")) || (op == OpRemove && strings.HasSuffix(name, segmentSuffix))
	}
	old := []int64{testNow - 30*day, testNow - 30*day, testNow - 30*day}
	l5 := filledLog(t, dir, cfg, stall, clock, append(old, testNow, testNow)...)
	retained := make(chan error, 1)
	go func() { retained <- l5.ApplyRetention(context.Background()) }()
	select {
	case <-stall.reached:
	case err := <-retained:
		t.Fatalf("retention ended (%v) without deleting anything", err)
	}

	l6 := openLog(t, dir, 6, cfg, Options{Now: clock.now})
	close(stall.release)
	t.Logf("the deposed leader's retention ended with %v", <-retained) // fenced or not: either is allowed
	waitFor(t, func() bool { return len(segmentFiles(t, dir)) <= 4 || l5.Err() != nil })

	for range 2 { // the second time with the move already known
		_, err := l6.Read(0, 1<<20, true)
		if err != nil && !isErr(err, ErrOffsetOutOfRange) {
			t.Fatalf("read of a segment the deposed leader deleted: %v, want OFFSET_OUT_OF_RANGE or data", err)
		}
		got, ok, err := l6.OffsetForTimestamp(0)
		off, oerr := l6.Offsets()
		if err != nil || oerr != nil || !ok || got.Offset < off.LogStart {
			t.Fatalf("timestamp lookup after the move: %+v %v %v (log start %d, %v)", got, ok, err, off.LogStart, oerr)
		}
	}
	if err := l6.Err(); err != nil {
		t.Fatalf("the new leader stopped serving: %v", err)
	}
	if got := readAll(t, l6); len(headersOf(t, got)) < 2 {
		t.Fatalf("the new leader lost the recent batches: %d left", len(headersOf(t, got)))
	}
	mustAppend(t, l6, makeBatch(plain(1, 9)), AcksAll)
}

// TestAClosedSegmentThatVanishedIsALogStartMove: closed segments the serving leader counts
// vanish under it, their log-start move recorded where the leader did not look before (a
// deposed leader of an older version, or one whose record came late). The leader's next read
// there re-reads the recorded log start, adopts it, answers OFFSET_OUT_OF_RANGE and keeps
// serving; it records the move, so the next leader does not count the segments either. A
// closed segment above every recorded log start that vanishes is damage: a storage error.
func TestAClosedSegmentThatVanishedIsALogStartMove(t *testing.T) {
	dir := partitionDir(t)
	cfg := retentionConfig()
	cfg.RetentionMs = -1
	l1 := filledLog(t, dir, cfg, nil, newFakeClock(), testNow, testNow, testNow, testNow, testNow)
	relinquish(t, l1)
	l2 := openLog(t, dir, 2, cfg, Options{})
	j, err := openJournal(OSFS{}, l2.pred)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.append(recLogStart, encodeOffset(4)); err != nil { // as the deposed leader would
		t.Fatal(err)
	}
	for _, base := range []int64{0, 2} {
		_ = removeFile(dir, segmentName(base, 1))
	}
	if _, err := l2.Read(1, 1<<20, true); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("read of a vanished segment: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	if off, err := l2.Offsets(); err != nil || off.LogStart != 4 {
		t.Fatalf("after the move the log starts at %+v (%v), want 4", off, err)
	}
	if got, ok, err := l2.OffsetForTimestamp(0); err != nil || !ok || got.Offset != 4 {
		t.Fatalf("timestamp lookup after the move: %+v %v %v, want offset 4", got, ok, err)
	}
	mustAppend(t, l2, makeBatch(plain(1, 9)), AcksAll)
	relinquish(t, l2)
	l3 := openLog(t, dir, 3, cfg, Options{})
	if off, _ := l3.Offsets(); off.LogStart != 4 {
		t.Fatalf("the next leader's log starts at %d, want the recorded 4", off.LogStart)
	}
	if r, err := l3.Read(4, 1<<20, true); err != nil || len(headersOf(t, r.Records)) != 1 {
		t.Fatalf("the next leader's read at its log start: %v", err)
	}
	_ = removeFile(dir, segmentName(6, 1)) // above every recorded log start, not open yet
	if _, err := l3.Read(6, 1<<20, true); !isErr(err, ErrCorruptLog) {
		t.Fatalf("read of a closed segment above the log start that vanished: %v, want ErrCorruptLog", err)
	}
}

// TestASectionWhoseSegmentVanishedIsALogStartMove: a Fetch finds its batches (ReadSection)
// and reads them after the log's lock is gone; on a network file system another node's
// retention may remove the segment in between, and the read through the handle fails with
// ESTALE. That is the log-start move a read would find, answered OFFSET_OUT_OF_RANGE with the
// log still serving — before, the raw ESTALE reached the client as KAFKA_STORAGE_ERROR.
func TestASectionWhoseSegmentVanishedIsALogStartMove(t *testing.T) {
	sim := NewNFSSim(NFSSimOptions{Seed: 5})
	dir := "/data/cluster/topics/t-x/0"
	deposed, leader := sim.Client(), sim.Client()
	cfg := retentionConfig()
	cfg.RetentionMs = -1
	l1 := filledLog(t, dir, cfg, deposed, newFakeClock(), testNow, testNow, testNow, testNow, testNow)
	relinquish(t, l1)
	l2 := openLog(t, dir, 2, cfg, Options{FS: leader})
	_, sec, err := l2.ReadSection(1, 1<<20, true)
	if err != nil || sec.Len == 0 {
		t.Fatalf("ReadSection(1): %v, %d bytes", err, sec.Len)
	}
	defer sec.Release()
	j, err := openJournal(deposed, l2.pred)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.append(recLogStart, encodeOffset(4)); err != nil { // the deposed leader's retention records first
		t.Fatal(err)
	}
	for _, base := range []int64{0, 2} {
		if err := deposed.Remove(filepath.Join(dir, segmentName(base, 1))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sec.ReadAt(make([]byte, sec.Len), 0); !isErr(err, ErrOffsetOutOfRange) {
		t.Fatalf("reading a section whose segment another node removed: %v, want OFFSET_OUT_OF_RANGE", err)
	}
	if off, err := l2.Offsets(); err != nil || off.LogStart != 4 {
		t.Fatalf("after the move the log serves %+v (%v), want log start 4 and no storage error", off, err)
	}
}
