package broker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
)

// TestABrokerAnnouncesACompactedPartitionItsCleanerCannotClean: one batch with more keys than
// the smallest offset map holds (1 MiB: 39,321 keys) makes its compacted partition
// uncleanable, and the broker announces it for its Lease with the cause; the other partition
// is not named. Raising log.cleaner.dedupe.buffer.size retries it at once, and the
// announcement goes when that pass succeeds (docs/compaction.md, "When a partition cannot be
// cleaned").
func TestABrokerAnnouncesACompactedPartitionItsCleanerCannotClean(t *testing.T) {
	small := map[string]string{"log.cleaner.dedupe.buffer.size": "1048576", "log.cleaner.backoff.ms": "50"}
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, ClusterConfig: small})
	topic := c.CreateTopic("changelog", 2, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576",
		"min.cleanable.dirty.ratio": "0.01"})
	id := v1alpha1.KafkaUUID(topic.ID).String()
	b := c.Broker(0).B

	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(time.Minute), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.MaxBufferedRecords(2*40_000),
		kgo.ProducerBatchMaxBytes(4<<20)) // kgo sizes a batch by its records' largest encoding: one batch
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const keys = 40_000 // more than 1 MiB / 24 bytes × 90 %
	errs := make(chan error, keys)
	for i := range keys {
		cl.Produce(ctx, &kgo.Record{Topic: "changelog", Partition: 0, Key: fmt.Appendf(nil, "k%05d", i), Value: []byte("v")},
			func(_ *kgo.Record, err error) { errs <- err })
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for range keys {
		if err := <-errs; err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// A record that does not fit beside the big batch closes its segment (segment.bytes
	// 1 MiB); the other partition gets a record too.
	for _, r := range []*kgo.Record{
		{Topic: "changelog", Partition: 0, Key: []byte("k00000"), Value: make([]byte, 512<<10)},
		{Topic: "changelog", Partition: 1, Key: []byte("a"), Value: []byte("b")},
	} {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	want := []v1alpha1.UncleanablePartition{{TopicID: id, Partition: 0, Cause: v1alpha1.CauseOffsetMapTooSmall}}
	waitUncleanable(t, b, want, "the big batch's partition to be announced")

	c.SetClusterConfig(map[string]string{"log.cleaner.dedupe.buffer.size": "4194304", "log.cleaner.backoff.ms": "50"})
	waitUncleanable(t, b, nil, "the retry with a larger map to clean it")
}

func waitUncleanable(t *testing.T, b interface {
	Uncleanable() []v1alpha1.UncleanablePartition
}, want []v1alpha1.UncleanablePartition, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := b.Uncleanable()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: Uncleanable() = %+v, want %+v", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
