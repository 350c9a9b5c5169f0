package groups

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestAdminViewsShowTheMembersAndTheLag: a group of two kgo members (client ids member-a and
// member-b, range balancer) over four partitions of ten records each; each member commits
// offset 3 (member-a) or 6 (member-b) for the partitions it was assigned. The
// kafka-consumer-groups views of kadm (ListGroups, DescribeGroups, FetchOffsets, Lag) and
// sarama's ClusterAdmin (ListConsumerGroups, DescribeConsumerGroups,
// ListConsumerGroupOffsets) show the Stable group, both members with their client ids,
// hosts and assignments, the commits and a lag of 10 − commit; the group coordinator's
// /metrics shows the group's series.
func TestAdminViewsShowTheMembersAndTheLag(t *testing.T) {
	c := newCluster(t, 3)
	const topic, group, partitions, perPartition = "views", "views-group", 4, 10
	c.createTopic(topic, partitions)
	c.produce(topic, partitions, perPartition)
	ctx := testCtx(t)

	commitAt := map[string]int64{"member-a": 3, "member-b": 6}
	var mu sync.Mutex
	assigned := map[string][]int32{}
	var members []*kgo.Client
	for _, id := range []string{"member-a", "member-b"} {
		members = append(members, c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.Balancers(kgo.RangeBalancer()),
			kgo.ClientID(id), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				assigned[id] = append(assigned[id], a[topic]...)
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				mu.Lock()
				defer mu.Unlock()
				assigned[id] = slices.DeleteFunc(assigned[id], func(p int32) bool { return slices.Contains(r[topic], p) })
			})))
	}
	adm := kadm.NewClient(c.Kgo())
	waitSplit(t, adm, group, topic, 2, 2)
	mu.Lock()
	mine := map[string][]int32{}
	for id, ps := range assigned {
		mine[id] = slices.Clone(ps)
	}
	mu.Unlock()
	want := map[int32]int64{}
	for i, id := range []string{"member-a", "member-b"} {
		offsets := map[string]map[int32]kgo.EpochOffset{topic: {}}
		for _, p := range mine[id] {
			offsets[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: commitAt[id]}
			want[p] = commitAt[id]
		}
		var commitErr error
		members[i].CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = firstCommitError(resp, err)
		})
		if commitErr != nil {
			t.Fatalf("%s commit: %v", id, commitErr)
		}
	}
	if len(want) != partitions {
		t.Fatalf("the members were assigned %v, want all %d partitions", want, partitions)
	}

	// kadm.
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		t.Fatalf("kadm ListGroups: %v", err)
	}
	if l, ok := listed[group]; !ok || l.ProtocolType != "consumer" || l.State != "Stable" {
		t.Errorf("kadm ListGroups: %+v, want %s listed, consumer, Stable", listed, group)
	}
	d, err := c.describe(ctx, adm, group)
	if err != nil {
		t.Fatalf("kadm DescribeGroups: %v", err)
	}
	if d.State != "Stable" || d.Protocol != "range" || d.ProtocolType != "consumer" || len(d.Members) != 2 {
		t.Errorf("kadm DescribeGroups: %+v, want Stable, consumer/range, two members", d)
	}
	var clientIDs []string
	for _, m := range d.Members {
		clientIDs = append(clientIDs, m.ClientID)
		if m.ClientHost != "/127.0.0.1" {
			t.Errorf("member %s host %q, want /127.0.0.1", m.ClientID, m.ClientHost)
		}
	}
	slices.Sort(clientIDs)
	if !slices.Equal(clientIDs, []string{"member-a", "member-b"}) {
		t.Errorf("kadm DescribeGroups members %v, want member-a and member-b", clientIDs)
	}
	if got := c.committed(group, topic); !mapsEqual(got, want) {
		t.Errorf("kadm FetchOffsets: %v, want %v", got, want)
	}
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("kadm Lag: %v", err)
	}
	lag := lags[group]
	if err := lag.Error(); err != nil {
		t.Fatalf("kadm Lag of %s: %v", group, err)
	}
	for p, at := range want {
		l, ok := lag.Lag.Lookup(topic, p)
		if !ok || l.Lag != perPartition-at || l.Member == nil {
			t.Errorf("kadm Lag %s/%d: %+v, want lag %d owned by a member", topic, p, l, perPartition-at)
		}
	}

	// sarama ClusterAdmin.
	sadm, err := sarama.NewClusterAdmin(c.Addrs, saramaConfig())
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	defer func() { _ = sadm.Close() }()
	groups, err := sadm.ListConsumerGroups()
	if err != nil || groups[group] != "consumer" {
		t.Errorf("sarama ListConsumerGroups: %v %v, want %s consumer", groups, err, group)
	}
	described, err := sadm.DescribeConsumerGroups([]string{group})
	if err != nil || len(described) != 1 {
		t.Fatalf("sarama DescribeConsumerGroups: %v %v", described, err)
	}
	sd := described[0]
	if sd.State != "Stable" || sd.ProtocolType != "consumer" || sd.Protocol != "range" || len(sd.Members) != 2 {
		t.Errorf("sarama DescribeConsumerGroups: %+v, want Stable consumer/range with two members", sd)
	}
	var saramaIDs []string
	for _, m := range sd.Members {
		saramaIDs = append(saramaIDs, m.ClientId)
		a, err := m.GetMemberAssignment()
		if err != nil || len(a.Topics[topic]) != 2 {
			t.Errorf("sarama member %s assignment %+v (%v), want two partitions of %s", m.ClientId, a, err, topic)
		}
	}
	slices.Sort(saramaIDs)
	if !slices.Equal(saramaIDs, []string{"member-a", "member-b"}) {
		t.Errorf("sarama members %v, want member-a and member-b", saramaIDs)
	}
	offsets, err := sadm.ListConsumerGroupOffsets(group, nil)
	if err != nil || offsets.Err != sarama.ErrNoError {
		t.Fatalf("sarama ListConsumerGroupOffsets: %v %v", err, offsets.Err)
	}
	sc, err := sarama.NewClient(c.Addrs, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sc.Close() }()
	for p, at := range want {
		b := offsets.GetBlock(topic, p)
		if b == nil || b.Offset != at {
			t.Errorf("sarama ListConsumerGroupOffsets %s/%d: %+v, want %d", topic, p, b, at)
			continue
		}
		end, err := sc.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil || end-b.Offset != perPartition-at {
			t.Errorf("sarama lag %s/%d: end %d (%v) − commit %d, want lag %d", topic, p, end, err, b.Offset, perPartition-at)
		}
	}

	// The coordinator's metrics.
	coordinators := adm.FindGroupCoordinators(ctx, group)
	co, ok := coordinators[group]
	if !ok || co.Err != nil {
		t.Fatalf("find the coordinator of %s: %+v", group, coordinators)
	}
	m := scrape(t, c.HealthAddrs[co.NodeID])
	for series, min := range map[string]float64{
		`paddock_groups_groups{state="Stable"}`:                   1,
		`paddock_groups_members`:                                  2,
		`paddock_groups_rebalances_total`:                         1,
		`paddock_groups_offset_commit_seconds_count{result="ok"}`: 2,
		`paddock_groups_coordinated`:                              1,
		`paddock_groups_coordinator_epoch`:                        1,
	} {
		if v, ok := m[series]; !ok || v < min {
			t.Errorf("broker %d /metrics %s = %v (present %v), want at least %v", co.NodeID, series, v, ok, min)
		}
	}
	if n := m[`paddock_groups_offset_commit_seconds_count{result="ok"}`]; n > 0 {
		t.Logf("coordinator broker %d: %v commits, mean commit latency %.3f ms", co.NodeID, n,
			1000*m[`paddock_groups_offset_commit_seconds_sum{result="ok"}`]/n)
	}
}

func mapsEqual(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// scrape reads a broker's /metrics into series → value (series with their labels as
// printed, in Prometheus text format).
func scrape(t *testing.T, healthAddr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + healthAddr + "/metrics")
	if err != nil {
		t.Fatalf("scrape %s: %v", healthAddr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(fmt.Errorf("read metrics: %w", err))
	}
	return out
}

// firstCommitError is the first error of an OffsetCommit answer.
func firstCommitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}
