package broker_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/storage"
)

// TestAHungFsyncFailsTheGroupStoreAndTheProducerIDAllocatorInsteadOfHangingThem: on an NFS
// hard mount a call to an unreachable server blocks forever. Every fsync under the groups and
// producer-ids directories is held; an OffsetCommit and an InitProducerId are answered —
// NOT_COORDINATOR and KAFKA_STORAGE_ERROR, nothing acknowledged — while the fsyncs are still
// held, because the broker bounds each call (Broker.IOTimeout) as it does for partition logs.
func TestAHungFsyncFailsTheGroupStoreAndTheProducerIDAllocatorInsteadOfHangingThem(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int64
	hung := storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, path string) error {
		if (op == storage.OpSync || op == storage.OpSyncDir) && (strings.Contains(path, "/groups") || strings.Contains(path, "/producer-ids")) {
			held.Add(1)
			<-release
		}
		return nil
	}}
	c := brokertest.Start(t, brokertest.Options{IOTimeout: 200 * time.Millisecond, StorageFS: func(int32) storage.FS { return hung }})
	var released atomic.Bool
	stop := time.AfterFunc(30*time.Second, func() { released.Store(true); close(release) }) // a broker without the bound would never answer
	t.Cleanup(func() {
		if stop.Stop() {
			close(release)
		}
	})
	c.CreateTopic("t", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "g", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset = 0, 10
	rt.Partitions = append(rt.Partitions, rp)
	commit.Topics = append(commit.Topics, rt)
	var code int16
	for range 100 { // until the coordinator has loaded (its first answers are retriable)
		code = conn.Request(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		if code != kerr.CoordinatorLoadInProgress.Code && code != kerr.CoordinatorNotAvailable.Code {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if released.Load() || code != kerr.NotCoordinator.Code {
		t.Fatalf("OffsetCommit with its fsync held: %s (answered after the hang was released: %v), want NOT_COORDINATOR while it is held", kerr.ErrorForCode(code), released.Load())
	}

	pid := conn.Request(kmsg.NewPtrInitProducerIDRequest()).(*kmsg.InitProducerIDResponse)
	if released.Load() || pid.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("InitProducerId with its fsync held: %+v (answered after the hang was released: %v), want KAFKA_STORAGE_ERROR while it is held", pid, released.Load())
	}
	t.Logf("%d fsyncs held, both answered while held", held.Load())
}
