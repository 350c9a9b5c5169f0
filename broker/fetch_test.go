package broker_test

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// TestFetchLongPollWakesOnTheNextAppend: a fetch waiting for min_bytes answers as soon as an
// append becomes durable, long before max_wait_ms.
func TestFetchLongPollWakesOnTheNextAppend(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	tp := c.CreateTopic("t", 1, nil)
	fetcher := brokertest.Dial(t, c.Addrs()[0])
	req := fetchReq(16, "t", tp.ID, 0, 0)
	req.MaxWaitMillis = 120000
	start := time.Now()
	corr, err := fetcher.Send(req)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	producer := brokertest.Dial(t, c.Addrs()[0])
	if p, _ := produceOne(t, producer, 10, "t", 0, brokertest.Plain([]byte("wake up")).Bytes()); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	resp, err := fetcher.Read(req, corr)
	if err != nil {
		t.Fatal(err)
	}
	p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	waited := time.Since(start)
	if p.ErrorCode != 0 || len(batches(t, p.RecordBatches)) != 1 || p.HighWatermark != 1 {
		t.Fatalf("answer %+v, want the one batch", p)
	}
	// Woken by the append, not by max_wait_ms: any bound far below the two minutes tells them
	// apart on a loaded machine.
	if waited < 300*time.Millisecond || waited > 60*time.Second {
		t.Fatalf("answered after %s: want it woken by the append at ~300ms, not by max_wait_ms (120s)", waited)
	}
	t.Logf("woken %s after the fetch was sent (the append came at 300ms)", waited)
}

// TestFetchRecordsAreEmptyNotNull: a partition without data, or with an error, answers an
// empty record set (length 0), never a null one, at every version (librdkafka rejects null:
// "invalid MessageSetSize -1").
func TestFetchRecordsAreEmptyNotNull(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	tp := c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	for _, v := range []int16{4, 11, 12, 16} {
		for _, partition := range []int32{0, 7} {
			p := fetchOne(t, conn, fetchReq(v, "t", tp.ID, partition, 0))
			if p.RecordBatches == nil {
				t.Errorf("Fetch v%d, partition %d (error %d): null records, want an empty record set", v, partition, p.ErrorCode)
			}
		}
	}
}

// TestFetchLongPollEndsAtMaxWait: with nothing to read the answer comes at max_wait_ms, empty.
func TestFetchLongPollEndsAtMaxWait(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	tp := c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	req := fetchReq(16, "t", tp.ID, 0, 0)
	req.MaxWaitMillis = 400
	start := time.Now()
	p := fetchOne(t, conn, req)
	// Never before max_wait_ms; the upper bound only catches a wait that never ends.
	if waited := time.Since(start); waited < 400*time.Millisecond || waited > testkit.Deadline {
		t.Fatalf("answered after %s, want max_wait_ms 400ms", waited)
	} else {
		t.Logf("max_wait_ms 400ms answered after %s", waited)
	}
	if p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 || p.LastStableOffset != 0 || p.LogStartOffset != 0 {
		t.Fatalf("answer %+v: want no records, offsets 0", p)
	}
	// max_wait_ms 0 answers without waiting for data, which never comes here: a fetch that
	// waited anyway would hold the answer past any bound.
	req.MaxWaitMillis = 0
	start = time.Now()
	fetchOne(t, conn, req)
	if waited := time.Since(start); waited > testkit.Deadline {
		t.Fatalf("max_wait_ms 0 answered after %s, want at once", waited)
	} else {
		t.Logf("max_wait_ms 0 answered after %s", waited)
	}
}

// TestFetchSizeLimits pins the size rules: each partition at most partition_max_bytes, the
// answer at most max_bytes, except the first partition with data, which returns its first
// batch whole; a later partition whose first batch does not fit returns nothing.
func TestFetchSizeLimits(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1})
	tp := c.CreateTopic("t", 2, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	value := bytes.Repeat([]byte("x"), 1000)
	batchSize := len(brokertest.Plain(value).Bytes())
	for part := range int32(2) {
		for range 3 {
			if p, _ := produceOne(t, conn, 10, "t", part, brokertest.Plain(value).Bytes()); p.ErrorCode != 0 {
				t.Fatal(p)
			}
		}
	}
	fetch := func(maxBytes, partitionMax int32) []int {
		req := fetchReq(16, "t", tp.ID, 0, 0)
		req.MaxBytes = maxBytes
		req.Topics[0].Partitions[0].PartitionMaxBytes = partitionMax
		rp := req.Topics[0].Partitions[0]
		rp.Partition = 1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		resp := conn.Request(req).(*kmsg.FetchResponse)
		var n []int
		for _, p := range resp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			n = append(n, len(batches(t, p.RecordBatches)))
		}
		return n
	}
	for _, tt := range []struct {
		name                   string
		maxBytes, partitionMax int32
		want                   []int
	}{
		{"no limit that bites", 1 << 20, 1 << 20, []int{3, 3}},
		{"partition_max_bytes of two batches", 1 << 20, int32(2*batchSize + 10), []int{2, 2}},
		{"max_bytes of four batches", int32(4*batchSize + 10), 1 << 20, []int{3, 1}},
		{"max_bytes 1: the first batch whole, nothing else", 1, 1 << 20, []int{1, 0}},
		{"partition_max_bytes 1: the first partition's first batch only", 1 << 20, 1, []int{1, 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := fetch(tt.maxBytes, tt.partitionMax); !slices.Equal(got, tt.want) {
				t.Fatalf("batches per partition %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFetchPartitionAnswers pins the per-partition errors and offsets of Fetch.
func TestFetchPartitionAnswers(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	tp := c.CreateTopic("t", 2, nil)
	leader, epoch := c.Leader("t", 0)
	conn := brokertest.Dial(t, c.Addrs()[leader])
	for range 2 {
		if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("a"), []byte("b")).Bytes()); p.ErrorCode != 0 {
			t.Fatal(p)
		}
	}
	zstd := c.CreateTopic("z", 1, nil)
	zleader, _ := c.Leader("z", 0)
	zconn := brokertest.Dial(t, c.Addrs()[zleader])
	if p, _ := produceOne(t, zconn, 10, "z", 0, brokertest.Batch{Values: [][]byte{[]byte("z")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Zstd: true}.Bytes()); p.ErrorCode != 0 {
		t.Fatal(p)
	}
	const otherPart = 1
	if l, _ := c.Leader("t", otherPart); l == leader {
		t.Fatalf("the balancer put both partitions on broker %d; this test needs one on each", l)
	}

	type want struct {
		code       *kerr.Error
		hw, lso    int64
		logStart   int64
		batches    int
		hintLeader int32
	}
	ok := func(hw int64, n int) want { return want{hw: hw, lso: hw, batches: n, hintLeader: -1} }
	fail := func(e *kerr.Error) want { return want{code: e, hw: -1, lso: -1, logStart: -1, hintLeader: -1} }
	withHint := func(w want, leader int32) want { w.hintLeader = leader; return w }
	for _, tt := range []struct {
		name string
		conn *brokertest.Conn
		req  *kmsg.FetchRequest
		want want
	}{
		{"from the start", conn, fetchReq(16, "t", tp.ID, 0, 0), ok(4, 2)},
		{"from the middle of a batch: the whole batch", conn, fetchReq(16, "t", tp.ID, 0, 3), ok(4, 1)},
		{"at the high watermark: nothing, no error", conn, fetchReq(16, "t", tp.ID, 0, 4), ok(4, 0)},
		{"past the log end", conn, fetchReq(16, "t", tp.ID, 0, 5), fail(kerr.OffsetOutOfRange)},
		{"below the log start", conn, fetchReq(16, "t", tp.ID, 0, -1), fail(kerr.OffsetOutOfRange)},
		{"an unknown partition", conn, withPartition(fetchReq(16, "t", tp.ID, 0, 0), 7), fail(kerr.UnknownTopicOrPartition)},
		{"an unknown topic id (v13+)", conn, fetchReq(13, "", [16]byte{1}, 0, 0), fail(kerr.UnknownTopicID)},
		{"an unknown topic name (v12)", conn, fetchReq(12, "nope", [16]byte{}, 0, 0), fail(kerr.UnknownTopicOrPartition)},
		{"by name (v12)", conn, fetchReq(12, "t", [16]byte{}, 0, 0), ok(4, 2)},
		{"an older current leader epoch", conn, withEpoch(fetchReq(16, "t", tp.ID, 0, 0), epoch-1), withHint(fail(kerr.FencedLeaderEpoch), leader)},
		{"a newer current leader epoch", conn, withEpoch(fetchReq(16, "t", tp.ID, 0, 0), epoch+1), fail(kerr.UnknownLeaderEpoch)},
		{"the current leader epoch", conn, withEpoch(fetchReq(16, "t", tp.ID, 0, 0), epoch), ok(4, 2)},
		{"zstd to Fetch v9", zconn, fetchReq(9, "z", zstd.ID, 0, 0), fail(kerr.UnsupportedCompressionType)},
		{"zstd to Fetch v10", zconn, fetchReq(10, "z", zstd.ID, 0, 0), ok(1, 1)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := fetchOne(t, tt.conn, tt.req)
			w := tt.want
			code := int16(0)
			if w.code != nil {
				code = w.code.Code
			}
			if p.ErrorCode != code || p.HighWatermark != w.hw || p.LastStableOffset != w.lso || p.LogStartOffset != w.logStart ||
				len(batches(t, p.RecordBatches)) != w.batches || p.CurrentLeader.LeaderID != w.hintLeader {
				t.Fatalf("answer %+v (%d batches), want %+v", p, len(batches(t, p.RecordBatches)), w)
			}
		})
	}
	{
		other, otherEpoch := c.Leader("t", otherPart)
		t.Run("not the leader: v16 names it", func(t *testing.T) {
			resp := conn.Request(fetchReq(16, "t", tp.ID, otherPart, 0)).(*kmsg.FetchResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != other || p.CurrentLeader.LeaderEpoch != otherEpoch ||
				len(resp.Brokers) != 1 || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != c.Addrs()[other] {
				t.Fatalf("answer %+v, brokers %+v: want NOT_LEADER_OR_FOLLOWER naming broker %d", p, resp.Brokers, other)
			}
		})
		t.Run("not the leader: v15 has no hint", func(t *testing.T) {
			resp := conn.Request(fetchReq(15, "t", tp.ID, otherPart, 0)).(*kmsg.FetchResponse)
			if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 || len(resp.Brokers) != 0 {
				t.Fatalf("answer %+v, brokers %+v: want NOT_LEADER_OR_FOLLOWER without hints", p, resp.Brokers)
			}
		})
	}
	t.Run("sessions: a full fetch gets session id 0, an incremental one FETCH_SESSION_ID_NOT_FOUND", func(t *testing.T) {
		req := fetchReq(16, "t", tp.ID, 0, 0)
		req.SessionID, req.SessionEpoch = 0, 0
		if resp := conn.Request(req).(*kmsg.FetchResponse); resp.ErrorCode != 0 || resp.SessionID != 0 {
			t.Fatalf("full fetch: error %d session %d", resp.ErrorCode, resp.SessionID)
		}
		req.SessionID, req.SessionEpoch = 5, 1
		if resp := conn.Request(req).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code || len(resp.Topics) != 0 {
			t.Fatalf("incremental fetch: %+v", resp)
		}
	})
	t.Run("isolation: aborted transactions are an empty list under read_committed, null otherwise", func(t *testing.T) {
		req := fetchReq(16, "t", tp.ID, 0, 0)
		if p := fetchOne(t, conn, req); p.AbortedTransactions != nil {
			t.Fatalf("read_uncommitted: %v", p.AbortedTransactions)
		}
		req.IsolationLevel = 1
		if p := fetchOne(t, conn, req); p.AbortedTransactions == nil || len(p.AbortedTransactions) != 0 || p.LastStableOffset != 4 {
			t.Fatalf("read_committed: %+v", p)
		}
	})
}

// withPartition sets the partition index of req's only partition.
func withPartition(req *kmsg.FetchRequest, p int32) *kmsg.FetchRequest {
	req.Topics[0].Partitions[0].Partition = p
	return req
}

// withEpoch sets the current leader epoch of req's only partition.
func withEpoch(req *kmsg.FetchRequest, e int32) *kmsg.FetchRequest {
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = e
	return req
}
