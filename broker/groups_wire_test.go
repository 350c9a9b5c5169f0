package broker_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// fastGroups shortens the initial rebalance delay so group tests do not wait 3 s per group.
func fastGroups(cfg *groups.Config) { cfg.InitialRebalanceDelay = 100 * time.Millisecond }

// TestKgoGroupConsumerCommitsAndResumesAtTheCommittedOffset: a kgo group consumer on two
// brokers reads half of a produced topic and commits; a new consumer of the same group
// resumes exactly after the committed records, and OffsetFetch shows the commit.
func TestKgoGroupConsumerCommitsAndResumesAtTheCommittedOffset(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastGroups})
	c.CreateTopic("gw", 3, nil)
	ctx := testkit.Context(t)
	var recs []*kgo.Record
	for i := range 60 {
		recs = append(recs, &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: int32(i % 3)})
	}
	if err := c.Client(kgo.DefaultProduceTopic("gw"), kgo.RecordPartitioner(kgo.ManualPartitioner())).ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}

	consume := func(n int) map[string]bool {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.ConsumerGroup("gw-group"), kgo.ConsumeTopics("gw"),
			kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			fs := cl.PollRecords(ctx, n-len(seen))
			if err := ctx.Err(); err != nil {
				t.Fatalf("consumed %d of %d: %v", len(seen), n, err)
			}
			fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
			start := time.Now()
			if err := cl.CommitUncommittedOffsets(ctx); err != nil {
				t.Fatalf("commit: %v", err)
			}
			t.Logf("commit of %d records took %v", fs.NumRecords(), time.Since(start))
		}
		return seen
	}
	first := consume(30)
	rest := consume(60 - len(first))
	for v := range rest {
		if first[v] {
			t.Errorf("record %s read again after its offset was committed", v)
		}
	}
	if len(first)+len(rest) != 60 {
		t.Fatalf("read %d+%d records, want 60", len(first), len(rest))
	}
}

// TestJoinGroupIsAnsweredAloneOnItsConnection: a JoinGroup that waits for its rebalance
// holds the connection's next request (pipelined behind it) until it is answered, and the
// answers come back in request order — Apache's per-connection ordering.
func TestJoinGroupIsAnsweredAloneOnItsConnection(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, GroupConfig: func(cfg *groups.Config) {
		cfg.InitialRebalanceDelay = 500 * time.Millisecond
	}})
	conn := brokertest.Dial(t, c.Addrs()[0])
	waitGroupsServed(t, conn)
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.MemberID, join.ProtocolType = 3, "alone", "", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	pr := kmsg.NewJoinGroupRequestProtocol()
	pr.Name, pr.Metadata = "range", []byte{0, 1}
	join.Protocols = append(join.Protocols, pr)
	joinCorr, err := conn.Send(join)
	if err != nil {
		t.Fatal(err)
	}
	list := kmsg.NewPtrDescribeGroupsRequest()
	list.Version, list.Groups = 3, []string{"alone"}
	listCorr, err := conn.Send(list)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	jr, err := conn.Read(join, joinCorr)
	if err != nil {
		t.Fatalf("join: %v", err)
	}
	waited := time.Since(start)
	if code := jr.(*kmsg.JoinGroupResponse).ErrorCode; code != 0 {
		t.Fatalf("join answered %v", kerr.ErrorForCode(code))
	}
	lr, err := conn.Read(list, listCorr)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	// The describe was handled only after the join completed: it sees the rebalance's join
	// phase over (CompletingRebalance, waiting for the leader's SyncGroup), not the
	// PreparingRebalance it would see had it run while the join waited.
	described := lr.(*kmsg.DescribeGroupsResponse).Groups
	if len(described) != 1 || described[0].State != "CompletingRebalance" {
		t.Fatalf("DescribeGroups behind the join answered %+v, want the group CompletingRebalance", described)
	}
	t.Logf("join waited %v for the initial rebalance delay", waited)
}

// TestGroupsAnswerNotCoordinatorOnTheOtherBroker: a group request to a broker the
// coordinator rule does not pick answers NOT_COORDINATOR; FindCoordinator's broker serves it.
func TestGroupsAnswerNotCoordinatorOnTheOtherBroker(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastGroups})
	c.CreateTopic("nc", 1, nil)
	owner, _ := coordinator.Pick("g-nc", coordinator.DefaultPartitions, []int32{0, 1}, []int32{0, 1})
	other := 1 - owner
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version, req.Group = 5, "g-nc"
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = "nc", []int32{0}
	req.Topics = append(req.Topics, rt)
	conn := brokertest.Dial(t, c.Addrs()[other])
	waitGroupsServed(t, conn)
	got := conn.Request(req).(*kmsg.OffsetFetchResponse)
	if got.ErrorCode != kerr.NotCoordinator.Code {
		t.Fatalf("broker %d (not the coordinator) answered %v, want NOT_COORDINATOR", other, kerr.ErrorForCode(got.ErrorCode))
	}
	testkit.Eventually(t, "the coordinator serving the group", func() bool {
		got := brokertest.Dial(t, c.Addrs()[owner]).Request(req).(*kmsg.OffsetFetchResponse)
		return got.ErrorCode == 0 && len(got.Topics) == 1 && got.Topics[0].Partitions[0].Offset == -1
	})
}

// TestDrainWaitsUntilTheBrokerCoordinatesNoGroup: a draining broker that coordinates a group
// with a member hands it over (the member's client follows it to the other broker and
// commits there) and exits only once it holds no group.
func TestDrainWaitsUntilTheBrokerCoordinatesNoGroup(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastGroups})
	c.CreateTopic("dr", 2, nil)
	group := ""
	for i := 0; ; i++ {
		group = fmt.Sprintf("dr-%d", i)
		if id, _ := coordinator.Pick(group, coordinator.DefaultPartitions, []int32{0, 1}, []int32{0, 1}); id == 1 {
			break
		}
	}
	ctx := testkit.Context(t)
	if err := c.Client(kgo.DefaultProduceTopic("dr")).ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl := c.Client(kgo.ConsumerGroup(group), kgo.ConsumeTopics("dr"), kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond))
	n := 0
	for n < 2 {
		n += cl.PollFetches(ctx).NumRecords()
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit on broker 1: %v", err)
	}
	testkit.Eventually(t, "broker 1 holding the group", func() bool { return c.Broker(1).B.CoordinatesGroups() > 0 })
	c.Drain(1)
	if err, ok := c.Broker(1).Wait(30 * time.Second); !ok || err != nil {
		t.Fatalf("drain: exited=%v err=%v", ok, err)
	}
	if n := c.Broker(1).B.CoordinatesGroups(); n != 0 {
		t.Fatalf("broker 1 exited holding %d groups", n)
	}
	adm := kmsg.NewPtrOffsetFetchRequest()
	adm.Version, adm.Group = 5, group
	conn := brokertest.Dial(t, c.Addrs()[0])
	var resp *kmsg.OffsetFetchResponse
	testkit.Eventually(t, "broker 0 serving the group's offsets", func() bool {
		resp = conn.Request(adm).(*kmsg.OffsetFetchResponse)
		return resp.ErrorCode == 0
	})
	total := int64(0)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			total += p.Offset
		}
	}
	if total != 2 {
		t.Fatalf("broker 0 (the new coordinator) shows %+v, want the 2 committed records", resp)
	}
}

// waitGroupsServed waits until the broker on conn has a group coordinator that has seen a
// coordinator epoch (ListGroups answers without error).
func waitGroupsServed(t *testing.T, conn *brokertest.Conn) {
	t.Helper()
	testkit.Eventually(t, "the group coordinator serving", func() bool {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 3
		return conn.Request(req).(*kmsg.ListGroupsResponse).ErrorCode == 0
	})
}

// TestADeletedTopicsOffsetsArePurged: offsets committed to a topic that is then deleted
// disappear from the group (an OffsetFetch of all its offsets no longer lists them), while
// the offsets of the group's other topic stay.
func TestADeletedTopicsOffsetsArePurged(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, GroupConfig: fastGroups})
	c.CreateTopic("doomed", 2, nil)
	c.CreateTopic("kept", 1, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	waitGroupsServed(t, conn)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "purge", -1
	for _, tp := range []struct {
		topic string
		parts int32
	}{{"doomed", 2}, {"kept", 1}} {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = tp.topic
		for p := range tp.parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 5
			rt.Partitions = append(rt.Partitions, rp)
		}
		commit.Topics = append(commit.Topics, rt)
	}
	if err := firstCommitError(conn.Request(commit).(*kmsg.OffsetCommitResponse)); err != nil {
		t.Fatalf("commit: %v", err)
	}
	listed := func() map[string]int {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group = 7, "purge" // null topics: every committed offset
		resp := conn.Request(req).(*kmsg.OffsetFetchResponse)
		out := map[string]int{}
		for _, rt := range resp.Topics {
			out[rt.Topic] += len(rt.Partitions)
		}
		return out
	}
	if got := listed(); got["doomed"] != 2 || got["kept"] != 1 {
		t.Fatalf("before the deletion the group lists %v, want doomed 2 and kept 1", got)
	}
	c.DeleteTopic("doomed")
	testkit.Eventually(t, "the deleted topic's offsets purged", func() bool {
		got := listed()
		return got["doomed"] == 0 && got["kept"] == 1
	})
}

func firstCommitError(resp *kmsg.OffsetCommitResponse) error {
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", rt.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// TestTheClusterConfigSetsTheGroupLimits: the KafkaCluster's group.max.size reaches the
// coordinator: a second member joining a group of one is refused GROUP_MAX_SIZE_REACHED.
func TestTheClusterConfigSetsTheGroupLimits(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, ClusterConfig: map[string]string{
		"group.max.size": "1", "group.initial.rebalance.delay.ms": "0"}})
	conn := brokertest.Dial(t, c.Addrs()[0])
	waitGroupsServed(t, conn)
	join := func(member string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 3, "small", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10000, 10000
		pr := kmsg.NewJoinGroupRequestProtocol()
		pr.Name, pr.Metadata = "range", []byte{0, 1}
		req.Protocols = append(req.Protocols, pr)
		return conn.Request(req).(*kmsg.JoinGroupResponse)
	}
	if r := join(""); r.ErrorCode != 0 {
		t.Fatalf("first member: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := join(""); r.ErrorCode != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("second member: %v, want GROUP_MAX_SIZE_REACHED (group.max.size 1)", kerr.ErrorForCode(r.ErrorCode))
	}
}

// BenchmarkOffsetCommitThroughTheWire: one simple OffsetCommit (one partition, generation
// -1) per iteration on one connection to an in-process broker: decode, the group's append +
// fdatasync + fence check, answer. Compare with broker/groups' BenchmarkOffsetCommit (no
// wire) on the same machine.
func BenchmarkOffsetCommitThroughTheWire(b *testing.B) {
	discard := logr.Discard()
	c := brokertest.Start(b, brokertest.Options{Brokers: 1, Log: &discard})
	c.CreateTopic("bench", 1, nil)
	conn := brokertest.Dial(b, c.Addrs()[0])
	testkit.Eventually(b, "the group coordinator serving", func() bool {
		req := kmsg.NewPtrListGroupsRequest()
		req.Version = 3
		return conn.Request(req).(*kmsg.ListGroupsResponse).ErrorCode == 0
	})
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation = 8, "bench", -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = "bench"
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	b.ResetTimer()
	for i := range b.N {
		req.Topics[0].Partitions[0].Offset = int64(i)
		if err := firstCommitError(conn.Request(req).(*kmsg.OffsetCommitResponse)); err != nil {
			b.Fatal(err)
		}
	}
}

// TestTxnOffsetCommitThroughTheWire: key 28 at v3 stores pending offsets that OffsetFetch
// with require_stable answers UNSTABLE_OFFSET_COMMIT (and without it the last committed
// offset); an unknown topic is UNKNOWN_TOPIC_OR_PARTITION.
func TestTxnOffsetCommitThroughTheWire(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1, GroupConfig: fastGroups})
	c.CreateTopic("tw", 2, nil)
	conn := brokertest.Dial(t, c.Addrs()[0])
	waitGroupsServed(t, conn)
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "txg", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "tw", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 3}}}}
	if code := conn.Request(commit).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("OffsetCommit: %v", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.Version, req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch, req.Generation = 3, "tx", "txg", 42, 0, -1
	req.Topics = []kmsg.TxnOffsetCommitRequestTopic{
		{Topic: "tw", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}},
		{Topic: "nope", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1}}},
	}
	resp := conn.Request(req).(*kmsg.TxnOffsetCommitResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[1].Partitions[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("TxnOffsetCommit answered %+v", resp.Topics)
	}
	fetch := func(stable bool) kmsg.OffsetFetchResponseTopicPartition {
		f := kmsg.NewPtrOffsetFetchRequest()
		f.Version, f.Group, f.RequireStable = 7, "txg", stable
		f.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "tw", Partitions: []int32{0}}}
		return conn.Request(f).(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0]
	}
	if p := fetch(true); p.ErrorCode != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("require_stable: %v offset %d, want UNSTABLE_OFFSET_COMMIT", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}
	if p := fetch(false); p.ErrorCode != 0 || p.Offset != 3 {
		t.Fatalf("without require_stable: %v offset %d, want the committed 3", kerr.ErrorForCode(p.ErrorCode), p.Offset)
	}
}
