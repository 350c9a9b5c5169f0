package broker

import (
	"crypto/sha256"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Kafka's internal topics as paddock serves them (docs/wire.md, "Internal topics").
//
//   - __consumer_offsets is listed in Metadata with is_internal = true and
//     offsets.topic.num.partitions partitions; partition p's leader is the coordinator of the
//     groups hashing to p (coordinator.PickPartition over the registry rows, the sets
//     FindCoordinator reads), so Metadata and FindCoordinator tell one story. It is no
//     KafkaTopic: Fetch reads it from the group coordinator's committed offsets
//     (offsets_topic.go). DescribeConfigs answers the configs Apache creates it with
//     (cleanup.policy=compact, compression.type=producer, segment.bytes=104857600).
//   - __transaction_state does not exist until transactions do: Metadata answers it
//     UNKNOWN_TOPIC_OR_PARTITION and it is never auto-created.
//   - Both names are reserved: no KafkaTopic is served under them (broker/cluster drops one),
//     CreateTopics refuses them, Produce answers INVALID_TOPIC_EXCEPTION (Apache's
//     ReplicaManager: "Cannot append to internal topic"), and DeleteTopics, CreatePartitions
//     and the AlterConfigs APIs refuse __consumer_offsets (Apache would apply them; paddock's
//     offsets topic is a view that cannot be deleted, grown or reconfigured).

// offsetsTopicConfig is what Apache creates __consumer_offsets with (GroupMetadataManager's
// offsets topic properties): the topic configs DescribeConfigs reports for it.
var offsetsTopicConfig = map[string]string{
	"cleanup.policy":   "compact",
	"compression.type": "producer",
	"segment.bytes":    "104857600", // offsets.topic.segment.bytes
}

// Refusal messages (docs/wire.md, "Internal topics").
const (
	errAppendInternal    = "Cannot append to internal topic %s"
	errDeleteInternal    = "Topic %s is internal: paddock serves it from the group coordinator's files, and it cannot be deleted."
	errGrowInternal      = "The number of partitions of %s is offsets.topic.num.partitions in the KafkaCluster's spec.config; it cannot be changed with CreatePartitions."
	errAlterInternal     = "Topic %s is internal: its configs are fixed by paddock and cannot be altered."
	errCreateReserved    = "Topic name %s is reserved for Kafka's internal topics."
	errCreateOffsetTopic = "Topic '%s' already exists."
)

func isInternal(name string) bool { return topicname.IsInternal(name) }

// offsetsTopicID is __consumer_offsets' topic id: a fixed function of the cluster id, so
// every broker answers the same one and it never changes (kgo uses topic ids in Fetch only
// when every topic has one). Zero while the cluster has no id.
func offsetsTopicID(clusterID string) [16]byte {
	var id [16]byte
	if clusterID == "" {
		return id
	}
	sum := sha256.Sum256([]byte("paddock internal topic\x00" + clusterID + "\x00" + topicname.ConsumerOffsets))
	copy(id[:], sum[:16])
	id[6] = id[6]&0x0f | 0x80 // RFC 9562 version 8 (custom), variant 10
	id[8] = id[8]&0x3f | 0x80
	return id
}

// offsetsPartitions is offsets.topic.num.partitions in s: how many partitions groups hash to.
func offsetsPartitions(s *cluster.Snapshot) int32 {
	return max(s.Config.OffsetsTopicPartitions, 1)
}

// offsetsTopicLeader is the leader of partition p of __consumer_offsets: the coordinator of
// its groups by FindCoordinator's rule and sets; -1 when no broker is alive.
func offsetsTopicLeader(s *cluster.Snapshot, p int32) int32 {
	id, ok := coordinator.PickPartition(p, s.RegisteredIDs(), s.AliveIDs())
	if !ok {
		return -1
	}
	return id
}

// offsetsTopic is __consumer_offsets as a topic of s: its id, and its partitions with the
// leaders offsetsTopicLeader gives them (leader epoch -1).
func offsetsTopic(s *cluster.Snapshot) *cluster.Topic {
	t := &cluster.Topic{Name: topicname.ConsumerOffsets, ID: offsetsTopicID(s.ClusterID), Partitions: make([]cluster.Partition, offsetsPartitions(s))}
	for p := range t.Partitions {
		t.Partitions[p] = cluster.Partition{Index: int32(p), Leader: offsetsTopicLeader(s, int32(p)), LeaderEpoch: -1}
	}
	return t
}

// describeOffsetsTopic is __consumer_offsets' Metadata answer; listed are the brokers the
// answer names (a leader not among them is LEADER_NOT_AVAILABLE, as for any topic).
func describeOffsetsTopic(req *kmsg.MetadataRequest, s *cluster.Snapshot, listed map[int32]bool) kmsg.MetadataResponseTopic {
	mt := describeTopic(req, offsetsTopic(s), listed)
	mt.IsInternal = true
	return mt
}

// describedTopic is the topic called name for the describing APIs: a served topic, or
// __consumer_offsets.
func (rc *requestContext) describedTopic(name string) (*cluster.Topic, bool) {
	if name == topicname.ConsumerOffsets {
		return offsetsTopic(rc.view), true
	}
	return rc.view.Topic(name)
}

// offsetsTopicConfigs is DescribeConfigs' answer for __consumer_offsets: every topic key, its
// creation configs as topic values over the cluster's.
func offsetsTopicConfigs(clusterConfig map[string]string) []kafkaconfig.Entry {
	entries := kafkaconfig.DescribeTopic(nil, clusterConfig)
	for i, e := range entries {
		v, ok := offsetsTopicConfig[e.Key.Name]
		if !ok {
			continue
		}
		val := kafkaconfig.Value{Name: e.Key.Name, Value: v, Source: kafkaconfig.SourceTopic}
		entries[i].Value = val
		entries[i].Synonyms = append([]kafkaconfig.Value{val}, e.Synonyms...)
	}
	return entries
}

// Refusals (docs/wire.md, "Internal topics"): the code and message of one request entry.

// produceInternalRefusal is Apache's ReplicaManager.appendToLocalLog check; code 0 for a
// topic that is not internal.
func produceInternalRefusal(name string) (int16, string) {
	if !isInternal(name) {
		return 0, ""
	}
	return kerr.InvalidTopicException.Code, fmt.Sprintf(errAppendInternal, name)
}

// createPartitionsInternalRefusal: code 0 for a topic other than __consumer_offsets.
func createPartitionsInternalRefusal(name string) (int16, string) {
	if name != topicname.ConsumerOffsets {
		return 0, ""
	}
	return kerr.PolicyViolation.Code, fmt.Sprintf(errGrowInternal, name)
}

// createInternalRefusal: __consumer_offsets exists (Metadata lists it), so creating it is
// TOPIC_ALREADY_EXISTS as in Apache; __transaction_state is kept for the transaction
// coordinator. Code 0 for any other name.
func createInternalRefusal(name string) (int16, string) {
	switch name {
	case topicname.ConsumerOffsets:
		return kerr.TopicAlreadyExists.Code, fmt.Sprintf(errCreateOffsetTopic, name)
	case topicname.TransactionState:
		return kerr.InvalidRequest.Code, fmt.Sprintf(errCreateReserved, name)
	}
	return 0, ""
}

// deletesInternal reports whether a DeleteTopics entry names __consumer_offsets, by name or
// by its id.
func (rc *requestContext) deletesInternal(e kmsg.DeleteTopicsRequestTopic) bool {
	if e.Topic != nil {
		return *e.Topic == topicname.ConsumerOffsets
	}
	return e.TopicID != [16]byte{} && e.TopicID == offsetsTopicID(rc.view.ClusterID)
}
