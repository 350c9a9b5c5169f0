package topics

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/utils/ptr"
)

// topicConfigs describes topic through adm and returns each config by key.
func topicConfigs(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) map[string]kadm.Config {
	t.Helper()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describe %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe %s: %v %v", topic, err, rc.Err)
	}
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out
}

func TestDescribeConfigsReportsApacheDefaultsSourcesAndTypes(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"log.segment.bytes": "1048576", "log.retention.hours": "1", "num.partitions": "2"})
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": ptr.To("2000000")}, "orders"); err != nil {
		t.Fatal(err)
	}
	got := topicConfigs(ctx, t, adm, "orders")
	for _, tt := range []struct {
		key, value string
		source     kmsg.ConfigSource
	}{
		{"max.message.bytes", "2000000", kmsg.ConfigSourceDynamicTopicConfig},
		{"segment.bytes", "1048576", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"retention.ms", "3600000", kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{"cleanup.policy", "delete", kmsg.ConfigSourceDefaultConfig},
		{"segment.ms", "604800000", kmsg.ConfigSourceDefaultConfig},
		{"message.timestamp.type", "CreateTime", kmsg.ConfigSourceDefaultConfig},
	} {
		cfg, ok := got[tt.key]
		if !ok || cfg.MaybeValue() != tt.value || cfg.Source != tt.source {
			t.Errorf("%s = %q (source %v), want %q from %v", tt.key, cfg.MaybeValue(), cfg.Source, tt.value, tt.source)
		}
	}
	// kadm asks for synonyms: the topic value first, then the broker key's and the default.
	syn := got["max.message.bytes"].Synonyms
	if len(syn) != 2 || syn[0].Key != "max.message.bytes" || syn[1].Key != "message.max.bytes" || syn[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("max.message.bytes synonyms %+v, want the topic value then message.max.bytes' default", syn)
	}

	// Types, documentation and IsDefault, with a raw v3 and v0 request.
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeDocumentation = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "orders", []string{"retention.ms", "preallocate", "cleanup.policy", "no.such.key"}
	req.Resources = []kmsg.DescribeConfigsRequestResource{res}
	resp, err := req.RequestWith(ctx, c.Kgo())
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]kmsg.ConfigType{}
	for _, cfg := range resp.Resources[0].Configs {
		types[cfg.Name] = cfg.ConfigType
		if cfg.Documentation == nil || *cfg.Documentation == "" {
			t.Errorf("%s has no documentation", cfg.Name)
		}
	}
	if !maps.Equal(types, map[string]kmsg.ConfigType{"retention.ms": kmsg.ConfigTypeLong, "preallocate": kmsg.ConfigTypeBoolean, "cleanup.policy": kmsg.ConfigTypeList}) {
		t.Errorf("types %v, want the three known keys (no.such.key left out) typed LONG, BOOLEAN, LIST", types)
	}
	req.Version = 0
	resp, err = req.RequestWith(ctx, c.Kgo(kgoMaxVersion(32, 0)))
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range resp.Resources[0].Configs {
		if want := cfg.Name != "retention.ms"; cfg.IsDefault != want {
			t.Errorf("v0 %s IsDefault %v, want %v", cfg.Name, cfg.IsDefault, want)
		}
	}

	// Unknown and invalid topics.
	rcs, _ := adm.DescribeTopicConfigs(ctx, "missing")
	if r, _ := rcs.On("missing", nil); !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("describe missing: %v, want UNKNOWN_TOPIC_OR_PARTITION", r.Err)
	}
}

func TestDescribeBrokerConfigs(t *testing.T) {
	c := newCluster(t, 2, map[string]string{"num.partitions": "4", "auto.create.topics.enable": "nope"})
	ctx := testCtx(t)
	adm := c.kadm()
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]kadm.Config{}
	for _, cfg := range rcs[0].Configs {
		byKey[cfg.Key] = cfg
	}
	if v := byKey["broker.id"]; v.MaybeValue() != "1" || v.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("broker.id %q %v, want 1 STATIC_BROKER_CONFIG", v.MaybeValue(), v.Source)
	}
	if v := byKey["num.partitions"]; v.MaybeValue() != "4" || v.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
		t.Errorf("num.partitions %q %v, want 4 from the cluster", v.MaybeValue(), v.Source)
	}
	if v := byKey["auto.create.topics.enable"]; v.MaybeValue() != "true" || v.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("auto.create.topics.enable %q %v, want the default: the cluster's value is malformed", v.MaybeValue(), v.Source)
	}
	if v := byKey["log.retention.ms"]; v.Value != nil {
		t.Errorf("log.retention.ms %q, want null as Apache", *v.Value)
	}
	cluster, err := adm.DescribeBrokerConfigs(ctx) // the "" resource: cluster-wide values set
	if err != nil || len(cluster) != 1 || len(cluster[0].Configs) != 1 || cluster[0].Configs[0].Key != "num.partitions" {
		t.Errorf("cluster-wide configs %+v %v, want only num.partitions (the malformed key is not applied)", cluster, err)
	}

	// Asking broker 0 about broker 1 is refused, as in Apache.
	req := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeBroker, "1"
	req.Resources = []kmsg.DescribeConfigsRequestResource{res}
	resp, err := c.Kgo().Broker(0).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*kmsg.DescribeConfigsResponse).Resources[0]; r.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("broker 0 describing broker 1: error %d, want INVALID_REQUEST", r.ErrorCode)
	}

	// Broker configs are the KafkaCluster's: altering them through Kafka is refused.
	alter, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "num.partitions", Value: ptr.To("9")}}, 0)
	if err != nil || len(alter) != 1 || !errors.Is(alter[0].Err, kerr.InvalidRequest) || !strings.Contains(alter[0].ErrMessage, "spec.config") {
		t.Errorf("alter broker configs: %+v %v, want INVALID_REQUEST pointing at the KafkaCluster", alter, err)
	}
}

func TestAlterConfigsIncrementalAndLegacyPatchTheKafkaTopic(t *testing.T) {
	c := newCluster(t, 1, nil)
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": ptr.To("60000"), "segment.ms": ptr.To("1000")}, "orders"); err != nil {
		t.Fatal(err)
	}
	// Incremental: SET one, DELETE one, APPEND to a list.
	resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr.To("120000")},
		{Op: kadm.DeleteConfig, Name: "segment.ms"},
		{Op: kadm.AppendConfig, Name: "follower.replication.throttled.replicas", Value: ptr.To("0:0")},
	}, "orders")
	if err != nil || resp[0].Err != nil {
		t.Fatalf("incremental alter: %+v %v", resp, err)
	}
	want := map[string]string{"retention.ms": "120000", "follower.replication.throttled.replicas": "0:0"}
	if got := c.topicObject("orders").Spec.Config; !maps.Equal(got, want) {
		t.Errorf("spec.config after the incremental alter %v, want %v", got, want)
	}
	got := topicConfigs(ctx, t, adm, "orders")
	if retention, segment := got["retention.ms"], got["segment.ms"]; retention.MaybeValue() != "120000" || segment.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("described after the alter: retention.ms %q, segment.ms from %v", retention.MaybeValue(), segment.Source)
	}

	// Refusals change nothing: unknown key, an empty cleanup.policy, append to a key that is
	// no list.
	for _, bad := range []struct {
		op   kadm.AlterConfig
		want error
	}{
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.msx", Value: ptr.To("1")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.SetConfig, Name: "cleanup.policy", Value: ptr.To("")}, kerr.InvalidConfig},
		{kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: ptr.To("1")}, kerr.InvalidConfig},
	} {
		resp, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "segment.bytes", Value: ptr.To("1048576")}, bad.op}, "orders")
		if err != nil || !errors.Is(resp[0].Err, bad.want) {
			t.Errorf("alter %+v: %+v %v, want %v", bad.op, resp, err, bad.want)
		}
	}
	if got := c.topicObject("orders").Spec.Config; !maps.Equal(got, want) {
		t.Errorf("spec.config after refused alters %v, want it unchanged %v", got, want)
	}
	if v, err := adm.ValidateAlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr.To("5")}}, "orders"); err != nil || v[0].Err != nil {
		t.Errorf("validate-only alter: %+v %v", v, err)
	}
	if got := c.topicObject("orders").Spec.Config; !maps.Equal(got, want) {
		t.Errorf("spec.config after a validate-only alter %v, want it unchanged", got)
	}

	// Legacy AlterConfigs replaces the whole set: retention.ms and the list revert.
	legacy, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: ptr.To("2097152")}}, "orders")
	if err != nil || legacy[0].Err != nil {
		t.Fatalf("legacy alter: %+v %v", legacy, err)
	}
	if got := c.topicObject("orders").Spec.Config; !maps.Equal(got, map[string]string{"segment.bytes": "2097152"}) {
		t.Errorf("spec.config after the legacy alter %v, want only segment.bytes", got)
	}
	missing, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: ptr.To("1")}}, "missing")
	if err != nil || !errors.Is(missing[0].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("alter of an unknown topic: %+v %v, want UNKNOWN_TOPIC_OR_PARTITION", missing, err)
	}
}
