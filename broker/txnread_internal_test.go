package broker

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/internal/recordbatch"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// Transactional Produce is not served yet, so these tests write transactional batches and
// markers through the partition's storage Log, and read them over the wire.

// txnLog is the storage Log of ds's partition, with helpers that append to it directly.
type txnLog struct {
	t   *testing.T
	log *storage.Log
	seq map[int64]int32
}

func servedLog(t *testing.T, ds *dataServer) *txnLog {
	t.Helper()
	ld := ds.parts.Leader(partitionKey{ds.id, 0})
	if ld == nil || ld.log == nil {
		t.Fatal("partition not led")
	}
	return &txnLog{t: t, log: ld.log, seq: map[int64]int32{}}
}

// plain appends a non-transactional batch of values stamped ts (0: now) and returns its base.
func (x *txnLog) plain(ts int64, values ...string) int64 {
	b := recordbatch.Plain(bytesOf(values)...)
	if ts != 0 {
		b.Timestamp = ts
	}
	return x.append(b.Bytes())
}

// txn appends producer pid's transactional batch of values stamped ts (0: now).
func (x *txnLog) txn(pid int64, ts int64, values ...string) int64 {
	b := recordbatch.Plain(bytesOf(values)...).Idempotent(pid, 0, x.seq[pid])
	b.Attributes = 0x10
	if ts != 0 {
		b.Timestamp = ts
	}
	x.seq[pid] += int32(len(values))
	return x.append(b.Bytes())
}

func (x *txnLog) marker(pid int64, commit bool) int64 {
	x.t.Helper()
	res, err := x.log.AppendMarker(context.Background(), storage.Marker{ProducerID: pid, ProducerEpoch: 0, Commit: commit, CoordinatorEpoch: 1, TimestampMs: time.Now().UnixMilli()}, storage.AcksAll)
	if err != nil {
		x.t.Fatalf("marker for %d: %v", pid, err)
	}
	return res.BaseOffset
}

func (x *txnLog) append(b []byte) int64 {
	x.t.Helper()
	res, err := x.log.Append(context.Background(), b, storage.AcksAll)
	if err != nil {
		x.t.Fatalf("append: %v", err)
	}
	return res.BaseOffset
}

func bytesOf(values []string) [][]byte {
	out := make([][]byte, len(values))
	for i, v := range values {
		out[i] = []byte(v)
	}
	return out
}

func fetchAt(ds *dataServer, offset int64, isolation int8) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.MinBytes, req.IsolationLevel = 16, -1, 1<<30, 1, isolation
	rt := kmsg.NewFetchRequestTopic()
	rt.TopicID = ds.id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func fetchPartition(t *testing.T, resp kmsg.Response) kmsg.FetchResponseTopicPartition {
	t.Helper()
	r := resp.(*kmsg.FetchResponse)
	if r.ErrorCode != 0 || len(r.Topics) != 1 || len(r.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer %+v", r)
	}
	return r.Topics[0].Partitions[0]
}

// baseOffsets are the base offsets of the stored batches in b.
func baseOffsets(t *testing.T, b []byte) []int64 {
	t.Helper()
	var out []int64
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		out = append(out, rb.FirstOffset)
		b = b[12+int(rb.Length):]
	}
	return out
}

// TestFetchReadCommittedStopsAtTheLSOAndNamesTheAbortedTransactions: isolation_level 1 gets
// the batches below the last stable offset and the aborted transaction among them; level 0
// gets everything below the high watermark with no list; both answer the LSO.
func TestFetchReadCommittedStopsAtTheLSOAndNamesTheAbortedTransactions(t *testing.T) {
	ds := startDataServer(t, nil, nil)
	x := servedLog(t, ds)
	x.plain(0, "a")          // 0
	x.txn(7, 0, "b", "c")    // 1-2
	x.marker(7, false)       // 3: abort
	x.plain(0, "d")          // 4
	open := x.txn(8, 0, "e") // 5: open
	x.plain(0, "f")          // 6
	c := dialKafka(t, ds.addr)

	p := fetchPartition(t, roundTrip(t, c, fetchAt(ds, 0, 1)))
	if p.ErrorCode != 0 || p.HighWatermark != 7 || p.LastStableOffset != open || len(p.AbortedTransactions) != 1 ||
		p.AbortedTransactions[0].ProducerID != 7 || p.AbortedTransactions[0].FirstOffset != 1 {
		t.Fatalf("read_committed: error %d HW %d LSO %d aborted %+v", p.ErrorCode, p.HighWatermark, p.LastStableOffset, p.AbortedTransactions)
	}
	if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, []int64{0, 1, 3, 4}) {
		t.Fatalf("read_committed batches at %v, want 0 1 3 4 (below the LSO %d)", got, open)
	}

	p = fetchPartition(t, roundTrip(t, c, fetchAt(ds, 0, 0)))
	if p.HighWatermark != 7 || p.LastStableOffset != open || p.AbortedTransactions != nil {
		t.Fatalf("read_uncommitted: HW %d LSO %d aborted %+v", p.HighWatermark, p.LastStableOffset, p.AbortedTransactions)
	}
	if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, []int64{0, 1, 3, 4, 5, 6}) {
		t.Fatalf("read_uncommitted batches at %v", got)
	}

	// At the LSO: nothing, an empty list, not null.
	p = fetchPartition(t, roundTrip(t, c, fetchAt(ds, open, 1)))
	if len(p.RecordBatches) != 0 || p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 || p.LastStableOffset != open {
		t.Fatalf("read_committed at the LSO: %d bytes, aborted %+v, LSO %d", len(p.RecordBatches), p.AbortedTransactions, p.LastStableOffset)
	}
	// After the aborted transaction: no entry for it.
	p = fetchPartition(t, roundTrip(t, c, fetchAt(ds, 4, 1)))
	if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, []int64{4}) || len(p.AbortedTransactions) != 0 {
		t.Fatalf("read_committed at 4: batches %v aborted %+v", got, p.AbortedTransactions)
	}
}

// TestAReadCommittedLongPollWakesWhenTheLSOMoves: a READ_COMMITTED fetch waiting at the LSO
// is not answered by data appended above it, and is answered with the transaction's batches
// once its marker is durable, long before max_wait_ms.
func TestAReadCommittedLongPollWakesWhenTheLSOMoves(t *testing.T) {
	ds := startDataServer(t, nil, nil)
	x := servedLog(t, ds)
	open := x.txn(8, 0, "e") // 0: open
	c := dialKafka(t, ds.addr)
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute))
	req := fetchAt(ds, open, 1)
	req.MaxWaitMillis = 120000
	begun := ds.fetches.Load()
	start := time.Now()
	if _, err := c.Write(appendRequestFrame(nil, req, 7)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the fetch waiting", func() bool { return ds.fetches.Load() > begun })
	x.plain(0, "above the LSO") // 1: moves the high watermark, not the LSO
	commit := x.marker(8, true) // 2
	body, err := readResponseFrame(c, 7)
	if err != nil {
		t.Fatal(err)
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body[1:]); err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	p := fetchPartition(t, resp)
	if got := baseOffsets(t, p.RecordBatches); !slices.Equal(got, []int64{0, 1, commit}) || p.LastStableOffset != commit+1 || len(p.AbortedTransactions) != 0 || p.AbortedTransactions == nil {
		t.Fatalf("woken answer: batches %v LSO %d aborted %+v", got, p.LastStableOffset, p.AbortedTransactions)
	}
	if waited > 60*time.Second {
		t.Fatalf("answered after %s: want it woken by the marker, not by max_wait_ms (120s)", waited)
	}
}

// TestListOffsetsReadCommittedAnswersTheLSO: LATEST is the LSO under READ_COMMITTED and the
// high watermark otherwise; a timestamp lookup whose record is not below the LSO finds
// nothing under READ_COMMITTED.
func TestListOffsetsReadCommittedAnswersTheLSO(t *testing.T) {
	ds := startDataServer(t, nil, nil)
	x := servedLog(t, ds)
	base := time.Now().UnixMilli() - 60000
	x.plain(base, "a")               // 0
	open := x.txn(8, base+1000, "b") // 1: open
	x.plain(base+2000, "c")          // 2
	c := dialKafka(t, ds.addr)
	list := func(v int16, isolation int8, ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID, req.IsolationLevel = v, -1, isolation
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = "t"
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := roundTrip(t, c, req).(*kmsg.ListOffsetsResponse)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("v%d isolation %d ts %d: error %d", v, isolation, ts, p.ErrorCode)
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		v         int16
		isolation int8
		ts        int64
		want      int64
	}{
		{"latest, read_committed: the LSO", 8, 1, listLatest, open},
		{"latest, read_committed at v2", 2, 1, listLatest, open},
		{"latest, read_uncommitted: the high watermark", 8, 0, listLatest, 3},
		{"latest at v1 (no isolation): the high watermark", 1, 0, listLatest, 3},
		{"earliest, read_committed", 8, 1, listEarliest, 0},
		{"a timestamp below the LSO, read_committed", 8, 1, base, 0},
		{"a timestamp at the open transaction, read_committed: none", 8, 1, base + 1000, -1},
		{"a timestamp at the open transaction, read_uncommitted", 8, 0, base + 1000, open},
		{"max timestamp past the LSO, read_committed: none", 8, 1, listMaxTimestamp, -1},
		{"max timestamp, read_uncommitted", 8, 0, listMaxTimestamp, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.v, tc.isolation, tc.ts); got.Offset != tc.want {
				t.Fatalf("offset %d, want %d", got.Offset, tc.want)
			}
		})
	}
}
