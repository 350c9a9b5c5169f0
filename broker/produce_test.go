package broker_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// TestKgoIdempotentProducerReadsBackByteExact: an idempotent acks=all kgo producer writes to
// several partitions on two brokers with every codec; a kgo consumer reads every record
// back — key, value, headers, timestamp and partition order exactly as written.
func TestKgoIdempotentProducerReadsBackByteExact(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	for _, codec := range []struct {
		name string
		c    kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"gzip", kgo.GzipCompression()}, {"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		t.Run(codec.name, func(t *testing.T) {
			topic := "exact-" + codec.name
			c.CreateTopic(topic, 4, nil)
			p := c.Client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(codec.c))
			ctx := testkit.Context(t)
			rng := rand.New(rand.NewPCG(1, 2))
			var sent []*kgo.Record
			for i := range 400 {
				value := make([]byte, rng.IntN(2048))
				for j := range value {
					value[j] = byte(rng.IntN(8)) // compressible, so the codecs do work
				}
				r := &kgo.Record{
					Key:       []byte(fmt.Sprintf("key-%d", i%37)),
					Value:     value,
					Headers:   []kgo.RecordHeader{{Key: "n", Value: []byte(fmt.Sprint(i))}},
					Timestamp: time.UnixMilli(1_700_000_000_000 + int64(i)),
				}
				sent = append(sent, r)
			}
			if err := p.ProduceSync(ctx, sent...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			got := consumeAll(t, c, topic, len(sent))
			byPartition := map[int32][]*kgo.Record{}
			for _, r := range sent {
				byPartition[r.Partition] = append(byPartition[r.Partition], r)
			}
			if len(byPartition) < 2 {
				t.Fatalf("records landed on %d partitions, want several", len(byPartition))
			}
			for part, want := range byPartition {
				have := got[part]
				if len(have) != len(want) {
					t.Fatalf("partition %d: read %d records, want %d", part, len(have), len(want))
				}
				for i := range want {
					w, h := want[i], have[i]
					if !bytes.Equal(w.Key, h.Key) || !bytes.Equal(w.Value, h.Value) || !slices.EqualFunc(w.Headers, h.Headers, func(a, b kgo.RecordHeader) bool {
						return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
					}) || !w.Timestamp.Equal(h.Timestamp) || w.Offset != h.Offset {
						t.Fatalf("partition %d record %d: read %+v, want %+v", part, i, h, w)
					}
				}
			}
		})
	}
}

// consumeAll reads n records of topic from the start with a kgo consumer, by partition in
// offset order.
func consumeAll(t *testing.T, c *brokertest.Cluster, topic string, n int) map[int32][]*kgo.Record {
	t.Helper()
	cons := c.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx := testkit.Context(t)
	out := map[int32][]*kgo.Record{}
	for got := 0; got < n; {
		fs := cons.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume after %d of %d records: %v", got, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	return out
}

// TestProduceRefusals pins every per-partition refusal of Produce to its Kafka error code,
// one raw request each.
func TestProduceRefusals(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 2, nil)
	c.CreateTopic("small", 1, map[string]string{"max.message.bytes": "1000"})
	c.CreateTopic("tiny-segments", 1, map[string]string{"segment.bytes": "200"})
	c.CreateTopic("bounded", 1, map[string]string{"message.timestamp.before.max.ms": "60000", "message.timestamp.after.max.ms": "60000"})
	stamped := func(offset time.Duration) []byte {
		b := brokertest.Plain([]byte("v"))
		b.Timestamp = time.Now().Add(offset).UnixMilli()
		return b.Bytes()
	}
	here, _ := c.Leader("t", 0)
	conn := brokertest.Dial(t, c.Addrs()[here])
	good := brokertest.Plain([]byte("v")).Bytes()
	twoBatches := append(slices.Clone(good), good...)
	badCRC := slices.Clone(good)
	badCRC[len(badCRC)-1] ^= 0xff
	v1Message := brokertest.Batch{Values: [][]byte{[]byte("v")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Magic: 1}.Bytes()
	zstdBatch := brokertest.Batch{Values: [][]byte{[]byte("zzz")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Zstd: true}.Bytes()
	transactional := brokertest.Batch{Values: [][]byte{[]byte("v")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0x10}.Bytes()
	control := brokertest.Batch{Values: [][]byte{[]byte("v")}, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Attributes: 0x20}.Bytes()
	pidNoSeq := brokertest.Plain([]byte("v")).Idempotent(5, 0, -1).Bytes()
	large := brokertest.Plain(bytes.Repeat([]byte("x"), 2000)).Bytes()

	for _, tt := range []struct {
		name      string
		v         int16
		acks      int16
		topic     string
		partition int32
		records   []byte
		want      *kerr.Error
	}{
		{"an unknown topic", 10, -1, "nope", 0, good, kerr.UnknownTopicOrPartition},
		{"an unknown partition index", 10, -1, "t", 9, good, kerr.UnknownTopicOrPartition},
		{"no records at all", 10, -1, "t", 0, nil, kerr.InvalidRecord},
		{"an old message format (magic 1)", 10, -1, "t", 0, v1Message, kerr.InvalidRecord},
		{"two batches for one partition", 10, -1, "t", 0, twoBatches, kerr.InvalidRecord},
		{"zstd before Produce v7", 6, -1, "t", 0, zstdBatch, kerr.UnsupportedCompressionType},
		{"a transactional batch without a producer id", 10, -1, "t", 0, transactional, kerr.InvalidRecord},
		{"a control batch from a client", 10, -1, "t", 0, control, kerr.InvalidRecord},
		{"a producer id without a sequence", 10, -1, "t", 0, pidNoSeq, kerr.InvalidRecord},
		{"a bad CRC", 10, -1, "t", 0, badCRC, kerr.CorruptMessage},
		{"a batch above max.message.bytes", 10, -1, "small", 0, large, kerr.MessageTooLarge},
		{"a batch above segment.bytes", 10, -1, "tiny-segments", 0, large, kerr.RecordListTooLarge},
		{"acks=2", 10, 2, "t", 0, good, kerr.InvalidRequiredAcks},
		{"acks=-2", 3, -2, "t", 0, good, kerr.InvalidRequiredAcks},
		{"a timestamp further in the past than message.timestamp.before.max.ms", 10, -1, "bounded", 0, stamped(-10 * time.Minute), kerr.InvalidTimestamp},
		{"a timestamp further ahead than message.timestamp.after.max.ms", 10, -1, "bounded", 0, stamped(10 * time.Minute), kerr.InvalidTimestamp},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := conn
			if tt.topic == "small" || tt.topic == "bounded" || tt.topic == "tiny-segments" {
				leader, _ := c.Leader(tt.topic, 0)
				conn = brokertest.Dial(t, c.Addrs()[leader])
			}
			resp := conn.Request(produceReq(tt.v, tt.acks, tt.topic, tt.partition, tt.records)).(*kmsg.ProduceResponse)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != tt.want.Code || p.BaseOffset != -1 {
				t.Fatalf("error %d, base offset %d; want %s (%d) and -1", p.ErrorCode, p.BaseOffset, tt.want.Message, tt.want.Code)
			}
			if tt.v >= 8 && (p.ErrorMessage == nil || *p.ErrorMessage == "") {
				t.Errorf("v%d answer without an error message", tt.v)
			}
		})
	}

	t.Run("a timestamp within the bounds is stored", func(t *testing.T) {
		leader, _ := c.Leader("bounded", 0)
		if p, _ := produceOne(t, brokertest.Dial(t, c.Addrs()[leader]), 10, "bounded", 0, stamped(-30*time.Second)); p.ErrorCode != 0 {
			t.Fatalf("error %d", p.ErrorCode)
		}
	})
	t.Run("zstd from Produce v7 on is stored", func(t *testing.T) {
		p, _ := produceOne(t, conn, 7, "t", 0, zstdBatch)
		if p.ErrorCode != 0 {
			t.Fatalf("error %d", p.ErrorCode)
		}
	})
	t.Run("every requested partition gets an entry, in request order", func(t *testing.T) {
		req := produceReq(10, -1, "t", 0, brokertest.Plain([]byte("a")).Bytes())
		for _, part := range []int32{9, 1, 0} {
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = part, brokertest.Plain([]byte("b")).Bytes()
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
		}
		other := kmsg.NewProduceRequestTopic()
		other.Topic = "nope"
		other.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
		req.Topics = append(req.Topics, other)
		resp := conn.Request(req).(*kmsg.ProduceResponse)
		var got []string
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				got = append(got, fmt.Sprintf("%s/%d:%d", rt.Topic, rp.Partition, rp.ErrorCode))
			}
		}
		notLeader, _ := c.Leader("t", 1)
		code1 := int16(0)
		if notLeader != here {
			code1 = kerr.NotLeaderForPartition.Code
		}
		want := []string{"t/0:0", "t/9:3", fmt.Sprintf("t/1:%d", code1), "t/0:0", "nope/0:3"}
		if !slices.Equal(got, want) {
			t.Fatalf("answers %v, want %v", got, want)
		}
	})
}

// TestProduceToANonLeaderCarriesKIP951HintsFromV10 pins KIP-951: Produce v10 answers
// NOT_LEADER_OR_FOLLOWER with the current leader and its endpoint; v9 answers without them.
func TestProduceToANonLeaderCarriesKIP951HintsFromV10(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 1, nil)
	leader, epoch := c.Leader("t", 0)
	other := 1 - leader
	conn := brokertest.Dial(t, c.Addrs()[other])

	p, resp := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("v")).Bytes())
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != leader || p.CurrentLeader.LeaderEpoch != epoch {
		t.Fatalf("v10 answer %+v: want NOT_LEADER_OR_FOLLOWER naming broker %d at epoch %d", p, leader, epoch)
	}
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != leader || fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port) != c.Addrs()[leader] {
		t.Fatalf("v10 NodeEndpoints %+v: want the leader at %s", resp.Brokers, c.Addrs()[leader])
	}

	p, resp = produceOne(t, conn, 9, "t", 0, brokertest.Plain([]byte("v")).Bytes())
	if p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != -1 || len(resp.Brokers) != 0 {
		t.Fatalf("v9 answer %+v brokers %+v: want NOT_LEADER_OR_FOLLOWER without hints", p, resp.Brokers)
	}
}

// TestProduceAnswers pins what a successful answer carries: offsets in order, the log-start
// offset (v5+), -1 append time for CreateTime topics and the broker's time for LogAppendTime
// ones, which the stored batch carries too.
func TestProduceAnswers(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	c.CreateTopic("create", 1, nil)
	c.CreateTopic("append", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	conn := brokertest.Dial(t, c.Addrs()[0])

	for i, want := range []int64{0, 2, 5} {
		values := make([][]byte, i+2)
		for j := range values {
			values[j] = []byte("v")
		}
		p, _ := produceOne(t, conn, 10, "create", 0, brokertest.Plain(values...).Bytes())
		if p.ErrorCode != 0 || p.BaseOffset != want || p.LogAppendTime != -1 || p.LogStartOffset != 0 {
			t.Fatalf("batch %d: %+v; want base offset %d, append time -1, log start 0", i, p, want)
		}
	}
	before := time.Now().UnixMilli()
	p, _ := produceOne(t, conn, 10, "append", 0, brokertest.Plain([]byte("v")).Bytes())
	if p.ErrorCode != 0 || p.LogAppendTime < before || p.LogAppendTime > time.Now().UnixMilli() {
		t.Fatalf("LogAppendTime answer %+v, want the broker's time (≥ %d)", p, before)
	}
	tp := c.Topic("append")
	f := fetchOne(t, conn, fetchReq(16, "append", tp.ID, 0, 0))
	bs := batches(t, f.RecordBatches)
	if len(bs) != 1 || bs[0].Attributes&0x08 == 0 || bs[0].MaxTimestamp != p.LogAppendTime {
		t.Fatalf("stored batch %+v: want the LogAppendTime bit and maxTimestamp %d", bs, p.LogAppendTime)
	}
}

// TestAcksZeroGetsNoAnswerAndAFailureClosesTheConnection: acks=0 is answered by nothing; when
// one of its partitions fails, the broker closes the connection (as Apache), the only way
// such a producer learns.
func TestAcksZeroGetsNoAnswerAndAFailureClosesTheConnection(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	tp := c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	if _, err := conn.Send(produceReq(10, 0, "t", 0, brokertest.Plain([]byte("fire and forget")).Bytes())); err != nil {
		t.Fatal(err)
	}
	// The next answer on the connection is the Fetch's: the acks=0 Produce got none. (The
	// fetch waits for the record to become durable: acks=0 returns once written.)
	req := fetchReq(16, "t", tp.ID, 0, 0)
	req.MaxWaitMillis = 10000
	f := fetchOne(t, conn, req)
	if bs := batches(t, f.RecordBatches); len(bs) != 1 || f.HighWatermark != 1 {
		t.Fatalf("fetch after acks=0: %d batches, high watermark %d; want the one record", len(bs), f.HighWatermark)
	}
	if _, err := conn.Send(produceReq(10, 0, "nope", 0, brokertest.Plain([]byte("lost")).Bytes())); err != nil {
		t.Fatal(err)
	}
	if !conn.Closed(5 * time.Second) {
		t.Fatal("connection still open after a failed acks=0 produce")
	}
}

// TestIdempotenceRulesOnTheWire: a retry of one of a producer's last five batches gets its
// original offset back (nothing appended); a gap → OUT_OF_ORDER_SEQUENCE_NUMBER; an older
// producer epoch → INVALID_PRODUCER_EPOCH.
func TestIdempotenceRulesOnTheWire(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	b := brokertest.Plain([]byte("a"), []byte("b"))
	first := b.Idempotent(42, 3, 0).Bytes()
	p, _ := produceOne(t, conn, 10, "t", 0, slices.Clone(first))
	if p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("first batch: %+v", p)
	}
	if p, _ := produceOne(t, conn, 10, "t", 0, b.Idempotent(42, 3, 2).Bytes()); p.ErrorCode != 0 || p.BaseOffset != 2 {
		t.Fatalf("next batch: %+v", p)
	}
	if p, _ := produceOne(t, conn, 10, "t", 0, slices.Clone(first)); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("retry of the first batch: %+v, want its original offset 0", p)
	}
	if p, _ := produceOne(t, conn, 10, "t", 0, b.Idempotent(42, 3, 9).Bytes()); p.ErrorCode != kerr.OutOfOrderSequenceNumber.Code {
		t.Fatalf("sequence gap: %+v, want OUT_OF_ORDER_SEQUENCE_NUMBER", p)
	}
	if p, _ := produceOne(t, conn, 10, "t", 0, b.Idempotent(42, 2, 4).Bytes()); p.ErrorCode != kerr.InvalidProducerEpoch.Code {
		t.Fatalf("older epoch: %+v, want INVALID_PRODUCER_EPOCH", p)
	}
	if p, _ := produceOne(t, conn, 10, "t", 0, b.Idempotent(42, 3, 4).Bytes()); p.ErrorCode != 0 || p.BaseOffset != 4 {
		t.Fatalf("in-sequence batch after the refusals: %+v, want offset 4", p)
	}
}

// TestIdempotentRetryAcrossATakeoverGetsTheOriginalOffset: the producer state survives the
// partition moving to another broker, so a retry sent to the new leader is recognised.
func TestIdempotentRetryAcrossATakeoverGetsTheOriginalOffset(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	c.CreateTopic("t", 1, nil)
	from, _ := c.Leader("t", 0)
	batch := brokertest.Plain([]byte("once")).Idempotent(7, 0, 0).Bytes()
	conn := brokertest.Dial(t, c.Addrs()[from])
	for range 3 { // some data before, so the offset is not trivially 0
		if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("x")).Bytes()); p.ErrorCode != 0 {
			t.Fatal(p)
		}
	}
	p, _ := produceOne(t, conn, 10, "t", 0, slices.Clone(batch))
	if p.ErrorCode != 0 || p.BaseOffset != 3 {
		t.Fatalf("original: %+v", p)
	}
	c.Move("t", 0, 1-from)
	c.WaitServed()
	to := brokertest.Dial(t, c.Addrs()[1-from])
	retry, _ := produceOne(t, to, 10, "t", 0, slices.Clone(batch))
	if retry.ErrorCode != 0 || retry.BaseOffset != 3 {
		t.Fatalf("retry on the new leader: %+v, want the original offset 3", retry)
	}
	f := fetchOne(t, to, fetchReq(16, "t", c.Topic("t").ID, 0, 0))
	if f.HighWatermark != 4 {
		t.Fatalf("high watermark %d after the retry, want 4 (nothing appended twice)", f.HighWatermark)
	}
}

// TestProduceTimeoutAnswersRequestTimedOut: an acks=-1 append whose fsync takes longer than
// the request's timeout is answered REQUEST_TIMED_OUT (it may still become durable). The
// fsync is held until the answer has come, so the answer cannot have waited for it.
func TestProduceTimeoutAnswersRequestTimedOut(t *testing.T) {
	var held heldSyncs
	c := brokertest.Start(t, brokertest.Options{StorageFS: held.fs})
	c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	held.hold()
	defer held.release()
	req := produceReq(10, -1, "t", 0, brokertest.Plain([]byte("slow")).Bytes())
	req.TimeoutMillis = 200
	start := time.Now()
	resp := conn.Request(req).(*kmsg.ProduceResponse)
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != kerr.RequestTimedOut.Code {
		t.Fatalf("answer %+v after %s, want REQUEST_TIMED_OUT", p, time.Since(start))
	}
	t.Logf("answered REQUEST_TIMED_OUT after %s (timeout 200ms) with the fsync still held", time.Since(start))
}

// TestInitProducerID pins InitProducerId's answers.
func TestInitProducerID(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	str := func(s string) *string { return &s }
	seen := map[int64]bool{}
	for i := range 6 {
		conn := brokertest.Dial(t, c.Addrs()[i%2])
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version = int16(i % 5)
		resp := conn.Request(req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || resp.ProducerID < 0 || seen[resp.ProducerID] {
			t.Fatalf("v%d idempotent: %+v; want a new producer id, epoch 0 (seen %v)", req.Version, resp, seen)
		}
		seen[resp.ProducerID] = true
	}
	conn := brokertest.Dial(t, c.Addrs()[0])
	for _, tt := range []struct {
		name    string
		txn     *string
		timeout int32
		pid     int64
		epoch   int16
		want    *kerr.Error
	}{
		{"a producer id without an epoch", nil, 60000, 5, -1, kerr.InvalidRequest},
		{"an epoch without a producer id", nil, 60000, -1, 3, kerr.InvalidRequest},
		{"an empty transactional id", str(""), 60000, -1, -1, kerr.InvalidRequest},
		{"a transaction timeout of 0", str("tx"), 0, -1, -1, kerr.InvalidTransactionTimeout},
		{"a transaction timeout above 15 minutes", str("tx"), 900001, -1, -1, kerr.InvalidTransactionTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version = 4
			req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = tt.txn, tt.timeout, tt.pid, tt.epoch
			resp := conn.Request(req).(*kmsg.InitProducerIDResponse)
			if resp.ErrorCode != tt.want.Code || resp.ProducerID != -1 || resp.ProducerEpoch != -1 {
				t.Fatalf("%+v, want %s with producer id and epoch -1", resp, tt.want.Message)
			}
		})
	}
	t.Run("an idempotent producer naming its old id gets a new one", func(t *testing.T) {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.Version, req.ProducerID, req.ProducerEpoch = 3, 1, 0
		resp := conn.Request(req).(*kmsg.InitProducerIDResponse)
		if resp.ErrorCode != 0 || resp.ProducerEpoch != 0 || seen[resp.ProducerID] {
			t.Fatalf("%+v", resp)
		}
	})
	t.Run("ids are claimed in blocks on the shared volume", func(t *testing.T) {
		entries, err := os.ReadDir(filepath.Join(c.DataDir, brokertest.ClusterID, "producer-ids"))
		if err != nil || len(entries) != 2 {
			t.Fatalf("producer-id blocks %v (%v): want one claimed by each broker", entries, err)
		}
	})
}
