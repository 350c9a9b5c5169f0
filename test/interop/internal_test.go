package interop

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
)

// TestSaramaClusterAdminListsConsumerOffsetsAsInternal: sarama's ClusterAdmin lists
// __consumer_offsets among the topics, describes it as internal with 50 partitions each led
// by a live broker, reads cleanup.policy=compact for it, and is refused deleting it.
func TestSaramaClusterAdminListsConsumerOffsetsAsInternal(t *testing.T) {
	addrs := newCluster(t)
	createTopic(t, addrs, "sarama-plain", 1)
	admin, err := sarama.NewClusterAdmin(addrs, saramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	topics, err := admin.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := topics["__consumer_offsets"]; !ok || d.NumPartitions != 50 {
		t.Fatalf("ListTopics: __consumer_offsets %+v (listed %v), want 50 partitions", d, ok)
	}
	md, err := admin.DescribeTopics([]string{"__consumer_offsets", "sarama-plain"})
	if err != nil {
		t.Fatal(err)
	}
	if len(md) != 2 || md[0].Name != "__consumer_offsets" || !md[0].IsInternal || len(md[0].Partitions) != 50 || md[1].IsInternal {
		t.Fatalf("DescribeTopics: %+v, want __consumer_offsets internal with 50 partitions and sarama-plain not internal", md)
	}
	for _, p := range md[0].Partitions {
		if p.Err != sarama.ErrNoError || p.Leader < 0 || p.Leader > 1 {
			t.Errorf("partition %d: leader %d, error %v; want one of the two brokers", p.ID, p.Leader, p.Err)
		}
	}
	described, err := admin.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: "__consumer_offsets", ConfigNames: []string{"cleanup.policy"}}},
		sarama.DescribeConfigsOptions{})
	if err != nil || len(described) != 1 || len(described[0].Configs) != 1 || described[0].Configs[0].Value != "compact" {
		t.Errorf("DescribeConfigs cleanup.policy: %+v %v, want compact", described, err)
	}
	if err := admin.DeleteTopic("__consumer_offsets"); err == nil || !strings.Contains(err.Error(), sarama.ErrTopicDeletionDisabled.Error()) {
		t.Errorf("DeleteTopic __consumer_offsets: %v, want %v", err, sarama.ErrTopicDeletionDisabled)
	}
}

// TestKafkajsAdminListsConsumerOffsets runs js/internal.js: kafkajs's admin lists
// __consumer_offsets, gives its partitions and leaders, reads cleanup.policy=compact, and the
// Metadata answer kafkajs decodes marks it internal (kafkajs's admin API does not surface
// the flag, so the script reads it from kafkajs's own Metadata decoding).
func TestKafkajsAdminListsConsumerOffsets(t *testing.T) {
	node := requireKafkajs(t)
	addrs := newCluster(t)
	cmd := exec.CommandContext(testCtx(t), node, filepath.Join("js", "internal.js"), strings.Join(addrs, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node js/internal.js: %v\n%s", err, stderr.Bytes())
	}
	var res struct {
		Listed     bool   `json:"listed"`
		Partitions int    `json:"partitions"`
		Leaders    []int  `json:"leaders"`
		Internal   bool   `json:"internal"`
		Cleanup    string `json:"cleanupPolicy"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("js/internal.js output: %v\n%s", err, out)
	}
	if !res.Listed || res.Partitions != 50 || !res.Internal || res.Cleanup != "compact" {
		t.Fatalf("kafkajs sees %+v, want __consumer_offsets listed, 50 partitions, internal, cleanup.policy compact", res)
	}
	for p, l := range res.Leaders {
		if l < 0 || l > 1 {
			t.Errorf("partition %d: leader %d, want one of the two brokers", p, l)
		}
	}
}
