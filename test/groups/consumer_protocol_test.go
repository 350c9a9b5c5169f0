package groups

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// The consumer group protocol (KIP-848) with real clients: kgo opts in with
// ServerSideBalancer and uses it because the brokers advertise ConsumerGroupHeartbeat v1
// (docs/groups.md "The consumer protocol"). librdkafka's group.protocol=consumer needs
// librdkafka 2.4 or later; the kcat here links Debian's librdkafka 2.0.2, which has no such
// setting, so kcat is not part of these tests.

// consumerCluster is newCluster with a short consumer-protocol heartbeat interval, so
// reconciliation rounds take a fraction of a second instead of Apache's 5 s.
func consumerCluster(t *testing.T, n int, config map[string]string) *cluster {
	t.Helper()
	c := &cluster{kubebrokers.NewCluster(t, n, kubebrokers.Options{Namespace: "cgp", DrainTimeout: 20 * time.Second, Config: config,
		GroupConfig: func(cfg *groups.Config) {
			cfg.InitialRebalanceDelay = initialRebalanceDelay
			cfg.ConsumerHeartbeatInterval = 250 * time.Millisecond
		}})}
	ctx := testCtx(t)
	for id := range n {
		cl := c.Kgo(kgo.SeedBrokers(c.Addrs[id]))
		eventually(t, fmt.Sprintf("broker %d's group coordinator", id), func() bool {
			resp, err := cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrListGroupsRequest())
			return err == nil && resp.(*kmsg.ListGroupsResponse).ErrorCode == 0
		})
	}
	return c
}

// freshAddresses makes a client re-read metadata every second: a restarted in-process broker
// listens on new ports (test/kubebrokers), where a restarted pod keeps its address.
var freshAddresses = []kgo.Opt{kgo.MetadataMinAge(250 * time.Millisecond), kgo.MetadataMaxAge(time.Second)}

// ledger records what the producer had acknowledged and what the members consumed.
type ledger struct {
	mu       sync.Mutex
	acked    map[string]bool
	consumed map[string]bool
}

func (l *ledger) consume(v string) {
	l.mu.Lock()
	l.consumed[v] = true
	l.mu.Unlock()
}

func (l *ledger) missing() (acked, missing int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for v := range l.acked {
		if !l.consumed[v] {
			missing++
		}
	}
	return len(l.acked), missing
}

// produceUntil writes numbered records to topic until stop is closed, recording each
// acknowledged one; it returns when the last in-flight record is answered.
func (c *cluster) produceUntil(topic string, l *ledger, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	p := c.Kgo(append(freshAddresses, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.RecordRetries(1000), kgo.RequestRetries(1000))...)
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		for i := 0; ; i++ {
			select {
			case <-stop:
				wg.Wait()
				return
			case <-time.After(5 * time.Millisecond):
			}
			wg.Add(1)
			v := strconv.Itoa(i)
			p.Produce(context.Background(), &kgo.Record{Value: []byte(v)}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					l.mu.Lock()
					l.acked[v] = true
					l.mu.Unlock()
				}
			})
		}
	}()
	return done
}

// consumerMember is a kgo member of group using the consumer protocol, autocommitting
// every 250 ms; what it reads goes into l. Closing it leaves the group (after committing).
func (c *cluster) consumerMember(group, topic string, l *ledger, opts ...kgo.Opt) *kgo.Client {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Addrs...), freshAddresses[0], freshAddresses[1], kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ServerSideBalancer(), kgo.AutoCommitInterval(250 * time.Millisecond), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	if err != nil {
		c.T.Fatal(err)
	}
	c.T.Cleanup(cl.Close)
	go func() {
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) { l.consume(string(r.Value)) })
		}
	}()
	return cl
}

// watchCommits reads the group's committed offsets every 250 ms (a fresh admin client each
// time, as an operator's tool would) until stop, failing if one ever goes back.
func (c *cluster) watchCommits(group, topic string, stop <-chan struct{}) <-chan map[int32]int64 {
	out := make(chan map[int32]int64, 1)
	go func() {
		last := map[int32]int64{}
		defer func() { out <- last }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...))
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
			cancel()
			cl.Close()
			if err != nil || resp.Error() != nil {
				continue // a coordinator moving: asked again next time
			}
			for p, o := range resp[topic] {
				if o.At < last[p] {
					c.T.Errorf("partition %d: committed offset went back from %d to %d", p, last[p], o.At)
				}
				last[p] = max(last[p], o.At)
			}
		}
	}()
	return out
}

// describeConsumerGroup is ConsumerGroupDescribe through kadm.
func describeConsumerGroup(ctx context.Context, cl *kgo.Client, group string) (kadm.DescribedConsumerGroup, error) {
	ds, err := kadm.NewClient(cl).DescribeConsumerGroups(ctx, group)
	if err != nil {
		return kadm.DescribedConsumerGroup{}, err
	}
	d := ds[group]
	return d, d.Err
}

// TestKgoConsumesThroughJoinLeaveRestartAndDrainWithTheConsumerProtocol: a topic is produced
// continuously while kgo members of a consumer-protocol group join, one leaves, the group's
// coordinator restarts (its process stops at once, as under kill -9, and a new one starts on
// the volume) and is then drained (SIGTERM; the group moves to another broker). Every
// acknowledged record is consumed, the committed offsets never go back, and the group ends
// Stable with its members splitting the partitions.
func TestKgoConsumesThroughJoinLeaveRestartAndDrainWithTheConsumerProtocol(t *testing.T) {
	c := consumerCluster(t, 3, nil)
	const topic, partitions = "kip848", 6
	c.createTopic(topic, partitions)
	group := groupCoordinatedBy("kip848", 1)
	ctx := testCtx(t)
	l := &ledger{acked: map[string]bool{}, consumed: map[string]bool{}}
	stopProduce, stopWatch := make(chan struct{}), make(chan struct{})
	produced := c.produceUntil(topic, l, stopProduce)
	commits := c.watchCommits(group, topic, stopWatch)
	stable := func(what string, members int) time.Duration {
		start := time.Now()
		logged := start
		eventually(t, what, func() bool {
			// A fresh client each time: a client's cached coordinator outlives the drained
			// broker's listener, and this is an operator looking, not a member.
			admin, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...))
			if err != nil {
				return false
			}
			defer admin.Close()
			d, err := describeConsumerGroup(ctx, admin, group)
			if time.Since(logged) > 3*time.Second {
				logged = time.Now()
				t.Logf("waiting for %s: %s, %d members, %v", what, d.State, len(d.Members), err)
			}
			if err != nil || d.State != "Stable" || len(d.Members) != members {
				return false
			}
			total := 0
			for _, m := range d.Members {
				for _, ps := range m.Assignment {
					total += len(ps)
				}
			}
			return total == partitions
		})
		return time.Since(start)
	}

	a := c.consumerMember(group, topic, l)
	t.Logf("one member: Stable in %v", stable("one member assigned everything", 1))
	c.consumerMember(group, topic, l)
	c.consumerMember(group, topic, l, kgo.Balancers(kgo.CooperativeStickyBalancer()))
	t.Logf("three members: Stable in %v", stable("three members", 3))
	a.Close() // leaves the group after committing
	t.Logf("one left: Stable in %v", stable("two members after a leave", 2))

	c.RestartBroker(1)
	t.Logf("the coordinator restarted: Stable in %v", stable("two members after the coordinator restarted", 2))
	c.Drain(1)
	if err, exited := c.WaitExit(1); !exited || err != nil {
		t.Fatalf("broker 1's drain: exited %v, err %v", exited, err)
	}
	// Its pod is gone: the registry fences its row (the endpoint stops serving), so Metadata
	// stops listing it and clients stop dialing it.
	c.Rows[1].State = v1alpha1.BrokerFenced
	c.SetRows()
	t.Logf("the coordinator drained: Stable in %v", stable("two members on the next coordinator", 2))

	close(stopProduce)
	<-produced
	start := time.Now()
	eventually(t, "every acknowledged record consumed", func() bool { _, missing := l.missing(); return missing == 0 })
	acked, _ := l.missing()
	close(stopWatch)
	last := <-commits
	t.Logf("%d acknowledged records all consumed (the last %v after the producer stopped); last committed offsets %v", acked, time.Since(start), last)
	if acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// TestKgoFallsBackToTheClassicProtocolWhenTheClusterTurnsItOff: with
// group.coordinator.rebalance.protocols=classic the brokers still advertise
// ConsumerGroupHeartbeat (as Apache does) but answer it UNSUPPORTED_VERSION and finalize
// group.version at 0; a kgo member with ServerSideBalancer falls back to the classic
// protocol and consumes, and its group is a classic one.
func TestKgoFallsBackToTheClassicProtocolWhenTheClusterTurnsItOff(t *testing.T) {
	c := consumerCluster(t, 1, map[string]string{"group.coordinator.rebalance.protocols": "classic"})
	const topic = "fallback"
	c.createTopic(topic, 2)
	c.produce(topic, 2, 10)
	ctx := testCtx(t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 4
	resp, err := av.RequestWith(ctx, c.Kgo())
	if err != nil || len(resp.FinalizedFeatures) != 0 {
		t.Fatalf("ApiVersions: %v, finalized %+v (want group.version left out)", err, resp.FinalizedFeatures)
	}
	l := &ledger{acked: map[string]bool{}, consumed: map[string]bool{}}
	c.consumerMember("fallback-group", topic, l)
	eventually(t, "the 20 records consumed", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.consumed) == 20
	})
	admin := kadm.NewClient(c.Kgo())
	eventually(t, "a Stable classic group", func() bool {
		ds, err := admin.DescribeGroups(ctx, "fallback-group")
		return err == nil && ds["fallback-group"].State == "Stable" && ds["fallback-group"].ProtocolType == "consumer"
	})
	if _, err := describeConsumerGroup(ctx, c.Kgo(), "fallback-group"); err == nil {
		t.Fatal("ConsumerGroupDescribe answered while the protocol is off")
	}
}

// TestKgoForcedIntoTheConsumerProtocolWithTheRangeAssignor: kgo's other opt-in (the context
// key of its beta, honoured without ServerSideBalancer) with the range balancer asks the
// coordinator for the range assignor: two members get contiguous halves of each topic.
func TestKgoForcedIntoTheConsumerProtocolWithTheRangeAssignor(t *testing.T) {
	c := consumerCluster(t, 1, nil)
	const topic = "forced"
	c.createTopic(topic, 4)
	ctx := testCtx(t)
	optIn := context.WithValue(context.Background(), "opt_in_kafka_next_gen_balancer_beta", true) //nolint:staticcheck // kgo's own key is a plain string
	for range 2 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs...), kgo.WithContext(optIn), kgo.ConsumerGroup("forced-group"), kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.RangeBalancer()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		go func() {
			for !cl.PollFetches(context.Background()).IsClientClosed() {
			}
		}()
	}
	var got map[string][]int32
	eventually(t, "two range members with halves of the topic", func() bool {
		d, err := describeConsumerGroup(ctx, c.Kgo(), "forced-group")
		if err != nil || d.State != "Stable" || d.AssignorName != "range" || len(d.Members) != 2 {
			return false
		}
		got = map[string][]int32{}
		for _, m := range d.Members {
			got[m.MemberID] = m.Assignment.Sorted()[0].Partitions
		}
		return true
	})
	for id, ps := range got {
		if len(ps) != 2 || ps[1] != ps[0]+1 {
			t.Errorf("member %s has %v, want two contiguous partitions", id, ps)
		}
	}
}
