package broker_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// TestTheOffsetsTopicAnswersReadCommittedLikeReadUncommitted: __consumer_offsets (the offsets
// topic view) holds no transactions, so a READ_COMMITTED Fetch gets the same records, its LSO
// is its high watermark, and its aborted list is empty, not null.
func TestTheOffsetsTopicAnswersReadCommittedLikeReadUncommitted(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{})
	c.CreateTopic("orders", 1, nil)
	ctx := testkit.Context(t)
	group := "committed-reader"
	offsets := kadm.Offsets{}
	offsets.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 0, LeaderEpoch: -1})
	if _, err := kadm.NewClient(newClient(t, c.Addrs()[0])).CommitOffsets(ctx, group, offsets); err != nil {
		t.Fatal(err)
	}
	conn := brokertest.Dial(t, c.Addrs()[0])
	req := fetchReq(12, "__consumer_offsets", [16]byte{}, coordinator.Partition(group, coordinator.DefaultPartitions), 0)
	uncommitted := fetchOne(t, conn, req)
	req.IsolationLevel = 1
	committed := fetchOne(t, conn, req)
	if committed.ErrorCode != 0 || len(committed.RecordBatches) == 0 || string(committed.RecordBatches) != string(uncommitted.RecordBatches) {
		t.Fatalf("read_committed: error %d, %d bytes; read_uncommitted %d bytes", committed.ErrorCode, len(committed.RecordBatches), len(uncommitted.RecordBatches))
	}
	if committed.LastStableOffset != committed.HighWatermark || committed.AbortedTransactions == nil || len(committed.AbortedTransactions) != 0 {
		t.Fatalf("read_committed: HW %d LSO %d aborted %+v", committed.HighWatermark, committed.LastStableOffset, committed.AbortedTransactions)
	}
	if uncommitted.AbortedTransactions != nil || uncommitted.LastStableOffset != uncommitted.HighWatermark {
		t.Fatalf("read_uncommitted: HW %d LSO %d aborted %+v", uncommitted.HighWatermark, uncommitted.LastStableOffset, uncommitted.AbortedTransactions)
	}
}
