package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// kgoRead runs a kgo group consumer of topic until done holds for what it read, commits
// what it polled (CommitUncommittedOffsets) and leaves the group.
func kgoRead(t *testing.T, c *cluster, group, topic string, balancer kgo.GroupBalancer, done func([]consumed) bool) []consumed {
	t.Helper()
	ctx := testCtx(t)
	cl := c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(balancer), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close() // leaves the group
	var got []consumed
	for !done(got) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%s read %d records: %v", group, len(got), ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("%s fetch %s/%d: %v", group, topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, consumed{r.Partition, r.Offset, string(r.Value)}) })
	}
	start := time.Now()
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("%s commit: %v", group, err)
	}
	t.Logf("%s: OffsetCommit of %d records' offsets answered in %v", group, len(got), time.Since(start))
	return got
}

// atLeast is a done predicate: n records read.
func atLeast(n int) func([]consumed) bool { return func(rs []consumed) bool { return len(rs) >= n } }

// theRest is the done predicate of a consumer resuming after commit: it has read every
// record from the committed offsets on (total in all). Resuming too early reads that many
// records too, which checkResumed catches; resuming too late never gets there.
func theRest(commit map[int32]int64, total int) func([]consumed) bool {
	n := total
	for _, o := range commit {
		n -= int(o)
	}
	return atLeast(n)
}

// TestFranzGoGroupConsumersResumeAtTheCommittedOffset: a kgo group consumer (each
// balancer) reads part of a topic produced earlier and commits; a new consumer of the group
// resumes exactly at the committed offsets and reads the rest.
func TestFranzGoGroupConsumersResumeAtTheCommittedOffset(t *testing.T) {
	c := newCluster(t, 3)
	const partitions, perPartition = 6, 20
	for _, b := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{{"cooperative-sticky", kgo.CooperativeStickyBalancer()}, {"range", kgo.RangeBalancer()}} {
		t.Run(b.name, func(t *testing.T) {
			resumesAtTheCommittedOffset(t, c, "kgo-"+b.name, "kgo-group-"+b.name, partitions, perPartition,
				func(t *testing.T, c *cluster, group, topic string, done func([]consumed) bool) []consumed {
					return kgoRead(t, c, group, topic, b.balancer, done)
				})
		})
	}
}

// TestThreeMembersSplitTwelvePartitionsAndALeaveRebalances: three kgo members of one group
// get four of twelve partitions each (kadm DescribeGroups shows the Stable group and every
// assignment); one member leaving starts a rebalance that completes with six partitions
// each for the other two. The rebalance time is printed.
func TestThreeMembersSplitTwelvePartitionsAndALeaveRebalances(t *testing.T) {
	c := newCluster(t, 3)
	const topic, group = "twelve", "twelve-group"
	c.createTopic(topic, 12)
	for _, b := range []struct {
		name     string
		balancer kgo.GroupBalancer
	}{{"range", kgo.RangeBalancer()}, {"cooperative-sticky", kgo.CooperativeStickyBalancer()}} {
		t.Run(b.name, func(t *testing.T) {
			group := group + "-" + b.name
			ctx := testCtx(t)
			var members []*kgo.Client
			start := time.Now()
			for i := range 3 {
				members = append(members, c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(b.balancer),
					kgo.ClientID(fmt.Sprintf("member-%d", i)), kgo.FetchMaxWait(200*time.Millisecond)))
			}
			for _, m := range members {
				go pollUntilClosed(ctx, m)
			}
			adm := kadm.NewClient(c.Kgo())
			waitSplit(t, adm, group, topic, 3, 4)
			t.Logf("%s: three members joined and split 12 partitions in %v (initial rebalance delay %v)", b.name, time.Since(start), initialRebalanceDelay)

			start = time.Now()
			members[2].Close() // LeaveGroup
			waitSplit(t, adm, group, topic, 2, 6)
			t.Logf("%s: after one member left, the group was Stable again with 6 partitions each in %v", b.name, time.Since(start))
		})
	}
}

// pollUntilClosed polls m until its client is closed or ctx ends, as an application's
// consume loop does.
func pollUntilClosed(ctx context.Context, m *kgo.Client) {
	for {
		fs := m.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
	}
}

// waitSplit waits until kadm describes group as Stable with members members, each assigned
// per partitions of topic, all of them different.
func waitSplit(t *testing.T, adm *kadm.Client, group, topic string, members, per int) {
	t.Helper()
	ctx := testCtx(t)
	testkit.EventuallyDetail(t, fmt.Sprintf("group %s Stable with %d members of %d partitions of %s", group, members, per, topic), func() (bool, string) {
		state, assigned, err := describeAssignments(ctx, adm, group, topic)
		detail := fmt.Sprintf("state %q, assignments %v (err %v)", state, assigned, err)
		if err != nil || state != "Stable" || len(assigned) != members {
			return false, detail
		}
		seen := map[int32]bool{}
		for _, ps := range assigned {
			if len(ps) != per {
				return false, detail
			}
			for _, p := range ps {
				if seen[p] {
					return false, detail
				}
				seen[p] = true
			}
		}
		return true, ""
	})
}

// describeAssignments is group's state and each member's assigned partitions of topic (by
// member id), as kadm DescribeGroups shows them.
func describeAssignments(ctx context.Context, adm *kadm.Client, group, topic string) (string, map[string][]int32, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "", nil, err
	}
	d := ds[group]
	if d.Err != nil {
		return "", nil, d.Err
	}
	out := map[string][]int32{}
	for _, m := range d.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok {
			return d.State, nil, fmt.Errorf("member %s: assignment is not a consumer assignment", m.MemberID)
		}
		out[m.MemberID] = nil
		for _, at := range a.Topics {
			if at.Topic == topic {
				out[m.MemberID] = append(out[m.MemberID], at.Partitions...)
			}
		}
	}
	return d.State, out, nil
}
