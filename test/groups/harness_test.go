package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

var (
	testCtx    = testkit.Context
	eventually = testkit.Eventually
)

// cluster is one test's KafkaCluster with its in-process brokers.
type cluster struct{ *kubebrokers.Cluster }

// initialRebalanceDelay is the brokers' group.initial.rebalance.delay: short, so each
// test's first rebalance does not wait Apache's 3 s.
const initialRebalanceDelay = 200 * time.Millisecond

// newCluster starts n brokers and waits until each one's group coordinator serves (it has
// seen a coordinator epoch).
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{kubebrokers.NewCluster(t, n, kubebrokers.Options{Namespace: "groups", DrainTimeout: 20 * time.Second,
		GroupConfig: func(cfg *groups.Config) { cfg.InitialRebalanceDelay = initialRebalanceDelay }})}
	ctx := testCtx(t)
	for id := range n {
		cl := c.Kgo(kgo.SeedBrokers(c.Addrs[id]))
		eventually(t, fmt.Sprintf("broker %d's group coordinator", id), func() bool {
			req := kmsg.NewPtrListGroupsRequest()
			resp, err := cl.SeedBrokers()[0].Request(ctx, req)
			return err == nil && resp.(*kmsg.ListGroupsResponse).ErrorCode == 0
		})
	}
	return c
}

// createTopic creates topic with partitions through the admin API and waits until every
// broker serves every partition with a leader.
func (c *cluster) createTopic(topic string, partitions int32) {
	c.T.Helper()
	ctx := testCtx(c.T)
	resp, err := kadm.NewClient(c.Kgo()).CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		c.T.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	for id := range c.Addrs {
		eventually(c.T, fmt.Sprintf("broker %d to lead every partition of %s", id, topic), func() bool {
			mt := c.MetadataOn(ctx, id, topic).Topics[0]
			if mt.ErrorCode != 0 || len(mt.Partitions) != int(partitions) {
				return false
			}
			for _, p := range mt.Partitions {
				if p.ErrorCode != 0 || p.Leader < 0 {
					return false
				}
			}
			return true
		})
	}
}

// produce writes perPartition records to each of topic's partitions, value "<p>-<i>".
func (c *cluster) produce(topic string, partitions int32, perPartition int) {
	c.T.Helper()
	ctx := testCtx(c.T)
	var recs []*kgo.Record
	for i := range perPartition {
		for p := range partitions {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprintf("%d-%d", p, i))})
		}
	}
	cl := c.Kgo(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		c.T.Fatalf("produce to %s: %v", topic, err)
	}
	cl.Close()
}

// committed is the group's committed offset of each of topic's partitions (partitions
// without a commit left out), read with kadm.
func (c *cluster) committed(group, topic string) map[int32]int64 {
	c.T.Helper()
	ctx := testCtx(c.T)
	adm := kadm.NewClient(c.Kgo())
	out := map[int32]int64{}
	var resp kadm.OffsetResponses
	eventually(c.T, "the committed offsets of "+group, func() bool {
		var err error
		resp, err = adm.FetchOffsets(ctx, group)
		return err == nil && resp.Error() == nil
	})
	for p, o := range resp[topic] {
		if o.At >= 0 {
			out[p] = o.At
		}
	}
	return out
}

// consumed is one record as a client read it.
type consumed struct {
	partition int32
	offset    int64
	value     string
}

// checkResumed checks the second consumer's records against the commit the first left:
// per partition, the second consumer started exactly at the committed offset (or at 0 where
// nothing was committed) and read on from there, and the two consumers together read each
// of the total records.
func checkResumed(t *testing.T, commit map[int32]int64, first, second []consumed, total int) {
	t.Helper()
	sum := int64(0)
	for _, o := range commit {
		sum += o
	}
	if sum == 0 {
		t.Fatalf("the first consumer committed nothing (read %d records)", len(first))
	}
	lowest := map[int32]int64{}
	for _, r := range second {
		if lo, ok := lowest[r.partition]; !ok || r.offset < lo {
			lowest[r.partition] = r.offset
		}
	}
	for p, lo := range lowest {
		if lo != commit[p] {
			t.Errorf("partition %d: the second consumer started at offset %d, want the committed %d", p, lo, commit[p])
		}
	}
	seen := map[string]bool{}
	for _, r := range first {
		if r.offset < commit[r.partition] {
			seen[r.value] = true
		}
	}
	for _, r := range second {
		seen[r.value] = true
	}
	if len(seen) != total {
		t.Errorf("the two consumers read %d distinct records below/after the commit, want all %d", len(seen), total)
	}
	t.Logf("first consumer read %d records and committed %d; the second resumed there and read %d", len(first), sum, len(second))
}

// describe is the group as kadm describes it.
func (c *cluster) describe(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, err
	}
	d, ok := ds[group]
	if !ok {
		return d, kerr.GroupIDNotFound
	}
	return d, d.Err
}

// groupCoordinatedBy is the first group id "<prefix>-<i>" that the coordinator rule gives to
// broker id while brokers 0, 1 and 2 are registered and alive.
func groupCoordinatedBy(prefix string, id int32) string {
	all := []int32{0, 1, 2}
	for i := 0; ; i++ {
		group := fmt.Sprintf("%s-%d", prefix, i)
		if picked, _ := coordinator.Pick(group, coordinator.DefaultPartitions, all, all); picked == id {
			return group
		}
	}
}

// reader is one client's way to consume topic in group until done says it has read enough,
// committing what it read before it returns.
type reader func(t *testing.T, c *cluster, group, topic string, done func([]consumed) bool) []consumed

// resumesAtTheCommittedOffset produces perPartition records to each of partitions partitions of
// topic, has read consume at least half of them in group and commit, then has a new read of
// the same group consume the rest: it must start exactly at the committed offsets.
func resumesAtTheCommittedOffset(t *testing.T, c *cluster, topic, group string, partitions int32, perPartition int, read reader) {
	t.Helper()
	c.createTopic(topic, partitions)
	c.produce(topic, partitions, perPartition)
	total := int(partitions) * perPartition
	first := read(t, c, group, topic, atLeast(total/2))
	commit := c.committed(group, topic)
	second := read(t, c, group, topic, theRest(commit, total))
	checkResumed(t, commit, first, second, total)
}
