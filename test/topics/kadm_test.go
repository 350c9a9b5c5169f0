package topics

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/topicname"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// led is true when every partition of leaders has one.
func led(leaders map[int32]int32, code int16) bool {
	for _, l := range leaders {
		if l < 0 {
			return false
		}
	}
	return code == 0 && len(leaders) > 0
}

func TestKadmCreatesATopicThatHasLeadersWhenTheAnswerComes(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	adm := c.kadm()
	resp, err := adm.CreateTopic(ctx, 6, 1, map[string]*string{"retention.ms": ptr.To("60000")}, "orders")
	if err != nil {
		t.Fatalf("create: %v (%s)", err, resp.ErrMessage)
	}
	if resp.NumPartitions != 6 || resp.ReplicationFactor != 1 || resp.ID == ([16]byte{}) {
		t.Errorf("created %+v, want 6 partitions, RF 1 and a topic id", resp)
	}
	// No waiting on the broker that answered (the controller): the answer waited for the
	// assignment to reach its view. The others follow within moments.
	leaders, code := c.leadersOn(ctx, 0, "orders")
	if len(leaders) != 6 || !led(leaders, code) {
		t.Fatalf("right after the create: leaders %v, error %d; want 6 partitions with leaders", leaders, code)
	}
	for id := 1; id < 3; id++ {
		eventually(t, "broker "+fmt.Sprint(id)+" to serve orders", func() bool { return led(c.leadersOn(ctx, id, "orders")) })
	}
	per := map[int32]int{}
	for p, l := range leaders {
		if l < 0 || l > 2 {
			t.Errorf("partition %d has leader %d", p, l)
		}
		per[l]++
	}
	if per[0] != 2 || per[1] != 2 || per[2] != 2 {
		t.Errorf("leaders per broker %v, want 2 each", per)
	}
	kt := c.topicObject("orders")
	if kt == nil || kt.Name != kubebrokers.ClusterName+".orders" || kt.Spec.Partitions != 6 || kt.Spec.Config["retention.ms"] != "60000" {
		t.Fatalf("KafkaTopic %+v, want object %s.orders with 6 partitions and retention.ms", kt, kubebrokers.ClusterName)
	}

	listed, err := adm.ListTopics(ctx)
	if err != nil || !slices.Contains(listed.Names(), "orders") {
		t.Fatalf("ListTopics = %v, %v; want orders", listed.Names(), err)
	}
	if id := listed["orders"].ID; id != resp.ID {
		t.Errorf("listed topic id %v, created %v", id, resp.ID)
	}
}

func TestKadmCreateNameMapsToADeterministicObjectName(t *testing.T) {
	c := newCluster(t, 1, nil)
	ctx := testCtx(t)
	adm := c.kadm()
	for _, name := range []string{"Orders_V2", "_private"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		kt := c.topicObject(name)
		if want := topicname.ObjectNameIn(kubebrokers.ClusterName, name); kt == nil || kt.Name != want || kt.Spec.TopicName != name {
			t.Fatalf("KafkaTopic for %s = %+v, want object %s with spec.topicName %s", name, kt, want, name)
		}
		if leaders, code := c.leadersOn(ctx, 0, name); !led(leaders, code) {
			t.Errorf("%s: leaders %v error %d", name, leaders, code)
		}
	}
}

func TestCreateTopicsRefusesWhatKafkaRefuses(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"num.partitions": "3"})
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "a.b"); err != nil {
		t.Fatal(err)
	}
	type want struct {
		err     error
		message string
	}
	for _, tt := range []struct {
		name       string
		partitions int32
		rf         int16
		configs    map[string]*string
		want       want
	}{
		{name: "", partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "empty string"}},
		{name: ".", partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "'.' is not allowed"}},
		{name: "..", partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "'..' is not allowed"}},
		{name: strings.Repeat("x", 250), partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "249"}},
		{name: "a b", partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "ASCII alphanumerics"}},
		{name: "a_b", partitions: 1, rf: 1, want: want{kerr.InvalidTopicException, "collides with existing topic: a.b"}},
		{name: "a.b", partitions: 1, rf: 1, want: want{kerr.TopicAlreadyExists, "already exists"}},
		{name: "zero", partitions: 0, rf: 1, want: want{kerr.InvalidPartitions, "non-positive"}},
		{name: "minus-two", partitions: -2, rf: 1, want: want{kerr.InvalidPartitions, "non-positive"}},
		{name: "huge", partitions: 10001, rf: 1, want: want{kerr.InvalidPartitions, "10000"}},
		{name: "rf3", partitions: 1, rf: 3, want: want{kerr.InvalidReplicationFactor, "shared volume"}},
		{name: "rf0", partitions: 1, rf: 0, want: want{kerr.InvalidReplicationFactor, "larger than 0"}},
		{name: "unknown-config", partitions: 1, rf: 1, configs: map[string]*string{"retention.msx": ptr.To("1")}, want: want{kerr.InvalidConfig, "retention.msx"}},
		{name: "no-policy", partitions: 1, rf: 1, configs: map[string]*string{"cleanup.policy": ptr.To("")}, want: want{kerr.InvalidConfig, "must name a policy"}},
		{name: "lags", partitions: 1, rf: 1, configs: map[string]*string{"min.compaction.lag.ms": ptr.To("2"), "max.compaction.lag.ms": ptr.To("1")},
			want: want{kerr.InvalidConfig, "conflict topic config setting min.compaction.lag.ms (2) > max.compaction.lag.ms (1)"}},
		{name: "null-config", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": nil}, want: want{kerr.InvalidConfig, "Null value"}},
		{name: "bad-value", partitions: 1, rf: 1, configs: map[string]*string{"retention.ms": ptr.To("soon")}, want: want{kerr.InvalidConfig, "64-bit integer"}},
	} {
		resp, err := adm.CreateTopic(ctx, tt.partitions, tt.rf, tt.configs, tt.name)
		if !errors.Is(err, tt.want.err) || !strings.Contains(resp.ErrMessage, tt.want.message) {
			t.Errorf("create %.20q (partitions %d, rf %d, configs %v): %v %q; want %v with a message containing %q",
				tt.name, tt.partitions, tt.rf, tt.configs, err, resp.ErrMessage, tt.want.err, tt.want.message)
		}
		if tt.want.err != kerr.TopicAlreadyExists && c.topicObject(tt.name) != nil {
			t.Errorf("refused create %.20q left a KafkaTopic behind", tt.name)
		}
	}

	// -1/-1: the cluster's num.partitions and one replica.
	resp, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults")
	if err != nil || resp.NumPartitions != 3 || resp.ReplicationFactor != 1 {
		t.Errorf("create with -1/-1: %+v %v; want num.partitions 3 and RF 1", resp, err)
	}

	// validate_only checks everything and creates nothing.
	v, err := adm.ValidateCreateTopics(ctx, 4, 1, map[string]*string{"segment.bytes": ptr.To("1048576")}, "dry")
	if err != nil || v["dry"].Err != nil || v["dry"].NumPartitions != 4 {
		t.Errorf("validate-only create: %+v %v; want success with 4 partitions", v["dry"], err)
	}
	if bad, _ := adm.ValidateCreateTopics(ctx, 1, 3, nil, "dry-rf"); !errors.Is(bad["dry-rf"].Err, kerr.InvalidReplicationFactor) {
		t.Errorf("validate-only with RF 3: %v, want INVALID_REPLICATION_FACTOR", bad["dry-rf"].Err)
	}
	if kt := c.topicObject("dry"); kt != nil {
		t.Errorf("validate-only created %s", kt.Name)
	}

	// A name twice in one request: both refused; manual assignments refused.
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	for range 2 {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "twice", 1, 1
		req.Topics = append(req.Topics, rt)
	}
	manual := kmsg.NewCreateTopicsRequestTopic()
	manual.Topic, manual.NumPartitions, manual.ReplicationFactor = "manual", -1, -1
	manual.ReplicaAssignment = []kmsg.CreateTopicsRequestTopicReplicaAssignment{{Partition: 0, Replicas: []int32{0}}}
	req.Topics = append(req.Topics, manual)
	raw, err := req.RequestWith(ctx, c.Kgo())
	if err != nil {
		t.Fatal(err)
	}
	for i, wantCode := range []int16{kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.InvalidReplicaAssignment.Code} {
		if raw.Topics[i].ErrorCode != wantCode {
			t.Errorf("topic %d (%s): error %d, want %d", i, raw.Topics[i].Topic, raw.Topics[i].ErrorCode, wantCode)
		}
	}
}

// TestCreatesBeyondTheClusterLimitsAreAPolicyViolation: spec.limits bound the topics and
// partitions the admin APIs and auto-creation make (each is etcd data); past them CreateTopics
// and CreatePartitions answer POLICY_VIOLATION naming the limit and create nothing.
func TestCreatesBeyondTheClusterLimitsAreAPolicyViolation(t *testing.T) {
	c := &cluster{kubebrokers.NewCluster(t, 1, kubebrokers.Options{Namespace: "topics",
		Config: map[string]string{"num.partitions": "2"}, Limits: v1alpha1.ClusterLimits{MaxTopics: 3, MaxPartitions: 7}})}
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "four"); err != nil {
		t.Fatal(err)
	}
	// Two topics of two partitions in one request: the second would make 8 partitions.
	resps, err := adm.CreateTopics(ctx, 2, 1, nil, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	created, refused := 0, 0
	for _, r := range resps {
		switch {
		case r.Err == nil:
			created++
		case errors.Is(r.Err, kerr.PolicyViolation) && strings.Contains(r.ErrMessage, "spec.limits.maxPartitions (7)"):
			refused++
			if c.topicObject(r.Topic) != nil {
				t.Errorf("refused topic %s has a KafkaTopic", r.Topic)
			}
		default:
			t.Errorf("create %s: %v %q", r.Topic, r.Err, r.ErrMessage)
		}
	}
	if created != 1 || refused != 1 {
		t.Fatalf("%d created, %d refused; want one of each (the limit counts the request's own topics)", created, refused)
	}
	eventually(t, "the created topic is in the view", func() bool { return len(c.topicsOn(ctx, 0)) == 2 })
	grow, err := adm.CreatePartitions(ctx, 2, "four")
	if err != nil || !errors.Is(grow["four"].Err, kerr.PolicyViolation) || !strings.Contains(grow["four"].ErrMessage, "maxPartitions") {
		t.Fatalf("growing past maxPartitions: %v %+v, want POLICY_VIOLATION", err, grow["four"])
	}
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "small"); err != nil {
		t.Fatalf("the 3rd topic, 7th partition: %v", err)
	}
	if r, err := adm.CreateTopic(ctx, 1, 1, nil, "fourth"); !errors.Is(err, kerr.PolicyViolation) || !strings.Contains(r.ErrMessage, "spec.limits.maxTopics (3)") {
		t.Fatalf("a 4th topic: %v %q, want POLICY_VIOLATION naming maxTopics", err, r.ErrMessage)
	}
}
