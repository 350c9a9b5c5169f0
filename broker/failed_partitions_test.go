package broker_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/storage"
)

// TestABrokerAnnouncesThePartitionsItsStorageFailed: a partition whose files fail with EIO on
// its leader is announced as failed once (at its epoch) while the other partition serves on;
// taken over again there at the next epoch it fails again and is announced with two
// failures; moved away it serves elsewhere, and the broker keeps announcing it — so the
// assignment keeps it away — while it remembers (docs/storage.md, "A failed partition comes
// back").
func TestABrokerAnnouncesThePartitionsItsStorageFailed(t *testing.T) {
	faults := storage.NewFaults()
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, StorageFS: func(id int32) storage.FS {
		if id == 0 {
			return faults.FS(storage.OSFS{})
		}
		return storage.OSFS{}
	}})
	topic := c.CreateTopic("failing", 2, nil)
	c.Move("failing", 0, 0)
	c.Move("failing", 1, 0)
	c.WaitServed()
	id := v1alpha1.KafkaUUID(topic.ID).String()
	faults.Set(storage.FaultRule{PathContains: partitionPath(c, "failing", 0), Err: syscall.EIO})

	cl := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite(), kgo.RecordRetries(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "failing", Partition: 0, Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a produce into a partition whose files fail was acknowledged")
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "failing", Partition: 1, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatalf("the other partition: %v", err)
	}
	_, epoch := c.Leader("failing", 0)
	b0 := c.Broker(0).B
	waitFailed(t, b0, []v1alpha1.PartitionFailure{{TopicID: id, Partition: 0, Epoch: epoch, Failures: 1}})

	// Taken over again on the same broker, the takeover fails too.
	epoch = c.Move("failing", 0, 0)
	waitFailed(t, b0, []v1alpha1.PartitionFailure{{TopicID: id, Partition: 0, Epoch: epoch, Failures: 2}})

	// Moved away, it serves, and broker 0 still announces it.
	c.Move("failing", 0, 1)
	c.WaitServed()
	moved := c.Client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer moved.Close()
	if err := moved.ProduceSync(ctx, &kgo.Record{Topic: "failing", Partition: 0, Value: []byte("z")}).FirstErr(); err != nil {
		t.Fatalf("produce after the move: %v", err)
	}
	waitFailed(t, b0, []v1alpha1.PartitionFailure{{TopicID: id, Partition: 0, Epoch: epoch, Failures: 2}})
	if got := c.Broker(1).B.Failed(); len(got) != 0 {
		t.Fatalf("broker 1 announces %+v, want nothing", got)
	}
}

// partitionPath is the path substring of one partition's directory.
func partitionPath(c *brokertest.Cluster, topic string, partition int32) string {
	tp := c.Topic(topic)
	return storage.PartitionDir("", "", topic, tp.ID, partition) + "/"
}

func waitFailed(t *testing.T, b interface {
	Failed() []v1alpha1.PartitionFailure
}, want []v1alpha1.PartitionFailure) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := b.Failed()
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Failed() = %+v, want %+v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
