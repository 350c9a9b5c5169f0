package topics

import (
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/test/kubebrokers"
)

var (
	kcatTopicLine     = regexp.MustCompile(`(?m)^\s*topic "([^"]+)" with (\d+) partitions:`)
	kcatPartitionLine = regexp.MustCompile(`(?m)^\s*partition (\d+), leader (-?\d+), replicas: ([\d,]*), isrs: ([\d,]*)`)
)

func TestKcatListsTopicsWithLeaders(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	if _, err := c.kadm().CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(ctx, "kcat", "-L", "-b", c.Addrs[1], "-m", "5", "-t", "orders").CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, out)
	}
	m := kcatTopicLine.FindSubmatch(out)
	if m == nil || string(m[1]) != "orders" || string(m[2]) != "3" {
		t.Fatalf("kcat -L does not list orders with 3 partitions:\n%s", out)
	}
	parts := kcatPartitionLine.FindAllSubmatch(out, -1)
	if len(parts) != 3 {
		t.Fatalf("kcat -L lists %d partitions, want 3:\n%s", len(parts), out)
	}
	for _, p := range parts {
		leader, _ := strconv.Atoi(string(p[2]))
		if leader < 0 || leader > 2 || string(p[3]) != string(p[2]) || string(p[4]) != string(p[2]) {
			t.Errorf("partition %s: leader %s, replicas %s, isrs %s; want one live leader that is the only replica and ISR", p[1], p[2], p[3], p[4])
		}
	}
}

func TestAProducerHittingANewTopicAutoCreatesIt(t *testing.T) {
	c := newCluster(t, 2, map[string]string{"num.partitions": "3"})
	ctx := testCtx(t)
	// A kgo producer that allows auto-creation (kgo's default is not to).
	producer := c.Kgo(kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("fresh"))
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	// Producing itself is the next issue's; the record may fail. The Metadata it sends first
	// creates the topic.
	_ = producer.ProduceSync(pctx, &kgo.Record{Value: []byte("hello")}).FirstErr()
	cancel()
	eventually(t, "the auto-created KafkaTopic", func() bool { return c.topicObject("fresh") != nil })
	kt := c.topicObject("fresh")
	if kt.Spec.Partitions != 3 || kt.Spec.Cluster != kubebrokers.ClusterName {
		t.Errorf("auto-created %+v, want num.partitions 3 of cluster %s", kt.Spec, kubebrokers.ClusterName)
	}

	// The first answer is UNKNOWN_TOPIC_OR_PARTITION, as in KRaft; once it exists Metadata
	// gives it with leaders.
	ask := func(name string, allow bool) int16 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = ptrString(name)
		req.Topics, req.AllowAutoTopicCreation = []kmsg.MetadataRequestTopic{rt}, allow
		resp, err := req.RequestWith(ctx, c.Kgo())
		if err != nil {
			t.Fatal(err)
		}
		return resp.Topics[0].ErrorCode
	}
	if code := ask("second", true); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("first Metadata for a new topic: error %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
	}
	eventually(t, "the second topic served", func() bool { return ask("second", true) == 0 })

	// Not created: without the client's permission, internal names, bad names.
	if code := ask("not-allowed", false); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("allow_auto_topic_creation=false: error %d", code)
	}
	if code := ask("__consumer_offsets", true); code != 0 {
		t.Errorf("__consumer_offsets (internal, always served): error %d", code)
	}
	if code := ask("__transaction_state", true); code != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("__transaction_state: error %d", code)
	}
	if code := ask("bad name", true); code != kerr.InvalidTopicException.Code {
		t.Errorf("a bad name: error %d, want INVALID_TOPIC_EXCEPTION", code)
	}
	time.Sleep(500 * time.Millisecond) // room for a wrong background creation to land
	// A name colliding with the internal topic's ('.' and '_' alike) is refused.
	created, err := c.kadm().CreateTopics(ctx, 1, 1, nil, "__consumer.offsets")
	if err != nil || created["__consumer.offsets"].Err != kerr.InvalidTopicException {
		t.Errorf("CreateTopics __consumer.offsets: %+v %v, want INVALID_TOPIC_EXCEPTION", created, err)
	}
	for _, name := range []string{"not-allowed", "__consumer_offsets", "__transaction_state", "__consumer.offsets"} {
		if kt := c.topicObject(name); kt != nil {
			t.Errorf("%s was created", name)
		}
	}
}

func TestAutoCreationFollowsTheClustersSetting(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"auto.create.topics.enable": "false"})
	ctx := testCtx(t)
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = ptrString("fresh")
	req.Topics, req.AllowAutoTopicCreation = []kmsg.MetadataRequestTopic{rt}, true
	for range 3 {
		resp, err := req.RequestWith(ctx, c.Kgo())
		if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("metadata: %+v %v", resp, err)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if kt := c.topicObject("fresh"); kt != nil {
		t.Errorf("auto.create.topics.enable=false, yet %s was created", kt.Name)
	}
}
