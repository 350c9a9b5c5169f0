package kafkaconfig

import (
	"slices"
	"strconv"
	"time"
)

// TopicConfig is a topic's effective configuration for the keys paddock acts on: each field
// is the topic's valid value, else the cluster's (through the key's broker synonyms), else
// Apache's default. broker/storage and the produce path are fed from it; units are the
// Kafka keys' own.
type TopicConfig struct {
	SegmentBytes                int32  // segment.bytes
	SegmentMs                   int64  // segment.ms
	RetentionMs                 int64  // retention.ms; -1 keeps data forever
	RetentionBytes              int64  // retention.bytes; -1 no limit
	MaxMessageBytes             int32  // max.message.bytes
	IndexIntervalBytes          int32  // index.interval.bytes
	MessageTimestampType        string // message.timestamp.type: CreateTime or LogAppendTime
	MessageTimestampBeforeMaxMs int64  // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs  int64  // message.timestamp.after.max.ms
	CleanupPolicy               string // cleanup.policy: always "delete" (compact is refused)
	CompressionType             string // compression.type: always "producer" (recompression is refused)
}

// LogAppendTime is message.timestamp.type=LogAppendTime.
func (t TopicConfig) LogAppendTime() bool { return t.MessageTimestampType == "LogAppendTime" }

// ResolveTopic is the effective configuration of a topic whose spec.config is topic in a
// cluster whose spec.config is cluster.
func ResolveTopic(topic, cluster map[string]string) TopicConfig {
	v := func(name string) string {
		k, _ := TopicKey(name)
		return describeTopicKey(k, topic, cluster).Value.Value
	}
	return TopicConfig{
		SegmentBytes:                int32(atoi(v("segment.bytes"))),
		SegmentMs:                   atoi(v("segment.ms")),
		RetentionMs:                 atoi(v("retention.ms")),
		RetentionBytes:              atoi(v("retention.bytes")),
		MaxMessageBytes:             int32(atoi(v("max.message.bytes"))),
		IndexIntervalBytes:          int32(atoi(v("index.interval.bytes"))),
		MessageTimestampType:        v("message.timestamp.type"),
		MessageTimestampBeforeMaxMs: atoi(v("message.timestamp.before.max.ms")),
		MessageTimestampAfterMaxMs:  atoi(v("message.timestamp.after.max.ms")),
		CleanupPolicy:               v("cleanup.policy"),
		CompressionType:             v("compression.type"),
	}
}

// ClusterConfig is the cluster-wide settings the brokers read from KafkaCluster spec.config
// (valid entries only; Apache's defaults for the rest).
type ClusterConfig struct {
	// NumPartitions is num.partitions: partitions of a topic created without a count.
	NumPartitions int32
	// AutoCreateTopics is auto.create.topics.enable.
	AutoCreateTopics bool
	// DeleteTopicEnable is delete.topic.enable: whether DeleteTopics may delete.
	DeleteTopicEnable bool
	// RetentionCheckInterval is log.retention.check.interval.ms.
	RetentionCheckInterval time.Duration
	// ProducerIDExpirationMs is producer.id.expiration.ms.
	ProducerIDExpirationMs int64
	// Group coordinator settings: group.initial.rebalance.delay.ms,
	// group.min.session.timeout.ms, group.max.session.timeout.ms, group.max.size,
	// offset.metadata.max.bytes and offsets.retention.minutes. A min session timeout above the
	// max resolves both to their defaults.
	GroupInitialRebalanceDelay                     time.Duration
	GroupMinSessionTimeout, GroupMaxSessionTimeout time.Duration
	GroupMaxSize                                   int32
	OffsetMetadataMaxBytes                         int32
	OffsetsRetention                               time.Duration
	// MaxReauth is connections.max.reauth.ms: a SASL session's lifetime; 0 is unbounded.
	MaxReauth time.Duration
	// The consumer protocol (KIP-848, Apache 4.0): whether group.coordinator.rebalance.protocols
	// lists consumer; group.consumer.heartbeat.interval.ms and session.timeout.ms (a session
	// not above the interval resolves both to their defaults); group.consumer.max.size;
	// group.consumer.assignors as assignor names ("uniform", "range"), the default first.
	ConsumerProtocol                                  bool
	ConsumerHeartbeatInterval, ConsumerSessionTimeout time.Duration
	ConsumerMaxSize                                   int32
	ConsumerAssignors                                 []string
	// OffsetsTopicPartitions is offsets.topic.num.partitions: the partitions of
	// __consumer_offsets, which groups hash to (internal/coordinator.Partition).
	OffsetsTopicPartitions int32
}

// ResolveCluster reads a KafkaCluster's spec.config.
func ResolveCluster(cluster map[string]string) ClusterConfig {
	v := func(name string) string {
		if s, ok := valid(brokerKeys, name, cluster); ok {
			return s
		}
		k, _ := BrokerKey(name)
		return k.Default
	}
	ms := func(name string) time.Duration { return time.Duration(atoi(v(name))) * time.Millisecond }
	c := ClusterConfig{
		NumPartitions:              int32(atoi(v("num.partitions"))),
		AutoCreateTopics:           v("auto.create.topics.enable") == "true",
		DeleteTopicEnable:          v("delete.topic.enable") == "true",
		RetentionCheckInterval:     ms("log.retention.check.interval.ms"),
		ProducerIDExpirationMs:     atoi(v("producer.id.expiration.ms")),
		GroupInitialRebalanceDelay: ms("group.initial.rebalance.delay.ms"),
		GroupMinSessionTimeout:     ms("group.min.session.timeout.ms"),
		GroupMaxSessionTimeout:     ms("group.max.session.timeout.ms"),
		GroupMaxSize:               int32(atoi(v("group.max.size"))),
		OffsetMetadataMaxBytes:     int32(atoi(v("offset.metadata.max.bytes"))),
		OffsetsRetention:           time.Duration(atoi(v("offsets.retention.minutes"))) * time.Minute,
		OffsetsTopicPartitions:     int32(atoi(v("offsets.topic.num.partitions"))),
		MaxReauth:                  ms("connections.max.reauth.ms"),
		ConsumerProtocol:           slices.Contains(SplitList(v("group.coordinator.rebalance.protocols")), "consumer"),
		ConsumerHeartbeatInterval:  ms("group.consumer.heartbeat.interval.ms"),
		ConsumerSessionTimeout:     ms("group.consumer.session.timeout.ms"),
		ConsumerMaxSize:            int32(atoi(v("group.consumer.max.size"))),
	}
	for _, a := range SplitList(v("group.consumer.assignors")) {
		if name := AssignorNames[a]; !slices.Contains(c.ConsumerAssignors, name) {
			c.ConsumerAssignors = append(c.ConsumerAssignors, name)
		}
	}
	if c.ConsumerSessionTimeout <= c.ConsumerHeartbeatInterval {
		hb, _ := BrokerKey("group.consumer.heartbeat.interval.ms")
		st, _ := BrokerKey("group.consumer.session.timeout.ms")
		c.ConsumerHeartbeatInterval = time.Duration(atoi(hb.Default)) * time.Millisecond
		c.ConsumerSessionTimeout = time.Duration(atoi(st.Default)) * time.Millisecond
	}
	if c.GroupMinSessionTimeout > c.GroupMaxSessionTimeout {
		lo, _ := BrokerKey("group.min.session.timeout.ms")
		hi, _ := BrokerKey("group.max.session.timeout.ms")
		c.GroupMinSessionTimeout = time.Duration(atoi(lo.Default)) * time.Millisecond
		c.GroupMaxSessionTimeout = time.Duration(atoi(hi.Default)) * time.Millisecond
	}
	return c
}

// atoi parses a value the table has already validated.
func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}
