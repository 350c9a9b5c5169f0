package broker

import (
	"fmt"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// Metadata (key 3): versions 0-13: Apache 3.7's 0-12 and Apache 4.0's v13 (KIP-1102)
// (docs/wire.md, "Metadata").
//
// Behaviour:
//   - Brokers: every registered broker whose state is Serving, at its address on the
//     listener the request came in on, plus always the answering broker (see brokers).
//     Fenced brokers are omitted, as Apache does: a client sent to one could not be answered.
//   - Topics come from the cluster's served KafkaTopics (not being deleted, no older topic
//     claiming the name). A null topic list means all topics; an empty list means none.
//   - An unknown name → UNKNOWN_TOPIC_OR_PARTITION; when auto-creation is allowed (by the
//     request and by the cluster's auto.create.topics.enable) it also starts creating the
//     topic in the background (autocreate.go), as KRaft does: the client's next Metadata
//     finds it. A name that breaks Kafka's rules → INVALID_TOPIC_EXCEPTION. Internal names
//     (__consumer_offsets, __transaction_state) are never auto-created.
//   - __consumer_offsets is always listed, is_internal, its partitions led by the
//     coordinators of the groups hashing to them (internal_topics.go).
//   - A partition whose leader is not in the broker list (fenced, gone, or unassigned -1) →
//     LEADER_NOT_AVAILABLE with leader -1. Replicas and ISR are the leader alone: a partition
//     has one writer, and its data lives on shared storage rather than on follower replicas.
//   - Authorization (Apache's handleTopicMetadataRequest): DESCRIBE on each topic. Listing
//     all topics leaves out those not allowed; a named one not allowed → TOPIC_AUTHORIZATION_
//     FAILED with a zero id and no partitions (by id: a null name and the id), before its
//     existence is looked at. An unknown topic the request and the cluster would auto-create
//     needs CREATE on the cluster or on the topic, else TOPIC_AUTHORIZATION_FAILED and
//     nothing is created. Requested authorized operations are the principal's (the
//     cluster's: 0 without DESCRIBE on it); without spec.authorization, everything.
//
// Version notes:
//   - v0: an empty topic list means all topics too (v0 has no null).
//   - v0-v3: auto-creation is implied; v4+ asks for it with AllowAutoTopicCreation.
//   - v10+: topic ids; a requested id that is not known → UNKNOWN_TOPIC_ID.
//   - v13: a top-level error code, always NONE: paddock never asks a client to
//     re-bootstrap (REBOOTSTRAP_REQUIRED), since every broker answers from the same view.
func init() { register(3, 0, 13, handleMetadata) }

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
	listed := rc.metadataBrokers(resp)
	rc.metadataCluster(req, resp)
	if req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0) {
		if rc.allowedTopic(acl.OpDescribe, topicname.ConsumerOffsets) {
			resp.Topics = append(resp.Topics, describeOffsetsTopic(req, rc.view, listed))
		}
		for i := range rc.view.Topics {
			if rc.allowedTopic(acl.OpDescribe, rc.view.Topics[i].Name) {
				resp.Topics = append(resp.Topics, describeTopic(req, &rc.view.Topics[i], listed))
			}
		}
	} else {
		for _, rt := range req.Topics {
			resp.Topics = append(resp.Topics, rc.requestedTopic(req, rt, listed))
		}
	}
	if req.IncludeTopicAuthorizedOperations && rc.enforcing() {
		for i := range resp.Topics {
			if mt := &resp.Topics[i]; mt.ErrorCode == 0 && mt.Topic != nil {
				mt.AuthorizedOperations = rc.authorizedOps(v1alpha1.ACLTopic, *mt.Topic)
			}
		}
	}
	return resp, nil
}

// metadataBrokers fills the answer's broker list and returns the ids it lists: the leaders an
// answer may name.
func (rc *requestContext) metadataBrokers(resp *kmsg.MetadataResponse) map[int32]bool {
	listed := rc.brokers(false)
	ids := make(map[int32]bool, len(listed))
	for _, b := range listed {
		ids[b.id] = true
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = b.id, b.host, b.port, b.rack
		resp.Brokers = append(resp.Brokers, mb)
	}
	return ids
}

// metadataCluster fills the cluster's fields: its id, the controller, its authorized
// operations when asked.
func (rc *requestContext) metadataCluster(req *kmsg.MetadataRequest, resp *kmsg.MetadataResponse) {
	if rc.view.ClusterID != "" {
		id := rc.view.ClusterID
		resp.ClusterID = &id
	}
	resp.ControllerID = rc.controllerID()
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = rc.clusterOps()
	}
}

// clusterOps is the cluster's authorized-operations bitfield as Metadata and
// DescribeCluster answer it: 0 without DESCRIBE on the cluster (Apache's rule).
func (rc *requestContext) clusterOps() int32 {
	if !rc.allowedCluster(acl.OpDescribe) {
		return 0
	}
	return rc.authorizedOps(v1alpha1.ACLCluster, "")
}

// requestedTopic answers one topic the request names, by name or (v10+) by id.
func (rc *requestContext) requestedTopic(req *kmsg.MetadataRequest, rt kmsg.MetadataRequestTopic, listed map[int32]bool) kmsg.MetadataResponseTopic {
	var (
		t  *cluster.Topic
		ok bool
	)
	offsets := (rt.Topic != nil && *rt.Topic == topicname.ConsumerOffsets) || (rt.Topic == nil && rt.TopicID == offsetsTopicID(rc.view.ClusterID) && rt.TopicID != [16]byte{})
	if rt.Topic != nil {
		t, ok = rc.view.Topic(*rt.Topic)
	} else {
		t, ok = rc.view.TopicByID(rt.TopicID)
	}
	name := ""
	switch {
	case rt.Topic != nil:
		name = *rt.Topic
	case offsets:
		name = topicname.ConsumerOffsets
	case ok:
		name = t.Name
	}
	if name != "" && !rc.allowedTopic(acl.OpDescribe, name) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.ErrorCode, mt.Partitions = kerr.TopicAuthorizationFailed.Code, []kmsg.MetadataResponseTopicPartition{}
		if rt.Topic != nil {
			mt.Topic = rt.Topic
		} else {
			mt.TopicID = rt.TopicID
		}
		return mt
	}
	if offsets {
		return describeOffsetsTopic(req, rc.view, listed)
	}
	if ok {
		return describeTopic(req, t, listed)
	}
	mt := kmsg.NewMetadataResponseTopic()
	mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
	mt.ErrorCode = kerr.UnknownTopicID.Code
	if rt.Topic != nil {
		mt.ErrorCode = rc.unknownTopic(*rt.Topic, req.Version < 4 || req.AllowAutoTopicCreation)
	}
	return mt
}

// describeTopic is a served topic's answer; listed are the brokers the answer names.
func describeTopic(req *kmsg.MetadataRequest, t *cluster.Topic, listed map[int32]bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, t.ID
	if req.IncludeTopicAuthorizedOperations {
		mt.AuthorizedOperations = topicAuthorizedOps
	}
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		mt.Partitions = append(mt.Partitions, describePartition(p, listed))
	}
	return mt
}

// describePartition is one partition's answer: its leader when the answer lists it, else
// LEADER_NOT_AVAILABLE.
func describePartition(p cluster.Partition, listed map[int32]bool) kmsg.MetadataResponseTopicPartition {
	mp := kmsg.NewMetadataResponseTopicPartition()
	mp.Partition, mp.LeaderEpoch = p.Index, p.LeaderEpoch
	if p.Leader >= 0 && listed[p.Leader] {
		mp.Leader = p.Leader
		mp.Replicas = []int32{p.Leader}
		mp.ISR = []int32{p.Leader}
		return mp
	}
	mp.ErrorCode = kerr.LeaderNotAvailable.Code
	mp.Leader = -1
	mp.Replicas, mp.ISR = []int32{}, []int32{}
	return mp
}

// unknownTopic is the error of a Metadata topic the view does not have, after starting its
// auto-creation when the client and the cluster allow it.
func (rc *requestContext) unknownTopic(name string, allowCreate bool) int16 {
	if allowCreate && rc.view.Config.AutoCreateTopics && !rc.allowedCluster(acl.OpCreate) && !rc.allowedTopic(acl.OpCreate, name) {
		return kerr.TopicAuthorizationFailed.Code
	}
	if topicname.Validate(name) != nil {
		return kerr.InvalidTopicException.Code
	}
	if allowCreate && rc.view.Config.AutoCreateTopics && !isInternal(name) {
		if code, msg := rc.topicRoom().take(fmt.Sprintf("Auto-creating topic '%s' with %d partitions", name, rc.view.Config.NumPartitions), 1, int(rc.view.Config.NumPartitions)); code != 0 {
			rc.h.Log.V(1).Info("Not auto-creating topic", "topic", name, "reason", msg)
		} else {
			rc.h.autoCreateTopic(name, rc.view.Config.NumPartitions)
		}
	}
	return kerr.UnknownTopicOrPartition.Code
}
