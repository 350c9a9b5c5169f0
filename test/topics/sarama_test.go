package topics

import (
	"errors"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"k8s.io/utils/ptr"
)

func newSaramaAdmin(t *testing.T, c *cluster) sarama.ClusterAdmin {
	t.Helper()
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_7_0_0
	cfg.Admin.Timeout = 10 * time.Second
	adm, err := sarama.NewClusterAdmin(c.Addrs, cfg)
	if err != nil {
		t.Fatalf("sarama admin: %v", err)
	}
	t.Cleanup(func() {
		if err := adm.Close(); err != nil {
			t.Errorf("close sarama admin: %v", err)
		}
	})
	return adm
}

func TestSaramaClusterAdmin(t *testing.T) {
	c := newCluster(t, 3, map[string]string{"log.retention.ms": "3600000"})
	adm := newSaramaAdmin(t, c)

	detail := &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1, ConfigEntries: map[string]*string{"segment.bytes": ptr.To("1048576")}}
	if err := adm.CreateTopic("orders", detail, true); err != nil {
		t.Fatalf("validate-only create: %v", err)
	}
	if c.topicObject("orders") != nil {
		t.Fatal("validate-only created the topic")
	}
	if err := adm.CreateTopic("orders", detail, false); err != nil {
		t.Fatalf("create: %v", err)
	}
	err := adm.CreateTopic("orders", detail, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Errorf("create again: %v, want TOPIC_ALREADY_EXISTS", err)
	}
	err = adm.CreateTopic("replicated", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 3}, false)
	if !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
		t.Errorf("create with RF 3: %v, want INVALID_REPLICATION_FACTOR", err)
	}
	err = adm.CreateTopic("Bad Name", &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrInvalidTopic) {
		t.Errorf("create with a bad name: %v, want INVALID_TOPIC_EXCEPTION", err)
	}

	// ListTopics asks any broker; the ones that did not answer the create see the
	// assignment a moment later.
	var orders sarama.TopicDetail
	eventually(t, "sarama to list orders with 3 partitions led, RF 1", func() bool {
		topics, err := adm.ListTopics()
		orders = topics["orders"]
		return err == nil && orders.NumPartitions == 3 && orders.ReplicationFactor == 1
	})
	// sarama lists the configs that are not Apache defaults: the topic's own and the cluster's.
	if v := orders.ConfigEntries["segment.bytes"]; v == nil || *v != "1048576" {
		t.Errorf("listed segment.bytes %v, want 1048576", v)
	}
	if v := orders.ConfigEntries["retention.ms"]; v == nil || *v != "3600000" {
		t.Errorf("listed retention.ms %v, want the cluster's 3600000", v)
	}
	var metadata []*sarama.TopicMetadata
	eventually(t, "sarama to describe orders with its id", func() bool {
		metadata, err = adm.DescribeTopics([]string{"orders"})
		if err != nil || len(metadata) != 1 || len(metadata[0].Partitions) != 3 || metadata[0].Uuid == ([16]byte{}) {
			return false
		}
		for _, p := range metadata[0].Partitions {
			if p.Leader < 0 || p.Err != sarama.ErrNoError {
				return false
			}
		}
		return true
	})

	described, err := adm.DescribeConfigs([]*sarama.ConfigResource{{Type: sarama.TopicResource, Name: "orders", ConfigNames: []string{"segment.bytes", "retention.ms"}}},
		sarama.DescribeConfigsOptions{IncludeDocumentation: true})
	if err != nil || len(described) != 1 || described[0].ErrorCode != sarama.ErrNoError || len(described[0].Configs) != 2 {
		t.Fatalf("describe configs: %+v %v", described, err)
	}
	for _, e := range described[0].Configs {
		want := map[string]sarama.ConfigSource{"segment.bytes": sarama.SourceTopic, "retention.ms": sarama.SourceDynamicDefaultBroker}[e.Name]
		if e.Source != want {
			t.Errorf("%s source %v, want %v", e.Name, e.Source, want)
		}
		if e.Type != sarama.IntConfigType && e.Name == "segment.bytes" || e.Type != sarama.LongConfigType && e.Name == "retention.ms" || e.Documentation == nil || *e.Documentation == "" {
			t.Errorf("%s: type %v, documentation %v; want INT/LONG and a documentation", e.Name, e.Type, e.Documentation)
		}
	}

	if err := adm.IncrementalAlterConfig(sarama.TopicResource, "orders", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptr.To("60000")},
	}, false); err != nil {
		t.Fatalf("incremental alter: %v", err)
	}
	if got := c.topicObject("orders").Spec.Config; got["retention.ms"] != "60000" || got["segment.bytes"] != "1048576" {
		t.Errorf("spec.config after the incremental alter %v", got)
	}
	if err := adm.AlterConfig(sarama.TopicResource, "orders", map[string]*string{"retention.ms": ptr.To("120000")}, false); err != nil {
		t.Fatalf("alter: %v", err)
	}
	if got := c.topicObject("orders").Spec.Config; len(got) != 1 || got["retention.ms"] != "120000" {
		t.Errorf("spec.config after the legacy alter %v, want only retention.ms", got)
	}
	err = adm.AlterConfig(sarama.TopicResource, "orders", map[string]*string{"min.compaction.lag.ms": ptr.To("2"), "max.compaction.lag.ms": ptr.To("1")}, false)
	if !errors.Is(err, sarama.ErrInvalidConfig) {
		t.Errorf("alter to a min compaction lag above the max: %v, want INVALID_CONFIG", err)
	}

	if err := adm.CreatePartitions("orders", 5, nil, false); err != nil {
		t.Fatalf("create partitions: %v", err)
	}
	if kt := c.topicObject("orders"); kt.Spec.Partitions != 5 {
		t.Errorf("partitions %d, want 5", kt.Spec.Partitions)
	}
	if err := adm.CreatePartitions("orders", 4, nil, false); !errors.Is(err, sarama.ErrInvalidPartitions) {
		t.Errorf("shrink: %v, want INVALID_PARTITIONS", err)
	}

	if err := adm.DeleteTopic("orders"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	eventually(t, "the deleted topic's KafkaTopic to go", func() bool { return c.topicObject("orders") == nil })
	if err := adm.DeleteTopic("orders"); !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		t.Errorf("delete again: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}
