package kafkaconfig

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// TopicConfig is a topic's effective configuration for the keys paddock acts on: each field
// is the topic's valid value, else the cluster's (through the key's broker synonyms), else
// Apache's default. broker/storage and the produce path are fed from it; units are the
// Kafka keys' own. A compaction lag range that is not one (min.compaction.lag.ms above
// max.compaction.lag.ms, as a cluster value can make it after the topic was checked) resolves
// both lags to their defaults, so storage is never handed one.
type TopicConfig struct {
	SegmentBytes                int32   // segment.bytes
	SegmentMs                   int64   // segment.ms
	RetentionMs                 int64   // retention.ms; -1 keeps data forever
	RetentionBytes              int64   // retention.bytes; -1 no limit
	MaxMessageBytes             int32   // max.message.bytes
	IndexIntervalBytes          int32   // index.interval.bytes
	MessageTimestampType        string  // message.timestamp.type: CreateTime or LogAppendTime
	MessageTimestampBeforeMaxMs int64   // message.timestamp.before.max.ms
	MessageTimestampAfterMaxMs  int64   // message.timestamp.after.max.ms
	CleanupPolicy               string  // cleanup.policy as DescribeConfigs reports it: "delete", "compact", "compact,delete"...
	CompressionType             string  // compression.type: always "producer" (recompression is refused)
	DeleteRetentionMs           int64   // delete.retention.ms
	MinCompactionLagMs          int64   // min.compaction.lag.ms; at most MaxCompactionLagMs
	MaxCompactionLagMs          int64   // max.compaction.lag.ms
	MinCleanableDirtyRatio      float64 // min.cleanable.dirty.ratio, in [0, 1]
}

// Compact is cleanup.policy listing compact: the log cleaner keeps the latest record per key
// and Produce refuses records without a key.
func (t TopicConfig) Compact() bool { return slices.Contains(SplitList(t.CleanupPolicy), "compact") }

// Delete is cleanup.policy listing delete: retention.ms and retention.bytes delete old
// segments (and DeleteRecords is allowed).
func (t TopicConfig) Delete() bool { return slices.Contains(SplitList(t.CleanupPolicy), "delete") }

// LogAppendTime is message.timestamp.type=LogAppendTime.
func (t TopicConfig) LogAppendTime() bool { return t.MessageTimestampType == "LogAppendTime" }

// ResolveTopic is the effective configuration of a topic whose spec.config is topic in a
// cluster whose spec.config is cluster.
func ResolveTopic(topic, cluster map[string]string) TopicConfig {
	v := func(name string) string {
		k, _ := TopicKey(name)
		return describeTopicKey(k, topic, cluster).Value.Value
	}
	c := TopicConfig{
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
		DeleteRetentionMs:           atoi(v("delete.retention.ms")),
		MinCompactionLagMs:          atoi(v("min.compaction.lag.ms")),
		MaxCompactionLagMs:          atoi(v("max.compaction.lag.ms")),
		MinCleanableDirtyRatio:      atof(v("min.cleanable.dirty.ratio")),
	}
	if c.MinCompactionLagMs > c.MaxCompactionLagMs {
		lo, _ := TopicKey("min.compaction.lag.ms")
		hi, _ := TopicKey("max.compaction.lag.ms")
		c.MinCompactionLagMs, c.MaxCompactionLagMs = atoi(lo.Default), atoi(hi.Default)
	}
	return c
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
	// The log cleaner's cluster-wide settings: log.cleaner.enable,
	// log.cleaner.dedupe.buffer.size, log.cleaner.backoff.ms and log.cleaner.io.buffer.size.
	// CleanerIOMaxBytesPerSecond is log.cleaner.io.max.bytes.per.second, always above 0;
	// Apache's default, Double.MAX_VALUE, meaning no limit, resolves to +Inf.
	CleanerEnable              bool
	CleanerDedupeBufferBytes   int64
	CleanerIOMaxBytesPerSecond float64
	CleanerBackoff             time.Duration
	CleanerIOBufferBytes       int32
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
		CleanerEnable:              v("log.cleaner.enable") == "true",
		CleanerDedupeBufferBytes:   atoi(v("log.cleaner.dedupe.buffer.size")),
		CleanerIOMaxBytesPerSecond: atof(v("log.cleaner.io.max.bytes.per.second")),
		CleanerBackoff:             ms("log.cleaner.backoff.ms"),
		CleanerIOBufferBytes:       int32(atoi(v("log.cleaner.io.buffer.size"))),
	}
	if c.CleanerIOMaxBytesPerSecond >= math.MaxFloat64 {
		c.CleanerIOMaxBytesPerSecond = math.Inf(1)
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

// atof parses a Double value the table has already validated.
func atof(s string) float64 {
	f, _ := strconv.ParseFloat(s, 64)
	return f
}
