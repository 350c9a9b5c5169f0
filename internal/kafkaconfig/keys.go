package kafkaconfig

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Type is a config value's type, numbered as Kafka's DescribeConfigs (v3+) numbers them.
type Type int8

const (
	Boolean Type = 1
	String  Type = 2
	Int     Type = 3
	Long    Type = 5
	Double  Type = 6
	List    Type = 7
)

// Key is one config key.
type Key struct {
	// Name is the Kafka name of the key.
	Name string
	// Flag, for a static broker key, is the `paddock broker` flag the operator passes its
	// spec.config value in (docs/bounds.md): the broker reads it at start, so changing it
	// rolls the brokers. Empty for keys the brokers read from the KafkaCluster they watch.
	Flag string
	// Type is its value type; values are checked against it.
	Type Type
	// Default is Apache Kafka 3.7's default as DescribeConfigs prints it — paddock's own for
	// the keys whose Doc says it differs; HasDefault is false for keys whose Apache default is
	// null (such as log.retention.ms).
	Default    string
	HasDefault bool
	// Doc says what the key does and, in a last sentence, what paddock does with it.
	Doc string
	// Synonyms are, for a topic key, the broker keys that give its cluster-wide default, in
	// precedence order (Apache's ServerTopicConfigSynonyms).
	Synonyms []Synonym
	// ReadOnly keys cannot be set (broker.id).
	ReadOnly bool
	// check, when set, refuses values beyond the type check: ranges, enumerations, and
	// values paddock cannot honour (recompression, more than one replica).
	check func(v string) error
}

// Synonym is a broker key that sets a topic key's default: the topic value is the broker
// value times Scale (hours and minutes become milliseconds).
type Synonym struct {
	Name  string
	Scale int64
}

// Notes for the last sentence of Doc, so the table says plainly what is and is not done.
const (
	noEffect           = " paddock accepts and reports it; it has no effect."
	noReplication      = " paddock accepts and reports it; with one replica per partition on shared storage it has no effect."
	cleanerNote        = " paddock's log cleaner honours it (docs/compaction.md)."
	cleanerClusterNote = " paddock resolves it for its log cleaner (kafkaconfig.ClusterConfig; docs/compaction.md)."
	storageNote        = " paddock's storage honours it."
	produceNote        = " paddock's produce path honours it."
	staticNote         = " Static: the operator passes it to the brokers as a flag, so changing it rolls them (docs/bounds.md)."
)

const maxLong = "9223372036854775807"

// groupNote is the documentation every group coordinator key ends with.
const groupNote = " paddock's group coordinator honours it, read when the coordinator starts: a change applies at each broker's next restart."

// sessionNote ends the session timeout keys' documentation.
const sessionNote = groupNote + " A range that is not one (min above max) is ignored: both keys keep their defaults."

// Topic keys: Apache 3.7 LogConfig, every key, so tools that set any of them work; the Doc of
// each says whether paddock acts on it.
var topicKeys = []Key{
	{Name: "cleanup.policy", Type: List, Default: "delete", HasDefault: true, Synonyms: syn("log.cleanup.policy"),
		Doc: "A list of delete, compact or both: delete removes old segments by retention.ms/retention.bytes; compact keeps the latest record per key (the log cleaner) and refuses records without a key." +
			" paddock honours it: storage deletes and compacts (docs/compaction.md), and DescribeConfigs reports the value as set.",
		check: cleanupPolicy},
	{Name: "compression.type", Type: String, Default: "producer", HasDefault: true, Synonyms: syn("compression.type"),
		Doc:   "The codec batches are stored with; producer keeps the producer's." + " paddock stores batches as sent: only producer is accepted (recompression is not implemented).",
		check: compressionType},
	{Name: "delete.retention.ms", Type: Long, Default: "86400000", HasDefault: true, Synonyms: syn("log.cleaner.delete.retention.ms"),
		Doc: "How long a tombstone (a record with a null value) or a transaction marker stays on a compacted topic after the cleaning that first kept it: a consumer reading from the start within this time sees the delete." + cleanerNote, check: atLeast(0)},
	{Name: "file.delete.delay.ms", Type: Long, Default: "60000", HasDefault: true, Synonyms: syn("log.segment.delete.delay.ms"),
		Doc: "How long a deleted segment's file lingers before it is removed." + noEffect + " Segments are removed at once.", check: atLeast(0)},
	{Name: "flush.messages", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.flush.interval.messages"),
		Doc: "Force an fsync every this many messages." + noEffect + " paddock fsyncs before acknowledging acks=all.", check: atLeast(1)},
	{Name: "flush.ms", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
		Doc: "Force an fsync at least this often." + noEffect + " paddock fsyncs before acknowledging acks=all.", check: atLeast(0)},
	{Name: "follower.replication.throttled.replicas", Type: List, Default: "", HasDefault: true,
		Doc: "Replicas whose follower replication is throttled." + noReplication},
	{Name: "index.interval.bytes", Type: Int, Default: "4096", HasDefault: true, Synonyms: syn("log.index.interval.bytes"),
		Doc: "Bytes of batches between two entries of the offset index." + storageNote, check: atLeast(0)},
	{Name: "leader.replication.throttled.replicas", Type: List, Default: "", HasDefault: true,
		Doc: "Replicas whose leader replication is throttled." + noReplication},
	{Name: "local.retention.bytes", Type: Long, Default: "-2", HasDefault: true, Synonyms: syn("log.local.retention.bytes"),
		Doc: "Local retention size with tiered storage (-2: retention.bytes)." + noEffect + " There is no tiered storage.", check: atLeast(-2)},
	{Name: "local.retention.ms", Type: Long, Default: "-2", HasDefault: true, Synonyms: syn("log.local.retention.ms"),
		Doc: "Local retention time with tiered storage (-2: retention.ms)." + noEffect + " There is no tiered storage.", check: atLeast(-2)},
	{Name: "max.compaction.lag.ms", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.cleaner.max.compaction.lag.ms"),
		Doc: "Longest time a record of a compacted topic stays uncleaned: dirty data older than this is cleaned whatever min.cleanable.dirty.ratio says, and the active segment rolls at least this often. It may not be below min.compaction.lag.ms." + cleanerNote, check: atLeast(1)},
	{Name: "max.message.bytes", Type: Int, Default: "1048588", HasDefault: true, Synonyms: syn("message.max.bytes"),
		Doc: "Largest record batch (with its 12-byte log overhead) the topic accepts." + produceNote, check: atLeast(0)},
	{Name: "message.downconversion.enable", Type: Boolean, Default: "true", HasDefault: true, Synonyms: syn("log.message.downconversion.enable"),
		Doc: "Whether old fetch versions get down-converted batches." + noEffect + " paddock serves record batches v2 only."},
	{Name: "message.format.version", Type: String, Default: "3.0-IV1", HasDefault: true, Synonyms: syn("log.message.format.version"),
		Doc: "Deprecated message format version." + noEffect + " paddock stores record batches v2 only."},
	{Name: "message.timestamp.after.max.ms", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.message.timestamp.after.max.ms"),
		Doc: "Largest amount a CreateTime timestamp may lie in the future." + produceNote, check: atLeast(0)},
	{Name: "message.timestamp.before.max.ms", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.message.timestamp.before.max.ms"),
		Doc: "Largest amount a CreateTime timestamp may lie in the past." + produceNote, check: atLeast(0)},
	{Name: "message.timestamp.difference.max.ms", Type: Long, Default: maxLong, HasDefault: true, Synonyms: syn("log.message.timestamp.difference.max.ms"),
		Doc: "Deprecated: replaced by message.timestamp.before.max.ms and message.timestamp.after.max.ms." + noEffect, check: atLeast(0)},
	{Name: "message.timestamp.type", Type: String, Default: "CreateTime", HasDefault: true, Synonyms: syn("log.message.timestamp.type"),
		Doc: "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's clock." + storageNote, check: oneOf("CreateTime", "LogAppendTime")},
	{Name: "min.cleanable.dirty.ratio", Type: Double, Default: "0.5", HasDefault: true, Synonyms: syn("log.cleaner.min.cleanable.ratio"),
		Doc: "A compacted log is cleaned once its dirty (not yet cleaned) bytes are more than this share of its cleanable bytes, or its dirty data is older than max.compaction.lag.ms." + cleanerNote, check: between(0, 1)},
	{Name: "min.compaction.lag.ms", Type: Long, Default: "0", HasDefault: true, Synonyms: syn("log.cleaner.min.compaction.lag.ms"),
		Doc: "Shortest time a record of a compacted topic stays uncleaned: a segment whose newest record is younger is not cleaned. It may not be above max.compaction.lag.ms." + cleanerNote, check: atLeast(0)},
	{Name: "min.insync.replicas", Type: Int, Default: "1", HasDefault: true, Synonyms: syn("min.insync.replicas"),
		Doc: "Replicas that must have an acks=all write." + " paddock has one replica per partition (storage is shared and durable on its own): only 1 is accepted.", check: onlyOne},
	{Name: "preallocate", Type: Boolean, Default: "false", HasDefault: true, Synonyms: syn("log.preallocate"),
		Doc: "Preallocate segment files." + noEffect},
	{Name: "remote.storage.enable", Type: Boolean, Default: "false", HasDefault: true,
		Doc: "Tiered storage." + " paddock has no tiered storage: only false is accepted.", check: noTieredStorage},
	{Name: "retention.bytes", Type: Long, Default: "-1", HasDefault: true, Synonyms: syn("log.retention.bytes"),
		Doc: "Largest size of a partition before its oldest closed segments are deleted; -1 no limit." + storageNote},
	{Name: "retention.ms", Type: Long, Default: "604800000", HasDefault: true,
		Synonyms: []Synonym{{"log.retention.ms", 1}, {"log.retention.minutes", 60_000}, {"log.retention.hours", 3_600_000}},
		Doc:      "How long a closed segment is kept after its newest record, by the records' timestamps; -1 forever." + storageNote, check: atLeast(-1)},
	{Name: "segment.bytes", Type: Int, Default: "1073741824", HasDefault: true, Synonyms: syn("log.segment.bytes"),
		Doc: "The active segment rolls before it would grow past this size." + storageNote, check: atLeast(14)},
	{Name: "segment.index.bytes", Type: Int, Default: "10485760", HasDefault: true, Synonyms: syn("log.index.size.max.bytes"),
		Doc: "Size of the preallocated offset index." + noEffect + " paddock's index is sparse and sized by its entries.", check: atLeast(4)},
	{Name: "segment.jitter.ms", Type: Long, Default: "0", HasDefault: true, Synonyms: []Synonym{{"log.roll.jitter.ms", 1}, {"log.roll.jitter.hours", 3_600_000}},
		Doc: "Random jitter subtracted from segment.ms." + noEffect, check: atLeast(0)},
	{Name: "segment.ms", Type: Long, Default: "604800000", HasDefault: true, Synonyms: []Synonym{{"log.roll.ms", 1}, {"log.roll.hours", 3_600_000}},
		Doc: "The active segment rolls once its first batch is this old." + storageNote, check: atLeast(1)},
	{Name: "unclean.leader.election.enable", Type: Boolean, Default: "false", HasDefault: true, Synonyms: syn("unclean.leader.election.enable"),
		Doc: "Whether an out-of-sync replica may become leader." + noReplication},
}

// Broker keys: the cluster-wide settings paddock reads from KafkaCluster spec.config. Each is
// either read by the brokers themselves or the default of a topic key above.
var brokerKeys = []Key{
	{Name: "auto.create.topics.enable", Type: Boolean, Default: "true", HasDefault: true,
		Doc: "Create a topic when Metadata asks for an unknown one with allow_auto_topic_creation. paddock honours it."},
	{Name: "broker.id", Type: Int, ReadOnly: true,
		Doc: "The broker id: the ordinal of the broker's pod. Read-only."},
	{Name: "compression.type", Type: String, Default: "producer", HasDefault: true,
		Doc: "Default of the topic key compression.type. Only producer is accepted.", check: compressionType},
	{Name: "connections.max.idle.ms", Flag: "connections-max-idle-ms", Type: Long, Default: "600000", HasDefault: true,
		Doc: "Close a connection that has sent nothing for this long while no answer is outstanding; 0 never does." + staticNote, check: atLeast(0)},
	{Name: "connections.max.reauth.ms", Type: Long, Default: "0", HasDefault: true,
		Doc: "KIP-368: the longest a SASL session lasts before the client must re-authenticate on the same connection; 0 turns re-authentication off. paddock honours it (docs/security.md).", check: atLeast(0)},
	{Name: "default.replication.factor", Type: Int, Default: "1", HasDefault: true,
		Doc: "Replication factor of created topics. paddock has one replica per partition: only 1 is accepted.", check: onlyOne},
	{Name: "delete.topic.enable", Type: Boolean, Default: "true", HasDefault: true,
		Doc: "Whether DeleteTopics may delete topics. paddock honours it (deleting a KafkaTopic with kubectl is always possible)."},
	{Name: "group.consumer.assignors", Type: List, Default: "uniform,range", HasDefault: true,
		Doc: "The server-side assignors a consumer-protocol (KIP-848) member may name, the first being the default: uniform, range (Apache 4.0; its class names are accepted too)." + groupNote, check: assignorList},
	{Name: "group.consumer.heartbeat.interval.ms", Type: Int, Default: "5000", HasDefault: true,
		Doc: "How often a consumer-protocol member heartbeats (Apache 4.0)." + groupNote, check: atLeast(1)},
	{Name: "group.consumer.max.size", Type: Int, Default: "2147483647", HasDefault: true,
		Doc: "The most members a consumer-protocol group may have (Apache 4.0)." + groupNote, check: atLeast(1)},
	{Name: "group.consumer.session.timeout.ms", Type: Int, Default: "45000", HasDefault: true,
		Doc: "How long a silent consumer-protocol member stays in its group (Apache 4.0); a value not above the heartbeat interval resolves both to their defaults." + groupNote, check: atLeast(1)},
	{Name: "group.coordinator.rebalance.protocols", Type: List, Default: "classic,consumer", HasDefault: true,
		Doc: "The group protocols the coordinator serves (Apache 4.0): classic always, consumer (KIP-848) unless it is left out." + groupNote, check: rebalanceProtocols},
	{Name: "group.initial.rebalance.delay.ms", Type: Int, Default: "3000", HasDefault: true,
		Doc: "How long an empty group's first rebalance waits for more members." + groupNote, check: atLeast(0)},
	{Name: "group.max.session.timeout.ms", Type: Int, Default: "1800000", HasDefault: true,
		Doc: "The longest session timeout a group member may ask for." + sessionNote, check: atLeast(1)},
	{Name: "group.max.size", Type: Int, Default: "2147483647", HasDefault: true,
		Doc: "The most members a group may have." + groupNote, check: atLeast(1)},
	{Name: "group.min.session.timeout.ms", Type: Int, Default: "6000", HasDefault: true,
		Doc: "The shortest session timeout a group member may ask for." + sessionNote, check: atLeast(1)},
	{Name: "log.cleaner.backoff.ms", Type: Long, Default: "15000", HasDefault: true,
		Doc: "How long the log cleaner sleeps when no log needs cleaning." + cleanerClusterNote, check: atLeast(0)},
	{Name: "log.cleaner.dedupe.buffer.size", Type: Long, Default: "134217728", HasDefault: true,
		Doc: "Memory for the log cleaner's key map (the keys of the dirty section it cleans at once)." +
			" Apache checks no range; paddock requires at least 1 MiB so the map holds a useful number of keys." + cleanerClusterNote,
		check: atLeast(1 << 20)},
	{Name: "log.cleaner.delete.retention.ms", Type: Long, Default: "86400000", HasDefault: true,
		Doc: "Default of the topic key delete.retention.ms.", check: atLeast(0)},
	{Name: "log.cleaner.enable", Type: Boolean, Default: "true", HasDefault: true,
		Doc: "Whether the log cleaner runs; with false no compacted topic is cleaned (retention still deletes from topics whose cleanup.policy has delete)." + cleanerClusterNote},
	{Name: "log.cleaner.io.buffer.size", Type: Int, Default: "524288", HasDefault: true,
		Doc: "Bytes of the log cleaner's read and write buffers." + cleanerClusterNote, check: atLeast(0)},
	{Name: "log.cleaner.io.max.bytes.per.second", Type: Double, Default: "1.7976931348623157E308", HasDefault: true,
		Doc: "The rate, in bytes per second, the log cleaner's reads and writes are throttled to; Apache's default (Double.MAX_VALUE) is no limit." +
			" Apache checks no range; paddock requires a value above 0." + cleanerClusterNote,
		check: above(0)},
	{Name: "log.cleaner.max.compaction.lag.ms", Type: Long, Default: maxLong, HasDefault: true,
		Doc: "Default of the topic key max.compaction.lag.ms. It may not be below log.cleaner.min.compaction.lag.ms.", check: atLeast(1)},
	{Name: "log.cleaner.min.cleanable.ratio", Type: Double, Default: "0.5", HasDefault: true,
		Doc: "Default of the topic key min.cleanable.dirty.ratio.", check: between(0, 1)},
	{Name: "log.cleaner.min.compaction.lag.ms", Type: Long, Default: "0", HasDefault: true,
		Doc: "Default of the topic key min.compaction.lag.ms. It may not be above log.cleaner.max.compaction.lag.ms.", check: atLeast(0)},
	{Name: "log.cleanup.policy", Type: List, Default: "delete", HasDefault: true,
		Doc: "Default of the topic key cleanup.policy: delete, compact or both.", check: cleanupPolicy},
	{Name: "log.index.interval.bytes", Type: Int, Default: "4096", HasDefault: true,
		Doc: "Default of the topic key index.interval.bytes.", check: atLeast(0)},
	{Name: "log.message.timestamp.after.max.ms", Type: Long, Default: maxLong, HasDefault: true,
		Doc: "Default of the topic key message.timestamp.after.max.ms.", check: atLeast(0)},
	{Name: "log.message.timestamp.before.max.ms", Type: Long, Default: maxLong, HasDefault: true,
		Doc: "Default of the topic key message.timestamp.before.max.ms.", check: atLeast(0)},
	{Name: "log.message.timestamp.type", Type: String, Default: "CreateTime", HasDefault: true,
		Doc: "Default of the topic key message.timestamp.type.", check: oneOf("CreateTime", "LogAppendTime")},
	{Name: "log.retention.bytes", Type: Long, Default: "-1", HasDefault: true,
		Doc: "Default of the topic key retention.bytes."},
	{Name: "log.retention.check.interval.ms", Type: Long, Default: "300000", HasDefault: true,
		Doc: "How often each partition leader applies retention. paddock's storage honours it.", check: atLeast(1)},
	{Name: "log.retention.hours", Type: Int, Default: "168", HasDefault: true,
		Doc: "Default of the topic key retention.ms, in hours; log.retention.minutes and log.retention.ms win over it."},
	{Name: "log.retention.minutes", Type: Int,
		Doc: "Default of the topic key retention.ms, in minutes; log.retention.ms wins over it."},
	{Name: "log.retention.ms", Type: Long,
		Doc: "Default of the topic key retention.ms; -1 keeps data forever.", check: atLeast(-1)},
	{Name: "log.roll.hours", Type: Int, Default: "168", HasDefault: true,
		Doc: "Default of the topic key segment.ms, in hours; log.roll.ms wins over it.", check: atLeast(1)},
	{Name: "log.roll.ms", Type: Long,
		Doc: "Default of the topic key segment.ms.", check: atLeast(1)},
	{Name: "log.segment.bytes", Type: Int, Default: "1073741824", HasDefault: true,
		Doc: "Default of the topic key segment.bytes.", check: atLeast(14)},
	{Name: "max.connections", Flag: "max-connections", Type: Int, Default: "20000", HasDefault: true,
		Doc: "The most connections a broker serves at once; a connection past it is closed at once (Apache's acceptor waits instead), except one from the broker's own host. Apache's default is 2147483647; paddock's bounds what idle connections cost (8 KB each at most)." + staticNote, check: atLeast(0)},
	{Name: "max.connections.per.ip", Flag: "max-connections-per-ip", Type: Int, Default: "2147483647", HasDefault: true,
		Doc: "The most connections from one client address; a connection past it is closed at once." + staticNote, check: atLeast(0)},
	{Name: "max.connections.per.ip.overrides", Flag: "max-connections-per-ip-overrides", Type: String, Default: "", HasDefault: true,
		Doc: "Per-address caps replacing max.connections.per.ip, as ip:count,... (IP addresses only: paddock resolves no host names)." + staticNote, check: checkConnectionOverrides},
	{Name: "message.max.bytes", Type: Int, Default: "1048588", HasDefault: true,
		Doc: "Default of the topic key max.message.bytes.", check: atLeast(0)},
	{Name: "min.insync.replicas", Type: Int, Default: "1", HasDefault: true,
		Doc: "Default of the topic key min.insync.replicas. Only 1 is accepted.", check: onlyOne},
	{Name: "num.partitions", Type: Int, Default: "1", HasDefault: true,
		Doc: "Partitions of a topic created with num_partitions -1 or by auto-creation. paddock honours it.", check: between(1, 10000)},
	{Name: "offset.metadata.max.bytes", Type: Int, Default: "4096", HasDefault: true,
		Doc: "The longest metadata an offset commit may carry." + groupNote, check: atLeast(0)},
	{Name: "offsets.retention.minutes", Type: Int, Default: "10080", HasDefault: true,
		Doc: "How long committed offsets outlive their use: an empty group's offsets expire this long after it became empty, a group that only stores offsets loses each one this long after its commit." + groupNote, check: atLeast(1)},
	{Name: "offsets.topic.num.partitions", Type: Int, Default: "50", HasDefault: true,
		Doc: "The number of partitions of __consumer_offsets; it should not change after deployment." +
			" paddock's groups hash to these partitions and each partition's leader is the coordinator of its groups (docs/coordinator.md); a change moves groups, which serve again once the coordinator epoch next moves.",
		check: between(1, 1000)},
	{Name: "producer.id.expiration.ms", Type: Int, Default: "86400000", HasDefault: true,
		Doc: "How long a partition remembers an idle producer's sequence numbers. paddock's storage honours it.", check: atLeast(1)},
	{Name: "queued.max.request.bytes", Flag: "queued-max-request-bytes", Type: Long, Default: "268435456", HasDefault: true,
		Doc: "The bytes of requests being read and handled at once, over every connection (each request counts its frame and what decoding it may allocate); a request that does not fit waits unread. -1 is unbounded. Apache's default is -1." + staticNote, check: atLeast(-1)},
	{Name: "queued.max.response.bytes", Flag: "queued-max-response-bytes", Type: Long, Default: "268435456", HasDefault: true,
		Doc: "paddock's own: the bytes of Fetch records read into memory and held until written, over every connection; a Fetch that does not fit returns less, or waits for its first batch. Records sent from their segment file (sendfile) take none. -1 is unbounded." + staticNote, check: atLeast(-1)},
	{Name: "queued.max.response.bytes.per.connection", Flag: "queued-max-response-bytes-per-connection", Type: Long, Default: "33554432", HasDefault: true,
		Doc: "paddock's own: the bytes of one connection's answers waiting to be written; the connection reads no further request past it. -1 leaves only the bound of 64 answers." + staticNote, check: atLeast(-1)},
	{Name: "socket.request.max.bytes", Flag: "socket-request-max-bytes", Type: Int, Default: "33554432", HasDefault: true,
		Doc: "The largest request frame; a larger size prefix closes the connection, with a log line, before anything is allocated. Apache's default is 104857600; paddock's 32 MiB holds 32 batches of message.max.bytes (clients send at most about 1 MB per request, kgo up to its BrokerMaxWriteBytes)." + staticNote, check: atLeast(10)},
}

func syn(names ...string) []Synonym {
	out := make([]Synonym, len(names))
	for i, n := range names {
		out[i] = Synonym{Name: n, Scale: 1}
	}
	return out
}

func atLeast(min int64) func(string) error {
	return func(v string) error {
		n, _ := parseNumber(v)
		if n < float64(min) {
			return fmt.Errorf("must be at least %d", min)
		}
		return nil
	}
}

// above refuses a value not greater than min.
func above(min float64) func(string) error {
	return func(v string) error {
		if n, _ := parseNumber(v); !(n > min) {
			return fmt.Errorf("must be above %v", min)
		}
		return nil
	}
}

func between(lo, hi float64) func(string) error {
	return func(v string) error {
		n, _ := parseNumber(v)
		if n < lo || n > hi {
			return fmt.Errorf("must be between %v and %v", lo, hi)
		}
		return nil
	}
}

func oneOf(allowed ...string) func(string) error {
	return func(v string) error {
		for _, a := range allowed {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(allowed, ", "))
	}
}

func onlyOne(v string) error {
	if v != "1" {
		return fmt.Errorf("paddock keeps one replica per partition (storage is shared and durable on its own); only 1 is accepted")
	}
	return nil
}

func noTieredStorage(v string) error {
	if v != "false" {
		return fmt.Errorf("paddock has no tiered storage; only false is accepted")
	}
	return nil
}

// AssignorNames maps group.consumer.assignors entries to the server-side assignors' names.
var AssignorNames = map[string]string{
	"uniform": "uniform",
	"range":   "range",
	"org.apache.kafka.coordinator.group.assignor.UniformAssignor":     "uniform",
	"org.apache.kafka.coordinator.group.assignor.RangeAssignor":       "range",
	"org.apache.kafka.coordinator.group.api.assignor.UniformAssignor": "uniform",
	"org.apache.kafka.coordinator.group.api.assignor.RangeAssignor":   "range",
}

func assignorList(v string) error {
	names := SplitList(v)
	if len(names) == 0 {
		return fmt.Errorf("must name an assignor (uniform, range)")
	}
	for _, n := range names {
		if _, ok := AssignorNames[n]; !ok {
			return fmt.Errorf("%q is not a server-side assignor (uniform, range)", n)
		}
	}
	return nil
}

func rebalanceProtocols(v string) error {
	classic := false
	for _, p := range SplitList(v) {
		switch p {
		case "classic":
			classic = true
		case "consumer":
		default:
			return fmt.Errorf("%q is not a group protocol paddock serves (classic, consumer)", p)
		}
	}
	if !classic {
		return fmt.Errorf("must include classic")
	}
	return nil
}

// cleanupPolicy accepts a list of delete and compact, in any order (Apache's ValidList: case
// sensitive, items trimmed). An empty list, which would neither delete nor compact, is
// refused.
func cleanupPolicy(v string) error {
	policies := SplitList(v)
	if len(policies) == 0 {
		return fmt.Errorf("must name a policy (delete, compact or both)")
	}
	for _, p := range policies {
		if p != "delete" && p != "compact" {
			return fmt.Errorf("%q is not a cleanup policy (delete, compact)", p)
		}
	}
	return nil
}

func compressionType(v string) error {
	switch v {
	case "producer":
		return nil
	case "uncompressed", "gzip", "snappy", "lz4", "zstd":
		return fmt.Errorf("recompression is not implemented in paddock; only producer (keep the producer's codec) is accepted")
	}
	return fmt.Errorf("must be one of uncompressed, zstd, lz4, snappy, gzip, producer")
}

// parseNumber reads an Int, Long or Double value already checked by checkType. Range checks
// compare against small bounds, so float64's rounding near 2^63 does not matter.
func parseNumber(v string) (float64, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
