package groups

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestAStaticMemberRestartingKeepsItsAssignmentWithoutARebalance: two kgo members with
// group.instance.id (KIP-345) split four partitions; one restarts (a new client, the same
// instance id, a new member id) within the session timeout. The coordinator replaces the
// member in place: the group stays Stable with the same assignment per instance and no
// rebalance is completed (paddock_groups_rebalances_total does not move).
func TestAStaticMemberRestartingKeepsItsAssignmentWithoutARebalance(t *testing.T) {
	c := newCluster(t, 1)
	const topic, group = "static", "static-group"
	c.createTopic(topic, 4)
	member := func(instance string) *kgo.Client {
		return c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()),
			kgo.InstanceID(instance), kgo.SessionTimeout(30*time.Second), kgo.FetchMaxWait(200*time.Millisecond))
	}
	ctx := testCtx(t)
	a, b := member("a"), member("b")
	go pollUntilClosed(ctx, a)
	go pollUntilClosed(ctx, b)
	adm := kadm.NewClient(c.Kgo())
	waitSplit(t, adm, group, topic, 2, 2)
	before := byInstance(t, adm, group, topic)
	rebalances := scrape(t, c.HealthAddrs[0])["paddock_groups_rebalances_total"]

	b.Close() // a static member does not leave the group on close
	b2 := member("b")
	go pollUntilClosed(ctx, b2)
	eventually(t, "instance b back under a new member id", func() bool {
		now := byInstance(t, adm, group, topic)
		return now["b"].memberID != "" && now["b"].memberID != before["b"].memberID
	})
	after := byInstance(t, adm, group, topic)
	for _, inst := range []string{"a", "b"} {
		if !slices.Equal(after[inst].partitions, before[inst].partitions) {
			t.Errorf("instance %s: assigned %v before the restart, %v after; want the same", inst, before[inst].partitions, after[inst].partitions)
		}
	}
	if got := scrape(t, c.HealthAddrs[0])["paddock_groups_rebalances_total"]; got != rebalances {
		t.Errorf("rebalances completed: %v before the restart, %v after; want no rebalance", rebalances, got)
	}
}

type staticMember struct {
	memberID   string
	partitions []int32
}

// byInstance is the Stable group's members by instance id (kadm DescribeGroups).
func byInstance(t *testing.T, adm *kadm.Client, group, topic string) map[string]staticMember {
	t.Helper()
	ds, err := adm.DescribeGroups(testCtx(t), group)
	if err != nil || ds[group].Err != nil {
		t.Fatalf("describe %s: %v %v", group, err, ds[group].Err)
	}
	out := map[string]staticMember{}
	for _, m := range ds[group].Members {
		if m.InstanceID == nil {
			continue
		}
		sm := staticMember{memberID: m.MemberID}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				if at.Topic == topic {
					sm.partitions = slices.Sorted(slices.Values(at.Partitions))
				}
			}
		}
		out[*m.InstanceID] = sm
	}
	return out
}
