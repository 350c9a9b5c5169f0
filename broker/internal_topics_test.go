package broker_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// Every all-topics Metadata lists __consumer_offsets as internal, with
// offsets.topic.num.partitions partitions, and the leader of the partition a group hashes to
// is the coordinator FindCoordinator names for it — one story, on every broker.
func TestConsumerOffsetsIsListedInternalAndLedByItsGroupsCoordinators(t *testing.T) {
	for _, tc := range []struct {
		name       string
		config     map[string]string
		partitions int32
	}{
		{"default 50 partitions", nil, 50},
		{"offsets.topic.num.partitions", map[string]string{"offsets.topic.num.partitions": "7"}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := brokertest.Start(t, brokertest.Options{Brokers: 3, ClusterConfig: tc.config})
			c.CreateTopic("orders", 2, nil)
			ctx := testkit.Context(t)
			for _, addr := range c.Addrs() {
				adm := kadm.NewClient(newClient(t, addr))
				md, err := adm.Metadata(ctx)
				if err != nil {
					t.Fatal(err)
				}
				offsets, ok := md.Topics["__consumer_offsets"]
				if !ok || !offsets.IsInternal || offsets.Err != nil || int32(len(offsets.Partitions)) != tc.partitions {
					t.Fatalf("broker %s: __consumer_offsets %+v, want internal with %d partitions", addr, offsets, tc.partitions)
				}
				if offsets.ID == (kadm.TopicID{}) {
					t.Errorf("broker %s: __consumer_offsets has no topic id", addr)
				}
				if md.Topics["orders"].IsInternal {
					t.Errorf("broker %s: orders listed as internal", addr)
				}
				var groups []string
				for i := range 40 {
					groups = append(groups, fmt.Sprintf("group-%d", i))
				}
				coordinators := adm.FindGroupCoordinators(ctx, groups...)
				for _, g := range groups {
					p := coordinator.Partition(g, tc.partitions)
					leader := offsets.Partitions[p].Leader
					if co := coordinators[g]; co.Err != nil || co.NodeID != leader {
						t.Fatalf("broker %s: group %s (partition %d led by %d) has coordinator %+v", addr, g, p, leader, co)
					}
				}
			}
		})
	}
}

// A kgo consumer subscribed to ".*" skips the internal topic, says so in its log, and reads
// every other topic.
func TestARegexConsumerSkipsConsumerOffsetsAndConsumesTheRest(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2, GroupConfig: fastGroups})
	c.CreateTopic("alpha", 2, nil)
	c.CreateTopic("beta", 1, nil)
	ctx := testkit.Context(t)
	producer := c.Client(kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	var recs []*kgo.Record
	for i := range 20 {
		recs = append(recs, &kgo.Record{Topic: []string{"alpha", "beta"}[i%2], Value: fmt.Appendf(nil, "%d", i)})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	log := &skippedInternalLog{}
	consumer := c.Client(kgo.ConsumeRegex(), kgo.ConsumeTopics(".*"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumerGroup("regex-all"), kgo.WithLogger(log), kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int{}
	for n := 0; n < len(recs); {
		fs := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v (%v)", n, len(recs), err, seen)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			seen[r.Topic]++
			n++
		})
	}
	if seen["alpha"] != 10 || seen["beta"] != 10 || len(seen) != 2 {
		t.Fatalf("consumed %v, want 10 records of alpha and of beta and nothing else", seen)
	}
	if !log.skipped("__consumer_offsets") {
		t.Fatalf("kgo never logged __consumer_offsets as a skipped internal topic")
	}
}

// skippedInternalLog is a kgo.Logger that records which topics kgo's regex evaluation
// reported as skipped because they are internal.
type skippedInternalLog struct {
	mu       sync.Mutex
	internal []string
}

func (l *skippedInternalLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *skippedInternalLog) Log(_ kgo.LogLevel, _ string, keyvals ...any) {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if keyvals[i] == "skipped_internal" {
			if topics, ok := keyvals[i+1].([]string); ok {
				l.mu.Lock()
				l.internal = append(l.internal, topics...)
				l.mu.Unlock()
			}
		}
	}
}

func (l *skippedInternalLog) skipped(topic string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.internal, topic)
}

// The internal topic is read-only and cannot be deleted, grown, reconfigured or created;
// __consumer_offsets and __transaction_state are never auto-created. Each refusal carries its
// code, and nothing changes.
func TestInternalTopicsRefuseWritesWithTheirErrors(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 1})
	ctx := testkit.Context(t)
	cl := c.Client()
	adm := kadm.NewClient(cl)

	produce := kmsg.NewPtrProduceRequest()
	produce.Acks, produce.TimeoutMillis = -1, 5000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "__consumer_offsets"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = brokertest.Plain([]byte("x")).Bytes()
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	pr, err := produce.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if code := pr.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidTopicException.Code {
		t.Errorf("Produce to __consumer_offsets: error %v, want INVALID_TOPIC_EXCEPTION", kerr.ErrorForCode(code))
	}

	deleted, err := adm.DeleteTopics(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if err := deleted["__consumer_offsets"].Err; err != kerr.TopicDeletionDisabled {
		t.Errorf("DeleteTopics __consumer_offsets: %v, want TOPIC_DELETION_DISABLED", err)
	}
	grown, err := adm.UpdatePartitions(ctx, 60, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if err := grown["__consumer_offsets"].Err; err != kerr.PolicyViolation {
		t.Errorf("CreatePartitions __consumer_offsets: %v, want POLICY_VIOLATION", err)
	}
	retention := "1000"
	incr, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if len(incr) != 1 || incr[0].Err != kerr.PolicyViolation {
		t.Errorf("IncrementalAlterConfigs __consumer_offsets: %+v, want POLICY_VIOLATION", incr)
	}
	legacy, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &retention}}, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if len(legacy) != 1 || legacy[0].Err != kerr.PolicyViolation {
		t.Errorf("AlterConfigs __consumer_offsets: %+v, want POLICY_VIOLATION", legacy)
	}
	for name, want := range map[string]error{
		"__consumer_offsets":  kerr.TopicAlreadyExists,
		"__transaction_state": kerr.InvalidRequest,
	} {
		created, err := adm.CreateTopics(ctx, 1, 1, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := created[name].Err; err != want {
			t.Errorf("CreateTopics %s: %v, want %v", name, err, want)
		}
	}

	configs, err := adm.DescribeTopicConfigs(ctx, "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	rc, err := configs.On("__consumer_offsets", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("DescribeConfigs __consumer_offsets: %v %v", err, rc.Err)
	}
	for _, cfg := range rc.Configs {
		if cfg.Key == "cleanup.policy" && (cfg.MaybeValue() != "compact" || cfg.Source != kmsg.ConfigSourceDynamicTopicConfig) {
			t.Errorf("cleanup.policy = %q from %v, want compact from the topic", cfg.MaybeValue(), cfg.Source)
		}
	}

	// Metadata with auto-creation allowed never creates either name; the view is unchanged.
	meta := kmsg.NewPtrMetadataRequest()
	meta.AllowAutoTopicCreation = true
	for _, name := range []string{"__consumer_offsets", "__transaction_state"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		meta.Topics = append(meta.Topics, rt)
	}
	mr, err := meta.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if mr.Topics[0].ErrorCode != 0 || !mr.Topics[0].IsInternal || mr.Topics[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("Metadata: __consumer_offsets error %d internal %v, __transaction_state error %d; want 0, true, UNKNOWN_TOPIC_OR_PARTITION",
			mr.Topics[0].ErrorCode, mr.Topics[0].IsInternal, mr.Topics[1].ErrorCode)
	}
	if topics := c.Broker(0).View.Snapshot().Topics; len(topics) != 0 {
		t.Errorf("the cluster has topics %v after the refused writes", topics)
	}
}

// newClient is a kgo client of one broker only, closed when the test ends.
func newClient(t *testing.T, addr string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// DescribeTopicPartitions (Java's Admin describeTopics) lists __consumer_offsets as Metadata
// does: internal, every partition, the same leaders.
func TestDescribeTopicPartitionsListsConsumerOffsetsAsMetadataDoes(t *testing.T) {
	c := brokertest.Start(t, brokertest.Options{Brokers: 2})
	conn := brokertest.Dial(t, c.Addrs()[0])
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit = 2000
	resp := conn.Request(req).(*kmsg.DescribeTopicPartitionsResponse)
	meta := conn.Request(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || *resp.Topics[0].Topic != "__consumer_offsets" || !resp.Topics[0].IsInternal || len(resp.Topics[0].Partitions) != 50 {
		t.Fatalf("DescribeTopicPartitions: %+v, want __consumer_offsets, internal, 50 partitions", resp.Topics)
	}
	for i, p := range resp.Topics[0].Partitions {
		if want := meta.Topics[0].Partitions[i].Leader; p.LeaderID != want || want < 0 {
			t.Fatalf("partition %d: leader %d, Metadata says %d", p.Partition, p.LeaderID, want)
		}
	}
}
