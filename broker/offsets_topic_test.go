package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// A reader of __consumer_offsets decoding Apache's schemas (key v1, value v3) sees every
// commit a kgo group makes, at increasing offsets, before and after the group's coordinator
// moves (a drain), ends with exactly the offsets OffsetFetch gives, and reads a tombstone
// when an offset is deleted.
func TestAnOffsetsTopicReaderSeesEveryCommitThroughACoordinatorMove(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 3, GroupConfig: fastGroups})
	c.CreateTopic("orders", 4, nil)
	ctx := testkit.Context(t)
	var recs []*kgo.Record
	for i := range 400 {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, "%d", i), Partition: int32(i % 4)})
	}
	if err := c.Client(kgo.DefaultProduceTopic("orders"), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// A group whose coordinator is not broker 0 (the test's admin clients' first seed), so
	// draining it moves the group and the reader follows its partition to a new leader.
	var group string
	var co int32
	for i := 0; co == 0; i++ {
		group = fmt.Sprintf("offsets-reader-%d", i)
		co, _ = coordinator.Pick(group, coordinator.DefaultPartitions, []int32{0, 1, 2}, []int32{0, 1, 2})
	}

	reader := startOffsetsReader(t, ctx, c.Client(kgo.ConsumeTopics("__consumer_offsets"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond)))

	consumer := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100*time.Millisecond), kgo.FetchMaxPartitionBytes(200))
	var acked []offsetCommit
	consumed := 0
	drained := false
	for consumed < len(recs) {
		fs := consumer.PollRecords(ctx, 10)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", consumed, len(recs), err)
		}
		consumed += fs.NumRecords()
		var offsets map[string]map[int32]kgo.EpochOffset
		err := retryCommit(ctx, func() error {
			var err error
			offsets, err = commitUncommitted(ctx, consumer)
			return err
		})
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
		for p, eo := range offsets["orders"] {
			acked = append(acked, offsetCommit{group, "orders", p, eo.Offset})
		}
		if !drained && consumed >= len(recs)/2 {
			t.Logf("draining broker %d, the group's coordinator, after %d commits", co, len(acked))
			c.Drain(co)
			drained = true
		}
		time.Sleep(20 * time.Millisecond) // commits apart, as a consumer's are
	}

	// Every acknowledged commit is read, and the reader ends where OffsetFetch ends.
	adm := kadm.NewClient(newClient(t, c.Addrs()[0])) // broker 0 is still up
	fetched, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	want := map[offsetCommit]bool{}
	fetched.Each(func(o kadm.OffsetResponse) { want[offsetCommit{group, o.Topic, o.Partition, o.At}] = true })
	reader.waitFor(t, "the group's final offsets", func(latest map[offsetKeyT]int64, _ map[offsetCommit]bool) bool {
		for k := range want {
			if latest[offsetKeyT{k.group, k.topic, k.partition}] != k.offset {
				return false
			}
		}
		return true
	})
	reader.mu.Lock()
	for _, a := range acked {
		if !reader.seen[a] {
			t.Errorf("commit %+v acknowledged but never read from __consumer_offsets", a)
		}
	}
	t.Logf("%d commits acknowledged, %d records read", len(acked), reader.records)
	if reader.rewinds != 0 {
		t.Errorf("%d records came at an offset at or below one read before: offsets went back across the move", reader.rewinds)
	}
	reader.mu.Unlock()

	// Deleting an offset of the (now Empty) group is a tombstone.
	consumer.Close()
	deleted := kadm.TopicsSet{}
	deleted.Add("orders", 2)
	if _, err := adm.DeleteOffsets(ctx, group, deleted); err != nil {
		t.Fatal(err)
	}
	reader.waitFor(t, "a tombstone for orders/2", func(latest map[offsetKeyT]int64, _ map[offsetCommit]bool) bool {
		v, ok := latest[offsetKeyT{group, "orders", 2}]
		return ok && v == -1
	})
}

type offsetCommit struct {
	group, topic string
	partition    int32
	offset       int64
}

type offsetKeyT struct {
	group, topic string
	partition    int32
}

// offsetsReader consumes __consumer_offsets in the background and decodes every record with
// Apache's offsets-topic schemas, as a lag exporter does.
type offsetsReader struct {
	mu      sync.Mutex
	cond    *sync.Cond
	latest  map[offsetKeyT]int64 // -1 after a tombstone
	seen    map[offsetCommit]bool
	records int
	rewinds int
	err     error
}

func startOffsetsReader(t *testing.T, ctx context.Context, cl *kgo.Client) *offsetsReader {
	r := &offsetsReader{latest: map[offsetKeyT]int64{}, seen: map[offsetCommit]bool{}}
	r.cond = sync.NewCond(&r.mu)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		last := map[int32]int64{}
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			r.mu.Lock()
			fs.EachRecord(func(rec *kgo.Record) {
				r.records++
				if prev, ok := last[rec.Partition]; ok && rec.Offset <= prev {
					r.rewinds++
				}
				last[rec.Partition] = rec.Offset
				k, err := decodeOffsetKey(rec.Key)
				if err != nil {
					r.err = err
					return
				}
				if rec.Value == nil {
					r.latest[k] = -1
					return
				}
				off, err := decodeOffsetValue(rec.Value)
				if err != nil {
					r.err = err
					return
				}
				r.latest[k] = off
				r.seen[offsetCommit{k.group, k.topic, k.partition, off}] = true
			})
			r.cond.Broadcast()
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *offsetsReader) waitFor(t *testing.T, what string, cond func(map[offsetKeyT]int64, map[offsetCommit]bool) bool) {
	t.Helper()
	testkit.Eventually(t, what, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.err != nil {
			t.Fatalf("decoding __consumer_offsets: %v", r.err)
		}
		return cond(r.latest, r.seen)
	})
}

// decodeOffsetKey reads Apache's OffsetCommitKey (versions 0 and 1: group, topic, partition).
func decodeOffsetKey(b []byte) (offsetKeyT, error) {
	var k offsetKeyT
	d := decoder{b: b}
	if v := d.int16(); v != 0 && v != 1 {
		return k, fmt.Errorf("key version %d is no offset commit key", v)
	}
	k.group, k.topic, k.partition = d.string(), d.string(), d.int32()
	return k, d.done()
}

// decodeOffsetValue reads Apache's OffsetCommitValue v3 (offset, leader epoch, metadata,
// commit timestamp) and returns the offset.
func decodeOffsetValue(b []byte) (int64, error) {
	d := decoder{b: b}
	if v := d.int16(); v != 3 {
		return 0, fmt.Errorf("value version %d, want 3", v)
	}
	off := d.int64()
	_ = d.int32() // leader epoch
	_ = d.string()
	if ts := d.int64(); ts <= 0 && d.err == nil {
		return 0, fmt.Errorf("commit timestamp %d", ts)
	}
	return off, d.done()
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errors.New("record too short")
		return make([]byte, n)
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) int16() int16   { return int16(binary.BigEndian.Uint16(d.take(2))) }
func (d *decoder) int32() int32   { return int32(binary.BigEndian.Uint32(d.take(4))) }
func (d *decoder) int64() int64   { return int64(binary.BigEndian.Uint64(d.take(8))) }
func (d *decoder) string() string { return string(d.take(int(d.int16()))) }
func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		return fmt.Errorf("%d bytes left over", len(d.b))
	}
	return d.err
}

// commitUncommitted commits what the consumer has polled and returns the offsets the
// coordinator acknowledged.
func commitUncommitted(ctx context.Context, cl *kgo.Client) (map[string]map[int32]kgo.EpochOffset, error) {
	uncommitted := cl.UncommittedOffsets()
	if len(uncommitted) == 0 {
		return nil, nil
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, uncommitted, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			commitErr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && commitErr == nil {
					commitErr = fmt.Errorf("%s/%d: error %d", t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if commitErr != nil {
		return nil, commitErr
	}
	return uncommitted, nil
}

// retryCommit retries a commit refused while the group moves (kgo rejoins meanwhile).
func retryCommit(ctx context.Context, commit func() error) error {
	var err error
	for range 100 {
		if err = commit(); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
