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

// TestAHungVolumeTurnsTheBrokerUnhealthy: every fsync of the volume hangs (a hard-mounted NFS
// whose server is gone). The partition's append fails at the I/O bound, the volume probe that
// follows is bounded too and fails, and the broker reports itself unhealthy — so its Lease
// says so and everything moves — instead of waiting forever; once the volume answers again the
// probe passes and it is healthy again.
func TestAHungVolumeTurnsTheBrokerUnhealthy(t *testing.T) {
	faults := storage.NewFaults()
	c := brokertest.Start(t, brokertest.Options{IOTimeout: 200 * time.Millisecond,
		StorageFS: func(int32) storage.FS { return faults.FS(storage.OSFS{}) }})
	c.CreateTopic("t", 1, nil)
	c.WaitServed()
	b := c.Broker(0).B
	if !b.Healthy() {
		t.Fatal("unhealthy before any fault")
	}
	faults.Set(storage.FaultRule{Ops: []storage.Op{storage.OpSync, storage.OpSyncDir}, Hang: true})
	t.Cleanup(faults.Clear)
	conn := brokertest.Dial(t, c.Addrs()[0])
	if p, _ := produceOne(t, conn, 10, "t", 0, brokertest.Plain([]byte("x")).Bytes()); p.ErrorCode != kerr.KafkaStorageError.Code && p.ErrorCode != kerr.RequestTimedOut.Code {
		code := p.ErrorCode
		t.Fatalf("produce on a hung volume: %s, want KAFKA_STORAGE_ERROR or REQUEST_TIMED_OUT", kerr.ErrorForCode(code))
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.Healthy() {
		if time.Now().After(deadline) {
			t.Fatal("the broker still says it is healthy with every fsync of its volume hanging")
		}
		time.Sleep(20 * time.Millisecond)
	}
	faults.Clear()
	deadline = time.Now().Add(20 * time.Second)
	for !b.Healthy() {
		if time.Now().After(deadline) {
			t.Fatal("the broker stays unhealthy after the volume answers again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
