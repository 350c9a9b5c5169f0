package storage

import (
	"context"
	"math"
	"reflect"
	"testing"
)

func hdr(pid int64, epoch int16, seq int32, records int32, base int64) batchHeader {
	return batchHeader{BaseOffset: base, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq, LastOffsetDelta: records - 1, RecordCount: records, MaxTimestamp: testNow}
}

// TestProducerSequenceRules pins the table of docs/dataplane.md "Idempotence: the sequence
// rules", one row per rule.
func TestProducerSequenceRules(t *testing.T) {
	// State: producer 1 at epoch 3 has appended sequences 0-1, 2-4, 5 at offsets 10, 12, 15.
	state := func() *producerState {
		s := newProducerState()
		s.apply(hdr(1, 3, 0, 2, 10))
		s.apply(hdr(1, 3, 2, 3, 12))
		s.apply(hdr(1, 3, 5, 1, 15))
		return s
	}
	for _, tc := range []struct {
		rule    string
		in      batchHeader
		dupAt   int64 // original first offset for a duplicate, -1 if not a duplicate
		wantErr error
	}{
		{"a duplicate of a cached batch gets the original offset", hdr(1, 3, 2, 3, 0), 12, nil},
		{"a duplicate of the last batch gets its offset", hdr(1, 3, 5, 1, 0), 15, nil},
		{"the next sequence is appended", hdr(1, 3, 6, 4, 0), -1, nil},
		{"a gap is out of order", hdr(1, 3, 8, 1, 0), -1, ErrOutOfOrderSequence},
		{"a partial overlap is out of order", hdr(1, 3, 3, 2, 0), -1, ErrOutOfOrderSequence},
		{"a stale epoch is refused", hdr(1, 2, 6, 1, 0), -1, ErrInvalidProducerEpoch},
		{"a stale epoch is refused even for a cached sequence", hdr(1, 2, 5, 1, 0), -1, ErrInvalidProducerEpoch},
		{"a new epoch starting at 0 is appended", hdr(1, 4, 0, 1, 0), -1, nil},
		{"a new epoch not starting at 0 is out of order", hdr(1, 4, 6, 1, 0), -1, ErrOutOfOrderSequence},
		{"an unknown producer is accepted at any sequence", hdr(2, 0, 77, 1, 0), -1, nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			dup, err := state().check(tc.in)
			if !isErr(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			switch {
			case tc.dupAt < 0 && dup != nil:
				t.Fatalf("treated as a duplicate of offset %d", dup.firstOffset)
			case tc.dupAt >= 0 && (dup == nil || dup.firstOffset != tc.dupAt):
				t.Fatalf("duplicate %+v, want the batch at %d", dup, tc.dupAt)
			}
		})
	}
}

func TestProducerStateRemembersOnlyTheLastFiveBatches(t *testing.T) {
	s := newProducerState()
	for i := range int32(7) {
		s.apply(hdr(1, 0, i, 1, int64(i)))
	}
	if _, err := s.check(hdr(1, 0, 1, 1, 0)); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("a retry older than five batches: %v, want out of order", err)
	}
	if dup, _ := s.check(hdr(1, 0, 2, 1, 0)); dup == nil || dup.firstOffset != 2 {
		t.Fatalf("the fifth-newest batch is not recognised: %+v", dup)
	}
}

func TestProducerSequenceWrapsFromMaxInt32ToZero(t *testing.T) {
	s := newProducerState()
	s.apply(hdr(1, 0, math.MaxInt32-1, 2, 0)) // sequences MaxInt32-1 and MaxInt32
	if _, err := s.check(hdr(1, 0, 0, 1, 2)); err != nil {
		t.Fatalf("sequence 0 after MaxInt32: %v", err)
	}
	if h := hdr(1, 0, math.MaxInt32, 3, 0); h.lastSequence() != 1 {
		t.Fatalf("last sequence of 3 records from MaxInt32 is %d, want 1", h.lastSequence())
	}
}

func TestProducerSnapshotRoundTrips(t *testing.T) {
	s := newProducerState()
	s.apply(hdr(1, 3, 0, 2, 10))
	s.apply(hdr(9, 0, 5, 1, 12))
	cp := checkpoint{offset: 13, segBase: 10, segEpoch: 2, pos: 400}
	gotCp, got, err := decodeSnapshot(encodeSnapshot(cp, s))
	if err != nil || gotCp != cp || !reflect.DeepEqual(got.m, s.m) {
		t.Fatalf("round trip: %v %+v %+v", err, gotCp, got.m)
	}
	b := encodeSnapshot(cp, s)
	b[20] ^= 1
	if _, _, err := decodeSnapshot(b); err == nil {
		t.Fatal("a damaged snapshot decoded")
	}
}

func TestIdempotentRetryGetsTheOriginalOffsetAndAppendsNothing(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(2, 1)), AcksAll)
	first := mustAppend(t, l, makeBatch(idem(7, 0, 0, 3)), AcksAll)
	retry := mustAppend(t, l, makeBatch(idem(7, 0, 0, 3)), AcksAll)
	if !retry.Duplicate || retry.BaseOffset != first.BaseOffset || retry.LastOffset != first.LastOffset {
		t.Fatalf("retry %+v, first %+v", retry, first)
	}
	if off, _ := l.Offsets(); off.LogEnd != 5 {
		t.Fatalf("log end %d after a duplicate, want 5", off.LogEnd)
	}
	if _, err := l.Append(context.Background(), makeBatch(idem(7, 0, 9, 1)), AcksAll); !isErr(err, ErrOutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	mustAppend(t, l, makeBatch(idem(7, 1, 0, 1)), AcksAll) // epoch bump
	if _, err := l.Append(context.Background(), makeBatch(idem(7, 0, 3, 1)), AcksAll); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale epoch: %v", err)
	}
	if off, _ := l.Offsets(); off.LogEnd != 6 {
		t.Fatalf("refused batches changed the log end: %d", off.LogEnd)
	}
}

func TestIdempotenceSurvivesTakeover(t *testing.T) {
	for _, how := range []string{"relinquish (snapshot)", "crash (rebuilt by scan)", "crash after rolls (snapshot + scan)"} {
		t.Run(how, func(t *testing.T) {
			dir := partitionDir(t)
			cfg := testConfig()
			if how == "crash after rolls (snapshot + scan)" {
				cfg.SegmentBytes = 300
			}
			l1 := openLog(t, dir, 1, cfg, Options{})
			var last AppendResult
			for i := range int32(8) {
				last = mustAppend(t, l1, makeBatch(idem(42, 2, i*2, 2)), AcksAll)
				mustAppend(t, l1, makeBatch(plain(1, byte(i))), AcksAll)
			}
			if how == "relinquish (snapshot)" {
				relinquish(t, l1)
			} else {
				crash(t, l1)
			}
			l2 := openLog(t, dir, 2, cfg, Options{})
			retry := mustAppend(t, l2, makeBatch(idem(42, 2, 14, 2)), AcksAll)
			if !retry.Duplicate || retry.BaseOffset != last.BaseOffset {
				t.Fatalf("retry after takeover: %+v, want the original at %d", retry, last.BaseOffset)
			}
			if _, err := l2.Append(context.Background(), makeBatch(idem(42, 2, 20, 1)), AcksAll); !isErr(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap after takeover: %v", err)
			}
			if _, err := l2.Append(context.Background(), makeBatch(idem(42, 1, 16, 1)), AcksAll); !isErr(err, ErrInvalidProducerEpoch) {
				t.Fatalf("stale epoch after takeover: %v", err)
			}
			next := mustAppend(t, l2, makeBatch(idem(42, 2, 16, 1)), AcksAll)
			if next.Duplicate || next.BaseOffset != 24 {
				t.Fatalf("next sequence after takeover: %+v", next)
			}
		})
	}
}

func TestExpiredProducerIsForgottenAtTakeover(t *testing.T) {
	dir := partitionDir(t)
	l1 := openLog(t, dir, 1, testConfig(), Options{})
	old := idem(5, 0, 0, 1)
	old.baseTs = testNow - 2*24*3600*1000 // two days ago
	mustAppend(t, l1, makeBatch(old), AcksAll)
	relinquish(t, l1)
	l2 := openLog(t, dir, 2, testConfig(), Options{})
	// Unknown again: any sequence is accepted, as after producer.id.expiration.ms in Apache.
	if res := mustAppend(t, l2, makeBatch(idem(5, 0, 40, 1)), AcksAll); res.Duplicate {
		t.Fatal("an expired producer's state survived")
	}
}
