package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Metadata (key 3), versions 0–12 (Apache 3.7 parity).
//
// Brokers: every registered broker whose state is Serving, plus always the answering broker
// with the endpoint of the listener the request came in on (see brokers). Fenced brokers are
// omitted, as Apache does: advertising one would send clients to a broker that cannot answer.
//
// Topics come from the cluster's KafkaTopics (the served ones: not being deleted, no older
// topic claiming the name). A null topic list means all topics, and so does an empty list in
// v0 (v0 has no null); an empty list in v1+ means none. A name we do not know answers
// UNKNOWN_TOPIC_OR_PARTITION; when AllowAutoTopicCreation is set (implied before v4) and the
// cluster's auto.create.topics.enable is true, it also starts creating the topic in the
// background (autocreate.go), as KRaft does: the client's next Metadata finds it. A name
// that breaks Kafka's rules answers INVALID_TOPIC_EXCEPTION instead; internal topic names
// (__consumer_offsets, __transaction_state) are never auto-created — paddock keeps group and
// transaction state elsewhere. A topic id (v10+) we do not know answers UNKNOWN_TOPIC_ID.
//
// A partition whose leader is not in the broker list (fenced, gone, or unassigned -1) answers
// LEADER_NOT_AVAILABLE with leader -1. Replicas and ISR are the leader alone: a partition has
// one writer, and its data lives on shared storage rather than on follower replicas.
//
// There is no authorizer: requested authorized operations report everything allowed.
func init() { register(3, 0, 12, handleMetadata) }

// Authorized-operation bitfields (bit n = AclOperation n) with no authorizer: every operation
// Kafka defines for the resource type.
const (
	// CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE.
	clusterAuthorizedOps int32 = 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
	// READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
	topicAuthorizedOps int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
)

func handleMetadata(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	listed := rc.brokers(false)
	ids := make(map[int32]bool, len(listed))
	for _, b := range listed {
		ids[b.id] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	if rc.view.ClusterID != "" {
		id := rc.view.ClusterID
		resp.ClusterID = &id
	}
	resp.ControllerID = rc.controllerID()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}

	describe := func(t *cluster.Topic) kmsg.MetadataResponseTopic {
		mt := kmsg.NewMetadataResponseTopic()
		name := t.Name
		mt.Topic, mt.TopicID = &name, t.ID
		if req.IncludeTopicAuthorizedOperations {
			mt.AuthorizedOperations = topicAuthorizedOps
		}
		mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
		for _, p := range t.Partitions {
			mp := kmsg.NewMetadataResponseTopicPartition()
			mp.Partition, mp.LeaderEpoch = p.Index, p.LeaderEpoch
			if p.Leader >= 0 && ids[p.Leader] {
				mp.Leader = p.Leader
				mp.Replicas = []int32{p.Leader}
				mp.ISR = []int32{p.Leader}
			} else {
				mp.ErrorCode = kerr.LeaderNotAvailable.Code
				mp.Leader = -1
				mp.Replicas, mp.ISR = []int32{}, []int32{}
			}
			mt.Partitions = append(mt.Partitions, mp)
		}
		return mt
	}

	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		for i := range rc.view.Topics {
			resp.Topics = append(resp.Topics, describe(&rc.view.Topics[i]))
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		var (
			t  *cluster.Topic
			ok bool
		)
		if rt.Topic != nil {
			t, ok = rc.view.Topic(*rt.Topic)
		} else {
			t, ok = rc.view.TopicByID(rt.TopicID)
		}
		if ok {
			resp.Topics = append(resp.Topics, describe(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		mt.ErrorCode = kerr.UnknownTopicID.Code
		if rt.Topic != nil {
			mt.ErrorCode = rc.unknownTopic(*rt.Topic, req.Version < 4 || req.AllowAutoTopicCreation)
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

// unknownTopic is the error of a Metadata topic the view does not have, after starting its
// auto-creation when the client and the cluster allow it.
func (rc *requestContext) unknownTopic(name string, allowCreate bool) int16 {
	if topicname.Validate(name) != nil {
		return kerr.InvalidTopicException.Code
	}
	if allowCreate && rc.view.Config.AutoCreateTopics && !isInternal(name) {
		rc.h.autoCreateTopic(name, rc.view.Config.NumPartitions)
	}
	return kerr.UnknownTopicOrPartition.Code
}

// isInternal says whether name is one of Kafka's internal topics.
func isInternal(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}
