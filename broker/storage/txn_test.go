package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func txnal(pid int64, epoch int16, seq int32, records int) batchSpec {
	s := idem(pid, epoch, seq, records)
	s.codec = attrTransactional
	return s
}

func mustMarker(t testing.TB, l *Log, m Marker) AppendResult {
	t.Helper()
	res, err := l.AppendMarker(context.Background(), m, AcksAll)
	if err != nil {
		t.Fatalf("marker %+v: %v", m, err)
	}
	return res
}

func lso(l *Log) int64 { o, _ := l.LastStableOffset(); return o }

// TestMarkerIsApachesControlBatch checks the stored marker byte for byte against the batch
// franz-go's kmsg builds with Apache's control-record layout, and that kmsg decodes it back.
func TestMarkerIsApachesControlBatch(t *testing.T) {
	for _, commit := range []bool{false, true} {
		l := openLog(t, partitionDir(t), 3, testConfig(), Options{})
		mustAppend(t, l, makeBatch(plain(2, 1)), AcksAll)
		m := Marker{ProducerID: 77, ProducerEpoch: 4, Commit: commit, CoordinatorEpoch: 9, TimestampMs: 1700000000123}
		res := mustMarker(t, l, m)
		if res.BaseOffset != 2 || res.LastOffset != 2 {
			t.Fatalf("marker at %d-%d, want 2-2", res.BaseOffset, res.LastOffset)
		}
		rr, err := l.Read(2, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}

		typ := uint16(0)
		if commit {
			typ = 1
		}
		key := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 0), typ)
		val := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint16(nil, 0), 9)
		rec := kmsg.Record{Key: key, Value: val}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // AppendTo writes the length varint (0, one byte) first
		want := kmsg.RecordBatch{
			FirstOffset: 2, PartitionLeaderEpoch: 3, Magic: 2, Attributes: 0x30,
			FirstTimestamp: m.TimestampMs, MaxTimestamp: m.TimestampMs,
			ProducerID: 77, ProducerEpoch: 4, FirstSequence: -1, NumRecords: 1,
			Records: rec.AppendTo(nil),
		}
		wb := want.AppendTo(nil)
		binary.BigEndian.PutUint32(wb[offLength:], uint32(len(wb)-batchLogOverhead))
		binary.BigEndian.PutUint32(wb[offCRC:], crc32.Checksum(wb[offAttributes:], castagnoli))
		if !bytes.Equal(rr.Records, wb) {
			t.Fatalf("stored marker\n%x\nwant\n%x", rr.Records, wb)
		}

		var got kmsg.RecordBatch
		if err := got.ReadFrom(rr.Records); err != nil {
			t.Fatal(err)
		}
		if got.Attributes&0x20 == 0 || got.Attributes&0x10 == 0 || got.FirstSequence != -1 || got.ProducerID != 77 || got.ProducerEpoch != 4 || got.NumRecords != 1 {
			t.Fatalf("decoded header %+v", got)
		}
		var r kmsg.Record
		if err := r.ReadFrom(got.Records); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(r.Key, key) || !bytes.Equal(r.Value, val) {
			t.Fatalf("record key %x value %x, want %x %x", r.Key, r.Value, key, val)
		}
	}
}

// TestTransactionHoldsTheLastStableOffsetUntilItsMarker walks one transaction through the
// partition: it opens at its first transactional batch, holds the LSO there while others
// append, refuses the producer's non-transactional batch, and releases the LSO at its marker.
func TestTransactionHoldsTheLastStableOffsetUntilItsMarker(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(plain(3, 1)), AcksAll) // 0-2
	if got := lso(l); got != 3 {
		t.Fatalf("no transaction: LSO %d, want HW 3", got)
	}
	mustAppend(t, l, makeBatch(txnal(1, 0, 0, 2)), AcksAll) // 3-4 opens producer 1's transaction
	mustAppend(t, l, makeBatch(plain(1, 2)), AcksAll)       // 5
	mustAppend(t, l, makeBatch(txnal(1, 0, 2, 1)), AcksAll) // 6 same transaction
	if got := lso(l); got != 3 {
		t.Fatalf("open transaction at 3: LSO %d", got)
	}
	if _, err := l.Append(context.Background(), makeBatch(idem(1, 0, 3, 1)), AcksAll); !isErr(err, ErrInvalidTxnState) {
		t.Fatalf("non-transactional batch inside the transaction: %v, want ErrInvalidTxnState", err)
	}
	// A second producer's transaction opened later does not move the LSO past the first's.
	mustAppend(t, l, makeBatch(txnal(2, 5, 0, 1)), AcksAll) // 7
	if got := lso(l); got != 3 {
		t.Fatalf("two open transactions: LSO %d, want 3", got)
	}
	if _, err := l.AppendMarker(context.Background(), Marker{ProducerID: 1, ProducerEpoch: -1}, AcksAll); !isErr(err, ErrInvalidRecord) {
		t.Fatalf("negative epoch: %v", err)
	}
	mustMarker(t, l, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 2, TimestampMs: testNow}) // 8
	if got := lso(l); got != 7 {
		t.Fatalf("first committed, second open at 7: LSO %d", got)
	}
	// After its marker the producer writes non-transactionally again.
	mustAppend(t, l, makeBatch(idem(1, 0, 3, 1)), AcksAll)                                               // 9
	mustMarker(t, l, Marker{ProducerID: 2, ProducerEpoch: 5, CoordinatorEpoch: 2, TimestampMs: testNow}) // 10 abort
	o, _ := l.Offsets()
	if got := lso(l); got != o.HighWatermark || got != 11 {
		t.Fatalf("all decided: LSO %d, HW %d, want 11", got, o.HighWatermark)
	}
}

// TestMarkerEpochRules: Apache's appendEndTxnMarker checks, and a marker with nothing open.
func TestMarkerEpochRules(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(txnal(1, 3, 0, 1)), AcksAll)
	mustMarker(t, l, Marker{ProducerID: 1, ProducerEpoch: 3, Commit: true, CoordinatorEpoch: 5, TimestampMs: testNow})
	o0, _ := l.Offsets()
	if _, err := l.AppendMarker(context.Background(), Marker{ProducerID: 1, ProducerEpoch: 2, CoordinatorEpoch: 5}, AcksAll); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("stale producer epoch: %v", err)
	}
	if _, err := l.AppendMarker(context.Background(), Marker{ProducerID: 1, ProducerEpoch: 3, CoordinatorEpoch: 4}, AcksAll); !isErr(err, ErrTransactionCoordinatorFenced) {
		t.Fatalf("stale coordinator epoch: %v", err)
	}
	if o, _ := l.Offsets(); o.LogEnd != o0.LogEnd {
		t.Fatalf("a refused marker was written: log end %d, was %d", o.LogEnd, o0.LogEnd)
	}
	// No open transaction, and a producer unknown here: both written; the epoch is recorded.
	mustMarker(t, l, Marker{ProducerID: 1, ProducerEpoch: 4, CoordinatorEpoch: 5, TimestampMs: testNow})
	mustMarker(t, l, Marker{ProducerID: 9, ProducerEpoch: 7, CoordinatorEpoch: 1, TimestampMs: testNow})
	if _, err := l.Append(context.Background(), makeBatch(idem(1, 3, 1, 1)), AcksAll); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("batch at the epoch before the marker's: %v", err)
	}
	if _, err := l.Append(context.Background(), makeBatch(idem(9, 6, 0, 1)), AcksAll); !isErr(err, ErrInvalidProducerEpoch) {
		t.Fatalf("unknown producer's marker did not record its epoch: %v", err)
	}
	if _, err := l.Append(context.Background(), makeBatch(txnal(-1, -1, -1, 1)), AcksAll); !isErr(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without a producer id: %v", err)
	}
}

// TestOpenTransactionSurvivesTakeover: the open transaction, and the coordinator epoch, come
// back after a relinquish (from the snapshot), after a crash (the new leader recovers from
// the log, the old one still running), and with every snapshot removed (a full scan).
func TestOpenTransactionSurvivesTakeover(t *testing.T) {
	for _, how := range []string{"relinquish", "crash", "no snapshot"} {
		t.Run(how, func(t *testing.T) {
			dir := partitionDir(t)
			cfg := testConfig()
			cfg.SegmentBytes = 1024 // several segments, so snapshots at rolls too
			l1 := openLog(t, dir, 1, cfg, Options{})
			for i := range 10 {
				mustAppend(t, l1, makeBatch(plain(2, byte(i))), AcksAll)
			}
			mustAppend(t, l1, makeBatch(txnal(1, 0, 0, 1)), AcksAll) // producer 1, committed
			mustMarker(t, l1, Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 6, TimestampMs: testNow})
			first := mustAppend(t, l1, makeBatch(txnal(2, 0, 0, 2)), AcksAll).BaseOffset
			for i := range 10 {
				mustAppend(t, l1, makeBatch(plain(2, byte(i))), AcksAll)
			}
			mustAppend(t, l1, makeBatch(txnal(2, 0, 2, 1)), AcksAll)
			switch how {
			case "relinquish":
				if err := l1.Relinquish(context.Background()); err != nil {
					t.Fatal(err)
				}
			case "no snapshot":
				if err := l1.Relinquish(context.Background()); err != nil {
					t.Fatal(err)
				}
				ents, _ := os.ReadDir(dir)
				n := 0
				for _, e := range ents {
					if strings.HasSuffix(e.Name(), ".snapshot") {
						n++
						if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
							t.Fatal(err)
						}
					}
				}
				if n == 0 {
					t.Fatal("no snapshot was written to remove")
				}
			}
			l2 := openLog(t, dir, 2, cfg, Options{})
			if got := lso(l2); got != first {
				t.Fatalf("after takeover LSO %d, want the open transaction's first offset %d", got, first)
			}
			if _, err := l2.Append(context.Background(), makeBatch(idem(2, 0, 3, 1)), AcksAll); !isErr(err, ErrInvalidTxnState) {
				t.Fatalf("non-transactional batch in the recovered transaction: %v", err)
			}
			if _, err := l2.AppendMarker(context.Background(), Marker{ProducerID: 1, ProducerEpoch: 0, CoordinatorEpoch: 5}, AcksAll); !isErr(err, ErrTransactionCoordinatorFenced) {
				t.Fatalf("coordinator epoch not recovered: %v", err)
			}
			mustMarker(t, l2, Marker{ProducerID: 2, ProducerEpoch: 0, CoordinatorEpoch: 6, TimestampMs: testNow})
			o, _ := l2.Offsets()
			if got := lso(l2); got != o.HighWatermark {
				t.Fatalf("after the marker LSO %d, HW %d", got, o.HighWatermark)
			}
		})
	}
}

// TestSnapshotV1StillReads: a snapshot written before transactions decodes, with no
// transaction open; a v2 snapshot (before the aborted-transaction index) decodes with no
// aborted transaction; the current version round-trips the transaction fields.
func TestSnapshotV1StillReads(t *testing.T) {
	s := newProducerState()
	s.apply(hdr(1, 3, 0, 2, 10))
	s.apply(hdr(1, 3, 2, 1, 12))
	cp := checkpoint{offset: 20, segBase: 0, segEpoch: 1, pos: 500}
	v3 := encodeSnapshot(cp, s)
	// Version 02: the same without the aborted-transaction count (no entries here).
	v2 := append([]byte(nil), v3[:len(v3)-4-4]...)
	copy(v2, snapshotMagicV2)
	// Version 01: also without the 20 transaction bytes per producer.
	v1 := append([]byte(nil), v2[:len(v2)-snapshotTxnSize]...)
	copy(v1, snapshotMagicV1)
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	v2 = binary.BigEndian.AppendUint32(v2, crc32.Checksum(v2, castagnoli))
	gotCP, got, err := decodeSnapshot(v1)
	if err != nil {
		t.Fatal(err)
	}
	e := got.m[1]
	if gotCP != cp || e == nil || e.epoch != 3 || len(e.batches) != 2 || e.txnFirst != -1 || e.coordEpoch != -1 || e.lastTs != testNow {
		t.Fatalf("v1 decoded %+v %+v", gotCP, e)
	}
	gotCP, got, err = decodeSnapshot(v2)
	if err != nil {
		t.Fatal(err)
	}
	if e := got.m[1]; gotCP != cp || e == nil || len(e.batches) != 2 || e.txnFirst != -1 || e.lastTs != testNow || len(got.aborted) != 0 {
		t.Fatalf("v2 decoded %+v %+v %v", gotCP, e, got.aborted)
	}

	th := hdr(2, 1, 0, 1, 15)
	th.Attributes = attrTransactional
	s.apply(th)
	s.m[1].coordEpoch = 8
	_, got, err = decodeSnapshot(encodeSnapshot(cp, s))
	if err != nil {
		t.Fatal(err)
	}
	if got.m[2].txnFirst != 15 || got.m[1].coordEpoch != 8 || got.m[1].txnFirst != -1 {
		t.Fatalf("v2 round trip: %+v %+v", got.m[1], got.m[2])
	}
	// A transaction starting at or past the checkpoint is not believed.
	cp.offset = 15
	s.m[1].batches = s.m[1].batches[:1]
	if _, _, err := decodeSnapshot(encodeSnapshot(cp, s)); !isErr(err, errBadSnapshot) {
		t.Fatalf("transaction outside the log: %v", err)
	}
}

// TestOpenTransactionIsNotExpired: producer.id.expiration.ms never forgets a producer whose
// transaction is open (it holds the LSO).
func TestOpenTransactionIsNotExpired(t *testing.T) {
	s := newProducerState()
	th := hdr(1, 0, 0, 1, 4)
	th.Attributes = attrTransactional
	s.apply(th)
	s.apply(hdr(2, 0, 0, 1, 5))
	s.expire(testNow+1000, 10)
	if s.m[1] == nil || s.m[2] != nil {
		t.Fatalf("expire kept %v", s.m)
	}
}

// TestDeposedLeadersMarkerIsNeverAcknowledged: two leaders write markers and batches at
// once; once the newer claim exists, nothing the old one writes is acknowledged, and every
// acknowledged marker of either is in the new leader's log, where the LSO is consistent with
// the transactions it holds.
func TestDeposedLeadersMarkerIsNeverAcknowledged(t *testing.T) {
	for seed := range uint64(4) {
		dir := partitionDir(t)
		l1 := openLog(t, dir, 1, testConfig(), Options{})
		var mu sync.Mutex
		acked := map[int64]bool{} // marker offsets acknowledged, by either leader
		var afterClaim []int64    // old leader's acks that completed after the claim
		claimed := false
		var wg sync.WaitGroup
		writer := func(l *Log, pid int64, old bool) {
			rng := rand.New(rand.NewPCG(seed, uint64(pid)))
			seq := int32(0)
			for n := 0; old || n < 30; n++ { // the old leader writes until it is refused
				if old && n > 100000 {
					t.Errorf("seed %d: the deposed leader was never refused", seed)
					return
				}
				if _, err := l.Append(context.Background(), makeBatch(txnal(pid, 0, seq, 1)), AcksAll); err != nil {
					return
				}
				seq++
				mu.Lock()
				claimedBefore := claimed
				mu.Unlock()
				res, err := l.AppendMarker(context.Background(), Marker{ProducerID: pid, ProducerEpoch: 0, Commit: rng.IntN(2) == 0, CoordinatorEpoch: 1, TimestampMs: testNow}, Acks([]int16{1, -1}[n%2]))
				mu.Lock()
				if err == nil {
					acked[res.BaseOffset] = true
					if old && claimedBefore {
						afterClaim = append(afterClaim, res.BaseOffset)
					}
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}
		for p := range 2 {
			wg.Go(func() { writer(l1, int64(p+1), true) })
		}
		l2, err := Open(dir, testConfig(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.Takeover(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		claimed = true
		mu.Unlock()
		wg.Go(func() { writer(l2, 3, false) })
		wg.Wait()
		if len(afterClaim) > 0 {
			t.Fatalf("seed %d: deposed leader's markers at %v acknowledged after the newer claim", seed, afterClaim)
		}
		o, _ := l2.Offsets()
		found := map[int64]bool{}
		for off := o.LogStart; off < o.HighWatermark; {
			rr, err := l2.Read(off, 1<<20, true)
			if err != nil {
				t.Fatal(err)
			}
			for b := rr.Records; len(b) >= batchHeaderSize; {
				h := parseHeader(b)
				if h.Attributes&attrControl != 0 {
					found[h.BaseOffset] = true
				}
				b = b[h.size():]
				off = h.nextOffset()
			}
		}
		for off := range acked {
			if !found[off] {
				t.Fatalf("seed %d: acknowledged marker at %d not in the new leader's log", seed, off)
			}
		}
		if got := lso(l2); got > o.HighWatermark {
			t.Fatalf("LSO %d above HW %d", got, o.HighWatermark)
		}
		// The deposed leader's late writes never enter the new leader's aborted-transaction
		// index: it is the one its own log says, and the next leader recovers the same.
		want := walkIndex(t, l2)
		if len(want) == 0 {
			t.Fatalf("seed %d: no aborted transaction to compare", seed) // the new leader alone aborts ~15 of 30
		}
		if got := abortedIndex(l2); !slices.Equal(got, want) {
			t.Fatalf("seed %d: the new leader's aborted index\n%+v\nits log says\n%+v", seed, got, want)
		}
		relinquish(t, l2)
		l3 := openLog(t, dir, 3, testConfig(), Options{})
		if got := abortedIndex(l3); !slices.Equal(got, want) {
			t.Fatalf("seed %d: the next leader's aborted index\n%+v\nwant\n%+v", seed, got, want)
		}
		_ = l2.Relinquish(context.Background())
	}
}

// TestDecidedTransactionHoldsTheLSOUntilItsMarkerIsDurable: a marker written but not yet
// fsynced and fence-checked may still be lost (a crash, a newer leader), and then the
// transaction is open again; until the high watermark passes the marker the LSO stays at
// the transaction's first offset (Apache's unreplicated transactions).
func TestDecidedTransactionHoldsTheLSOUntilItsMarkerIsDurable(t *testing.T) {
	var block atomic.Bool
	release := make(chan struct{})
	fsys := FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op == OpSync && strings.HasSuffix(path, segmentSuffix) && block.Load() {
			<-release
		}
		return nil
	}}
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{FS: fsys})
	mustAppend(t, l, makeBatch(plain(2, 1)), AcksAll)
	first := mustAppend(t, l, makeBatch(txnal(1, 0, 0, 2)), AcksAll).BaseOffset
	block.Store(true)
	res, err := l.AppendMarker(context.Background(), Marker{ProducerID: 1, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 1, TimestampMs: testNow}, AcksNone)
	if err != nil {
		t.Fatal(err)
	}
	if got := lso(l); got != first {
		t.Fatalf("marker at %d not durable: LSO %d, want %d", res.BaseOffset, got, first)
	}
	block.Store(false)
	close(release)
	for {
		o, ch := l.LastStableOffset()
		if o == res.BaseOffset+1 {
			break
		}
		<-ch
	}
}

// TestLSONeverBelowTheLogStart: DeleteRecords past an open transaction's first offset moves
// the LSO with the log start.
func TestLSONeverBelowTheLogStart(t *testing.T) {
	l := openLog(t, partitionDir(t), 1, testConfig(), Options{})
	mustAppend(t, l, makeBatch(txnal(1, 0, 0, 2)), AcksAll) // 0-1, open
	mustAppend(t, l, makeBatch(plain(3, 1)), AcksAll)       // 2-4
	if got := lso(l); got != 0 {
		t.Fatalf("LSO %d, want 0", got)
	}
	if _, err := l.DeleteRecords(context.Background(), 3); err != nil {
		t.Fatal(err)
	}
	if got := lso(l); got != 3 {
		t.Fatalf("after DeleteRecords to 3: LSO %d, want 3", got)
	}
}
