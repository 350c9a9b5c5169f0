package broker_test

import (
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/storage"
)

// produceReq is a Produce request of version v with acks for one partition's batch.
func produceReq(v int16, acks int16, topic string, partition int32, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = v, acks, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// produceOne sends one batch and returns its partition answer and the whole response.
func produceOne(t *testing.T, c *brokertest.Conn, v int16, topic string, partition int32, batch []byte) (kmsg.ProduceResponseTopicPartition, *kmsg.ProduceResponse) {
	t.Helper()
	resp := c.Request(produceReq(v, -1, topic, partition, batch)).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce answer %+v: want one topic with one partition", resp)
	}
	return resp.Topics[0].Partitions[0], resp
}

// fetchReq is a Fetch request of version v for one partition from offset, answering at once
// unless maxWait is set.
func fetchReq(v int16, topic string, id [16]byte, partition int32, offset int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.ReplicaID, req.MaxBytes, req.MinBytes = v, -1, 1<<30, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, offset, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// fetchOne sends req and returns its only partition's answer.
func fetchOne(t *testing.T, c *brokertest.Conn, req *kmsg.FetchRequest) kmsg.FetchResponseTopicPartition {
	t.Helper()
	resp := c.Request(req).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch answer %+v: want one topic with one partition", resp)
	}
	return resp.Topics[0].Partitions[0]
}

// batches splits stored record batches (as Fetch returns them) into their headers.
func batches(t *testing.T, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) > 0 {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("record batch: %v", err)
		}
		out = append(out, rb)
		b = b[12+int(rb.Length):]
	}
	return out
}

// heldSyncs is a storage file system whose file syncs wait, while the test holds them, until it
// releases them: a stuck disk whose fsync returns only when the test says so.
type heldSyncs struct {
	mu   sync.Mutex
	gate chan struct{} // nil: syncs pass; open: they wait for its close
}

// hold makes every later sync wait until release.
func (s *heldSyncs) hold() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

// release lets the waiting and later syncs through.
func (s *heldSyncs) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
	s.mu.Unlock()
}

func (s *heldSyncs) fs(int32) storage.FS {
	return storage.FaultFS{FS: storage.OSFS{}, Fault: func(op storage.Op, _ string) error {
		if op == storage.OpSync {
			s.mu.Lock()
			gate := s.gate
			s.mu.Unlock()
			if gate != nil {
				<-gate
			}
		}
		return nil
	}}
}
