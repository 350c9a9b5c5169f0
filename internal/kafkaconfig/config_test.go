package kafkaconfig

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTheTablesAreSortedAndEveryDefaultPassesItsOwnCheck(t *testing.T) {
	for name, table := range map[string][]Key{"topic": topicKeys, "broker": brokerKeys} {
		if !slices.IsSortedFunc(table, func(a, b Key) int { return strings.Compare(a.Name, b.Name) }) {
			t.Errorf("%s keys are not sorted by name", name)
		}
		for _, k := range table {
			if k.Doc == "" {
				t.Errorf("%s key %s has no doc", name, k.Name)
			}
			if !k.HasDefault || k.ReadOnly {
				continue
			}
			if err := check(table, name, k.Name, k.Default); err != nil {
				t.Errorf("%s key %s: its own default fails: %v", name, k.Name, err)
			}
		}
	}
}

func TestEveryTopicKeysSynonymInTheBrokerTableHasTheSameType(t *testing.T) {
	for _, k := range topicKeys {
		for _, s := range k.Synonyms {
			bk, ok := BrokerKey(s.Name)
			if !ok {
				continue // an Apache broker key paddock does not read
			}
			scaledIntoLong := s.Scale != 1 && bk.Type == Int && k.Type == Long // hours or minutes into ms
			if bk.Type != k.Type && !scaledIntoLong {
				t.Errorf("%s (%d) and its synonym %s (%d) differ in type", k.Name, k.Type, s.Name, bk.Type)
			}
		}
	}
}

func TestUnknownKeysAreRefused(t *testing.T) {
	if err := CheckTopic("retention.msx", "1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("CheckTopic(retention.msx) = %v, want ErrUnknownKey", err)
	}
	if err := CheckBroker("retention.ms", "1"); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("CheckBroker(retention.ms) = %v, want ErrUnknownKey (the broker key is log.retention.ms)", err)
	}
	if err := CheckBroker("broker.id", "3"); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("CheckBroker(broker.id) = %v, want read-only", err)
	}
}

func TestValuesAreCheckedAgainstTypeRangeAndWhatPaddockHonours(t *testing.T) {
	for _, tt := range []struct {
		key, value string
		broker     bool
		wantErr    string // "" = valid
	}{
		{key: "retention.ms", value: "1000"},
		{key: "retention.ms", value: " -1 "},
		{key: "retention.ms", value: "-2", wantErr: "at least -1"},
		{key: "retention.ms", value: "1h", wantErr: "64-bit integer"},
		{key: "segment.bytes", value: "13", wantErr: "at least 14"},
		{key: "segment.bytes", value: "4294967296", wantErr: "32-bit integer"},
		{key: "message.timestamp.type", value: "LogAppendTime"},
		{key: "message.timestamp.type", value: "logappendtime", wantErr: "CreateTime, LogAppendTime"},
		{key: "preallocate", value: "TRUE"},
		{key: "preallocate", value: "yes", wantErr: "true or false"},
		{key: "min.cleanable.dirty.ratio", value: "0.25"},
		{key: "min.cleanable.dirty.ratio", value: "1.5", wantErr: "between 0 and 1"},
		{key: "cleanup.policy", value: "delete"},
		{key: "cleanup.policy", value: "compact"},
		{key: "cleanup.policy", value: "compact,delete"},
		{key: "cleanup.policy", value: "delete,compact"},
		{key: "cleanup.policy", value: "compact, delete"},
		{key: "cleanup.policy", value: " delete , compact "},
		{key: "cleanup.policy", value: "shred", wantErr: "not a cleanup policy"},
		{key: "cleanup.policy", value: "compact,shred", wantErr: "not a cleanup policy"},
		{key: "cleanup.policy", value: "Compact", wantErr: "not a cleanup policy"},
		{key: "cleanup.policy", value: "", wantErr: "must name a policy"},
		{key: "cleanup.policy", value: " , ", wantErr: "must name a policy"},
		{key: "delete.retention.ms", value: "0"},
		{key: "delete.retention.ms", value: "-1", wantErr: "at least 0"},
		{key: "min.compaction.lag.ms", value: "-1", wantErr: "at least 0"},
		{key: "max.compaction.lag.ms", value: "0", wantErr: "at least 1"},
		{key: "min.cleanable.dirty.ratio", value: "-0.1", wantErr: "between 0 and 1"},
		{key: "compression.type", value: "producer"},
		{key: "compression.type", value: "zstd", wantErr: "recompression is not implemented"},
		{key: "min.insync.replicas", value: "2", wantErr: "one replica per partition"},
		{key: "remote.storage.enable", value: "true", wantErr: "only false"},
		{key: "num.partitions", value: "12", broker: true},
		{key: "num.partitions", value: "0", broker: true, wantErr: "between 1 and 10000"},
		{key: "auto.create.topics.enable", value: "false", broker: true},
		{key: "default.replication.factor", value: "3", broker: true, wantErr: "one replica per partition"},
		{key: "log.retention.ms", value: "60000", broker: true},
		{key: "log.cleanup.policy", value: "compact", broker: true},
		{key: "log.cleanup.policy", value: "delete, compact", broker: true},
		{key: "log.cleanup.policy", value: "", broker: true, wantErr: "must name a policy"},
		{key: "log.cleanup.policy", value: "archive", broker: true, wantErr: "not a cleanup policy"},
		{key: "log.cleaner.enable", value: "false", broker: true},
		{key: "log.cleaner.backoff.ms", value: "0", broker: true},
		{key: "log.cleaner.backoff.ms", value: "-1", broker: true, wantErr: "at least 0"},
		{key: "log.cleaner.dedupe.buffer.size", value: "1048576", broker: true},
		{key: "log.cleaner.dedupe.buffer.size", value: "1048575", broker: true, wantErr: "at least 1048576"},
		{key: "log.cleaner.io.buffer.size", value: "-1", broker: true, wantErr: "at least 0"},
		{key: "log.cleaner.io.buffer.size", value: "4294967296", broker: true, wantErr: "32-bit integer"},
		{key: "log.cleaner.io.max.bytes.per.second", value: "1048576.5", broker: true},
		{key: "log.cleaner.io.max.bytes.per.second", value: "0", broker: true, wantErr: "above 0"},
		{key: "log.cleaner.min.cleanable.ratio", value: "1.01", broker: true, wantErr: "between 0 and 1"},
		{key: "log.cleaner.delete.retention.ms", value: "-1", broker: true, wantErr: "at least 0"},
		{key: "log.cleaner.max.compaction.lag.ms", value: "0", broker: true, wantErr: "at least 1"},
		{key: "group.initial.rebalance.delay.ms", value: "0", broker: true},
		{key: "group.initial.rebalance.delay.ms", value: "-1", broker: true, wantErr: "at least 0"},
		{key: "group.max.size", value: "0", broker: true, wantErr: "at least 1"},
		{key: "group.min.session.timeout.ms", value: "1000", broker: true},
		{key: "offset.metadata.max.bytes", value: "1024", broker: true},
		{key: "offsets.retention.minutes", value: "60", broker: true},
		{key: "offsets.retention.minutes", value: "0", broker: true, wantErr: "at least 1"},
		{key: "offsets.topic.num.partitions", value: "12", broker: true},
		{key: "offsets.topic.num.partitions", value: "0", broker: true, wantErr: "between 1 and 1000"},
	} {
		var err error
		if tt.broker {
			err = CheckBroker(tt.key, tt.value)
		} else {
			err = CheckTopic(tt.key, tt.value)
		}
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s=%q: %v, want valid", tt.key, tt.value, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s=%q: %v, want an error containing %q", tt.key, tt.value, err, tt.wantErr)
		case err != nil && !strings.Contains(err.Error(), tt.key):
			t.Errorf("%s=%q: error %q does not name the key", tt.key, tt.value, err)
		}
	}
}

func TestCheckConfigListsEveryProblemSortedByKey(t *testing.T) {
	got := CheckTopicConfig(map[string]string{"retention.ms": "x", "cleanup.policy": "shred", "segment.ms": "10", "bogus": "1"})
	var keys []string
	for _, p := range got {
		keys = append(keys, p.Key)
	}
	if !slices.Equal(keys, []string{"bogus", "cleanup.policy", "retention.ms"}) {
		t.Fatalf("problems for %v, want bogus, cleanup.policy, retention.ms", keys)
	}
	if s := Summary(got); !strings.Contains(s, `"bogus"`) || !strings.Contains(s, "cleanup.policy") || !strings.Contains(s, "retention.ms") {
		t.Errorf("Summary = %q", s)
	}
}

func TestATopicValueWinsOverTheClusterValueWhichWinsOverTheDefault(t *testing.T) {
	cluster := map[string]string{"log.retention.ms": "3600000", "log.segment.bytes": "1048576", "num.partitions": "3"}
	topic := map[string]string{"retention.ms": "60000"}
	got := ResolveTopic(topic, cluster)
	if got.RetentionMs != 60000 || got.SegmentBytes != 1048576 || got.MaxMessageBytes != 1048588 {
		t.Errorf("ResolveTopic = %+v, want retention.ms 60000 (topic), segment.bytes 1048576 (cluster), max.message.bytes 1048588 (default)", got)
	}
	sources := map[string]Source{}
	for _, e := range DescribeTopic(topic, cluster) {
		sources[e.Key.Name] = e.Value.Source
	}
	if sources["retention.ms"] != SourceTopic || sources["segment.bytes"] != SourceClusterDefault || sources["max.message.bytes"] != SourceDefault {
		t.Errorf("sources = retention.ms %d, segment.bytes %d, max.message.bytes %d; want 1, 3, 5",
			sources["retention.ms"], sources["segment.bytes"], sources["max.message.bytes"])
	}
}

func TestRetentionComesFromLogRetentionMsThenMinutesThenHours(t *testing.T) {
	for _, tt := range []struct {
		cluster map[string]string
		want    int64
		synonym string
	}{
		{nil, 7 * 24 * 3_600_000, "log.retention.hours"},
		{map[string]string{"log.retention.hours": "1"}, 3_600_000, "log.retention.hours"},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000, "log.retention.minutes"},
		{map[string]string{"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5, "log.retention.ms"},
		{map[string]string{"log.retention.ms": "oops", "log.retention.minutes": "2"}, 120_000, "log.retention.minutes"},
	} {
		if got := ResolveTopic(nil, tt.cluster).RetentionMs; got != tt.want {
			t.Errorf("cluster %v: retention.ms %d, want %d", tt.cluster, got, tt.want)
		}
		k, _ := TopicKey("retention.ms")
		if e := describeTopicKey(k, nil, tt.cluster); e.Synonyms[0].Name != tt.synonym {
			t.Errorf("cluster %v: first synonym %s, want %s", tt.cluster, e.Synonyms[0].Name, tt.synonym)
		}
	}
}

func TestInvalidEntriesAreNotApplied(t *testing.T) {
	got := ResolveTopic(map[string]string{"cleanup.policy": "shred", "segment.ms": "0"}, map[string]string{"log.roll.hours": "1"})
	if got.CleanupPolicy != "delete" || got.SegmentMs != 3_600_000 {
		t.Errorf("ResolveTopic = %+v, want cleanup.policy delete and segment.ms from log.roll.hours", got)
	}
	c := ResolveCluster(map[string]string{"num.partitions": "-3", "auto.create.topics.enable": "nope"})
	if c.NumPartitions != 1 || !c.AutoCreateTopics || !c.DeleteTopicEnable {
		t.Errorf("ResolveCluster = %+v, want the defaults for the malformed keys", c)
	}
}

func TestOffsetsRetentionMinutesResolvesToADuration(t *testing.T) {
	if c := ResolveCluster(map[string]string{"offsets.retention.minutes": "90"}); c.OffsetsRetention != 90*time.Minute {
		t.Errorf("offsets.retention.minutes=90 resolves to %v", c.OffsetsRetention)
	}
}

// TestAGroupSessionTimeoutRangeThatIsNotOneIsIgnored: a min session timeout above the max
// resolves both keys to their defaults (the coordinator needs a range); each valid alone.
func TestAGroupSessionTimeoutRangeThatIsNotOneIsIgnored(t *testing.T) {
	c := ResolveCluster(map[string]string{"group.min.session.timeout.ms": "60000", "group.max.session.timeout.ms": "30000", "group.max.size": "5"})
	if c.GroupMinSessionTimeout != 6*time.Second || c.GroupMaxSessionTimeout != 30*time.Minute || c.GroupMaxSize != 5 {
		t.Errorf("ResolveCluster = %+v, want the default session range and group.max.size 5", c)
	}
	c = ResolveCluster(map[string]string{"group.min.session.timeout.ms": "1000", "group.max.session.timeout.ms": "30000"})
	if c.GroupMinSessionTimeout != time.Second || c.GroupMaxSessionTimeout != 30*time.Second {
		t.Errorf("ResolveCluster = %+v, want the range 1 s – 30 s", c)
	}
}

func TestClusterConfigDefaultsAreApaches(t *testing.T) {
	c := ResolveCluster(nil)
	want := ClusterConfig{NumPartitions: 1, AutoCreateTopics: true, DeleteTopicEnable: true, RetentionCheckInterval: 5 * time.Minute, ProducerIDExpirationMs: 86_400_000,
		GroupInitialRebalanceDelay: 3 * time.Second, GroupMinSessionTimeout: 6 * time.Second, GroupMaxSessionTimeout: 30 * time.Minute,
		GroupMaxSize: math.MaxInt32, OffsetMetadataMaxBytes: 4096, OffsetsRetention: 7 * 24 * time.Hour,
		ConsumerProtocol: true, ConsumerHeartbeatInterval: 5 * time.Second, ConsumerSessionTimeout: 45 * time.Second,
		ConsumerMaxSize: math.MaxInt32, ConsumerAssignors: []string{"uniform", "range"}, OffsetsTopicPartitions: 50,
		CleanerEnable: true, CleanerDedupeBufferBytes: 128 << 20, CleanerIOMaxBytesPerSecond: math.Inf(1), CleanerBackoff: 15 * time.Second,
		CleanerIOBufferBytes: 512 << 10}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ResolveCluster(nil) = %+v, want %+v", c, want)
	}
	topic := ResolveTopic(nil, nil)
	if topic.SegmentBytes != 1<<30 || topic.SegmentMs != 604_800_000 || topic.RetentionBytes != -1 || topic.MessageTimestampType != "CreateTime" || topic.LogAppendTime() ||
		topic.CleanupPolicy != "delete" || topic.DeleteRetentionMs != 86_400_000 || topic.MinCompactionLagMs != 0 || topic.MaxCompactionLagMs != math.MaxInt64 ||
		topic.MinCleanableDirtyRatio != 0.5 {
		t.Errorf("ResolveTopic(nil, nil) = %+v, want Apache's defaults", topic)
	}
}

func TestDescribeBrokerReportsTheClusterValuesOverDefaultsAndBrokerIDStatic(t *testing.T) {
	entries := DescribeBroker(2, map[string]string{"num.partitions": "6", "auto.create.topics.enable": "x"}, nil)
	got := map[string]Value{}
	for _, e := range entries {
		got[e.Key.Name] = e.Value
	}
	if v := got["broker.id"]; v.Value != "2" || v.Source != SourceStatic {
		t.Errorf("broker.id = %+v, want 2 static", v)
	}
	if v := got["num.partitions"]; v.Value != "6" || v.Source != SourceClusterDefault {
		t.Errorf("num.partitions = %+v, want 6 from the cluster", v)
	}
	if v := got["auto.create.topics.enable"]; v.Value != "true" || v.Source != SourceDefault {
		t.Errorf("auto.create.topics.enable = %+v, want the default (the cluster's value is malformed)", v)
	}
	if v := got["log.retention.ms"]; !v.Null {
		t.Errorf("log.retention.ms = %+v, want null as in Apache", v)
	}
	defaults := DescribeClusterDefaults(map[string]string{"num.partitions": "6", "bogus": "1"})
	if len(defaults) != 1 || defaults[0].Value.Name != "num.partitions" {
		t.Errorf("DescribeClusterDefaults = %+v, want only num.partitions", defaults)
	}
}

func TestDescribeBrokerReportsTheStaticKeysAsTheBrokerRuns(t *testing.T) {
	cluster := map[string]string{"queued.max.response.bytes": "536870912", "socket.request.max.bytes": "1048576"}
	running := map[string]string{
		"queued.max.request.bytes":  "134217728", // the operator's share of the memory limit
		"queued.max.response.bytes": "268435456", // spec.config's refused: the default runs
		"socket.request.max.bytes":  "1048576",   // spec.config's, applied
	}
	got := map[string]Entry{}
	for _, e := range DescribeBroker(1, cluster, running) {
		got[e.Key.Name] = e
	}
	for name, want := range map[string]Value{
		"queued.max.request.bytes":  {Name: "queued.max.request.bytes", Value: "134217728", Source: SourceStatic},
		"queued.max.response.bytes": {Name: "queued.max.response.bytes", Value: "268435456", Source: SourceDefault},
		"socket.request.max.bytes":  {Name: "socket.request.max.bytes", Value: "1048576", Source: SourceClusterDefault},
	} {
		if e := got[name]; e.Value != want {
			t.Errorf("%s = %+v, want %+v", name, e.Value, want)
		}
	}
	if syns := got["queued.max.request.bytes"].Synonyms; len(syns) != 2 || syns[1].Source != SourceDefault || syns[1].Value != "268435456" {
		t.Errorf("a static value's synonyms %+v, want it and the default", syns)
	}
}

func TestTheConsumerProtocolKeysResolve(t *testing.T) {
	c := ResolveCluster(nil)
	if !c.ConsumerProtocol || c.ConsumerHeartbeatInterval != 5*time.Second || c.ConsumerSessionTimeout != 45*time.Second ||
		!slices.Equal(c.ConsumerAssignors, []string{"uniform", "range"}) {
		t.Fatalf("defaults: %+v", c)
	}
	c = ResolveCluster(map[string]string{
		"group.coordinator.rebalance.protocols": "classic",
		"group.consumer.assignors":              "org.apache.kafka.coordinator.group.assignor.RangeAssignor",
		"group.consumer.heartbeat.interval.ms":  "60000",
	})
	if c.ConsumerProtocol || !slices.Equal(c.ConsumerAssignors, []string{"range"}) || c.ConsumerHeartbeatInterval != 5*time.Second {
		t.Fatalf("classic only, range, an interval above the session: %+v", c)
	}
	for _, bad := range []map[string]string{
		{"group.coordinator.rebalance.protocols": "consumer"},
		{"group.coordinator.rebalance.protocols": "classic,share"},
		{"group.consumer.assignors": "sticky"},
	} {
		for k, v := range bad {
			if err := CheckBroker(k, v); err == nil {
				t.Errorf("%s=%s accepted", k, v)
			}
		}
	}
}

func TestCleanupPolicyIsTheValueAsSetAndCompactAndDeleteParseIt(t *testing.T) {
	for _, tt := range []struct {
		topic, cluster  map[string]string
		policy          string
		compact, delete bool
	}{
		{nil, nil, "delete", false, true},
		{map[string]string{"cleanup.policy": "compact"}, nil, "compact", true, false},
		{map[string]string{"cleanup.policy": "compact, delete"}, nil, "compact,delete", true, true},
		{map[string]string{"cleanup.policy": "delete,compact"}, nil, "delete,compact", true, true},
		{nil, map[string]string{"log.cleanup.policy": "compact"}, "compact", true, false},
		{map[string]string{"cleanup.policy": "delete"}, map[string]string{"log.cleanup.policy": "compact"}, "delete", false, true},
		{map[string]string{"cleanup.policy": ""}, map[string]string{"log.cleanup.policy": "compact"}, "compact", true, false},
	} {
		got := ResolveTopic(tt.topic, tt.cluster)
		if got.CleanupPolicy != tt.policy || got.Compact() != tt.compact || got.Delete() != tt.delete {
			t.Errorf("topic %v, cluster %v: cleanup.policy %q compact %v delete %v, want %q %v %v",
				tt.topic, tt.cluster, got.CleanupPolicy, got.Compact(), got.Delete(), tt.policy, tt.compact, tt.delete)
		}
	}
	for _, e := range DescribeTopic(map[string]string{"cleanup.policy": "compact"}, nil) {
		if e.Key.Name == "cleanup.policy" && (e.Value.Value != "compact" || e.Value.Source != SourceTopic) {
			t.Errorf("DescribeTopic cleanup.policy = %+v, want compact from the topic", e.Value)
		}
	}
}

func TestTheCompactionKeysResolveFromTheTopicThenTheCleanerKeys(t *testing.T) {
	cluster := map[string]string{"log.cleaner.delete.retention.ms": "1000", "log.cleaner.min.cleanable.ratio": "0.1",
		"log.cleaner.min.compaction.lag.ms": "5", "log.cleaner.max.compaction.lag.ms": "50"}
	got := ResolveTopic(map[string]string{"min.cleanable.dirty.ratio": "0.75", "max.compaction.lag.ms": "60"}, cluster)
	if got.DeleteRetentionMs != 1000 || got.MinCleanableDirtyRatio != 0.75 || got.MinCompactionLagMs != 5 || got.MaxCompactionLagMs != 60 {
		t.Errorf("ResolveTopic = %+v, want delete.retention.ms 1000, ratio 0.75, lags 5 and 60", got)
	}
}

// TestAMinCompactionLagAboveTheMaxIsAConflict: Apache's LogConfig.validateValues on the
// effective values, the cluster's cleaner keys included; equal lags are fine, and an entry
// that fails its own check takes no part.
func TestAMinCompactionLagAboveTheMaxIsAConflict(t *testing.T) {
	for _, tt := range []struct {
		rule           string
		topic, cluster map[string]string
		want           string // "" = no conflict
	}{
		{"the defaults are a range", nil, nil, ""},
		{"equal lags are a range", map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"}, nil, ""},
		{"the topic's min above its max", map[string]string{"min.compaction.lag.ms": "11", "max.compaction.lag.ms": "10"}, nil,
			"conflict topic config setting min.compaction.lag.ms (11) > max.compaction.lag.ms (10)"},
		{"the topic's min above the cluster's max", map[string]string{"min.compaction.lag.ms": "100"}, map[string]string{"log.cleaner.max.compaction.lag.ms": "50"},
			"conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)"},
		{"the topic's max below the cluster's min", map[string]string{"max.compaction.lag.ms": "50"}, map[string]string{"log.cleaner.min.compaction.lag.ms": "100"},
			"conflict topic config setting min.compaction.lag.ms (100) > max.compaction.lag.ms (50)"},
		{"the topic's max over the cluster's conflict", map[string]string{"max.compaction.lag.ms": "200"},
			map[string]string{"log.cleaner.min.compaction.lag.ms": "100", "log.cleaner.max.compaction.lag.ms": "50"}, ""},
		{"an invalid entry takes no part", map[string]string{"min.compaction.lag.ms": "100", "max.compaction.lag.ms": "x"}, nil, ""},
	} {
		got := Summary(TopicConflicts(tt.topic, tt.cluster))
		if got != tt.want {
			t.Errorf("%s: TopicConflicts = %q, want %q", tt.rule, got, tt.want)
		}
		if tt.want != "" {
			if c := ResolveTopic(tt.topic, tt.cluster); c.MinCompactionLagMs != 0 || c.MaxCompactionLagMs != math.MaxInt64 {
				t.Errorf("%s: ResolveTopic lags %d, %d, want the defaults", tt.rule, c.MinCompactionLagMs, c.MaxCompactionLagMs)
			}
		}
	}
}

func TestTheClustersCleanerLagsMustBeARange(t *testing.T) {
	bad := map[string]string{"log.cleaner.min.compaction.lag.ms": "100", "log.cleaner.max.compaction.lag.ms": "50"}
	problems := CheckBrokerConfig(bad)
	if len(problems) != 1 || problems[0].Key != "log.cleaner.min.compaction.lag.ms" ||
		problems[0].String() != "conflict config setting log.cleaner.min.compaction.lag.ms (100) > log.cleaner.max.compaction.lag.ms (50)" {
		t.Errorf("CheckBrokerConfig = %v, want the conflict", problems)
	}
	if p := CheckBrokerConfig(map[string]string{"log.cleaner.min.compaction.lag.ms": "100"}); len(p) != 0 {
		t.Errorf("a min below the default max: %v", p)
	}
	if c := ResolveTopic(nil, bad); c.MinCompactionLagMs != 0 || c.MaxCompactionLagMs != math.MaxInt64 {
		t.Errorf("a topic under a conflicting cluster resolves lags %d, %d, want the defaults", c.MinCompactionLagMs, c.MaxCompactionLagMs)
	}
}

func TestTheCleanerKeysResolve(t *testing.T) {
	c := ResolveCluster(map[string]string{"log.cleaner.enable": "false", "log.cleaner.dedupe.buffer.size": "16777216",
		"log.cleaner.io.max.bytes.per.second": "1048576", "log.cleaner.backoff.ms": "500", "log.cleaner.io.buffer.size": "65536"})
	if c.CleanerEnable || c.CleanerDedupeBufferBytes != 16<<20 || c.CleanerIOMaxBytesPerSecond != 1<<20 || c.CleanerBackoff != 500*time.Millisecond || c.CleanerIOBufferBytes != 64<<10 {
		t.Errorf("ResolveCluster = %+v", c)
	}
	c = ResolveCluster(map[string]string{"log.cleaner.io.max.bytes.per.second": "1.7976931348623157E308"})
	if !math.IsInf(c.CleanerIOMaxBytesPerSecond, 1) {
		t.Errorf("Double.MAX_VALUE resolves to %v, want +Inf (no limit)", c.CleanerIOMaxBytesPerSecond)
	}
}
