package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// CreateTopics (key 19): versions 0-7, Apache 3.7's (docs/topics.md, "Admin APIs (broker)").
//
// Behaviour:
//   - Each topic becomes a KafkaTopic (cluster.Admin.CreateTopic); the assignment reconciler
//     then gives its partitions leaders.
//   - Checks, per topic, in Apache's order: a name repeated in the request → INVALID_REQUEST
//     (every occurrence); Kafka's name rules → INVALID_TOPIC_EXCEPTION; a name that exists →
//     TOPIC_ALREADY_EXISTS; one that collides with an existing or earlier name by '.' against
//     '_' → INVALID_TOPIC_EXCEPTION; num_partitions 0 or below -1 (or above
//     v1alpha1.MaxPartitions) → INVALID_PARTITIONS, -1 → the cluster's num.partitions;
//     replication_factor 0 or below -1 → INVALID_REPLICATION_FACTOR, and above 1 too: storage
//     is shared, each partition has one replica (its leader) and the volume is the
//     durability; manual replica assignments → INVALID_REPLICA_ASSIGNMENT when counts are
//     also set (INVALID_REQUEST in Apache's words), and refused otherwise too: paddock places
//     leaders itself; an unknown config key, a null value or one paddock cannot honour
//     (recompression, min.insync.replicas > 1) → INVALID_CONFIG, and so are configs whose
//     effective values conflict (min.compaction.lag.ms above max.compaction.lag.ms, the
//     cluster's log.cleaner.* values included: kafkaconfig.TopicConflicts, Apache's message).
//   - The answer waits, for at most the request's timeout (never more than maxAdminWait),
//     until this broker's view shows every created topic with a topic id and a listed leader
//     on every partition, so a client that produces right after creating finds a leader; it
//     still answers NONE if the wait runs out (the topic exists; leaders follow).
//   - A topic being deleted under the same name is waited out the same way before it is
//     created again.
//   - Authorization (Apache's ControllerApis.createTopics): CREATE on the cluster or on the
//     topic, checked after the duplicate check and before every other, else
//     TOPIC_AUTHORIZATION_FAILED and nothing is created; v5+ configs need DESCRIBE_CONFIGS
//     on the topic, else none are listed and the topic's config error code is
//     TOPIC_AUTHORIZATION_FAILED.
//
// Version notes:
//   - v1: validate_only runs every check and creates nothing.
//   - v5: answers carry the partition count, replication factor 1 and the topic's configs.
//   - v7: the topic id.
func init() { register(19, 0, 7, handleCreateTopics) }

// createSpec is one topic a client asked for, checked.
type createSpec struct {
	name       string
	partitions int32
	config     map[string]string
}

func handleCreateTopics(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	write, wait, cancel := rc.adminDeadlines(req.TimeoutMillis)
	defer cancel()

	counts := countBy(req.Topics, func(t kmsg.CreateTopicsRequestTopic) string { return t.Topic })
	results := make([]kmsg.CreateTopicsResponseTopic, len(req.Topics))
	specs := make([]*createSpec, len(req.Topics))
	claimed := map[string]string{} // collision key → name, of existing and earlier topics
	for _, t := range rc.view.Topics {
		claimed[topicname.CollisionKey(t.Name)] = t.Name
	}
	for _, name := range []string{topicname.ConsumerOffsets, topicname.TransactionState} {
		claimed[topicname.CollisionKey(name)] = name
	}
	room := rc.topicRoom()
	createAllowed := rc.allowedCluster(acl.OpCreate)
	for i, t := range req.Topics {
		r := kmsg.NewCreateTopicsResponseTopic()
		r.Topic = t.Topic
		switch {
		case counts[t.Topic] > 1:
			r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, errorf("Create topics request from client contains multiple topics named '%s'", t.Topic)
		case !createAllowed && !rc.allowedTopic(acl.OpCreate, t.Topic):
			r.ErrorCode, r.ErrorMessage = kerr.TopicAuthorizationFailed.Code, strptr("Authorization failed.")
		case isInternal(t.Topic):
			code, msg := createInternalRefusal(t.Topic)
			r.ErrorCode, r.ErrorMessage = code, &msg
		case rc.h.Admin == nil:
			r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, strptr(errNoAdmin)
		default:
			spec, code, msg := checkCreate(rc.view, t, claimed)
			if code == 0 {
				code, msg = room.take(fmt.Sprintf("Creating topic '%s' with %d partitions", spec.name, spec.partitions), 1, int(spec.partitions))
			}
			r.ErrorCode = code
			if code != 0 {
				r.ErrorMessage = &msg
			} else {
				specs[i] = spec
				claimed[topicname.CollisionKey(spec.name)] = spec.name
			}
		}
		results[i] = r
	}

	if !req.ValidateOnly {
		for i, spec := range specs {
			if spec == nil {
				continue
			}
			if code, msg := rc.createTopic(write, wait, spec); code != 0 {
				results[i].ErrorCode, results[i].ErrorMessage, specs[i] = code, &msg, nil
			}
		}
	}
	snap := rc.view
	if !req.ValidateOnly {
		snap, _ = waitView(wait, rc.h.View, func(s *cluster.Snapshot) bool { return rc.createdAndLed(s, specs) })
	}
	for i, spec := range specs {
		if spec != nil && req.Version >= 5 {
			fillCreated(&results[i], snap, spec, rc.allowedTopic(acl.OpDescribeConfigs, spec.name))
		}
	}
	resp.Topics = results
	return resp, nil
}

// checkCreate checks one requested topic against the view and the names claimed so far; on
// failure it returns the error code and Apache's message for it.
func checkCreate(s *cluster.Snapshot, t kmsg.CreateTopicsRequestTopic, claimed map[string]string) (*createSpec, int16, string) {
	if err := topicname.Validate(t.Topic); err != nil {
		return nil, kerr.InvalidTopicException.Code, err.Error()
	}
	if _, exists := s.Topic(t.Topic); exists {
		return nil, kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", t.Topic)
	}
	if other, ok := claimed[topicname.CollisionKey(t.Topic)]; ok {
		return nil, kerr.InvalidTopicException.Code, fmt.Sprintf("Topic '%s' collides with existing topic: %s", t.Topic, other)
	}
	if len(t.ReplicaAssignment) > 0 {
		if t.NumPartitions != -1 || t.ReplicationFactor != -1 {
			return nil, kerr.InvalidRequest.Code, "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
		}
		return nil, kerr.InvalidReplicaAssignment.Code, "paddock places partition leaders itself (one replica per partition on shared storage); manual replica assignments are not supported"
	}
	spec := &createSpec{name: t.Topic, partitions: t.NumPartitions}
	switch {
	case t.NumPartitions == -1:
		spec.partitions = s.Config.NumPartitions
	case t.NumPartitions <= 0:
		return nil, kerr.InvalidPartitions.Code, "Number of partitions was set to an invalid non-positive value."
	case t.NumPartitions > v1alpha1.MaxPartitions:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("Number of partitions %d is above paddock's limit of %d per topic.", t.NumPartitions, v1alpha1.MaxPartitions)
	}
	switch rf := t.ReplicationFactor; {
	case rf == 0 || rf < -1:
		return nil, kerr.InvalidReplicationFactor.Code, "Replication factor must be larger than 0, or -1 to use the default value."
	case rf > 1:
		return nil, kerr.InvalidReplicationFactor.Code, fmt.Sprintf("Replication factor %d is not supported: paddock keeps each partition's data on the cluster's one shared volume, whose storage provides the durability, and has exactly one replica (the leader) per partition. Use 1 or -1.", rf)
	}
	for _, c := range t.Configs {
		if c.Value == nil {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("Null value not supported for topic configs: %s", c.Name)
		}
		if _, dup := spec.config[c.Name]; dup {
			return nil, kerr.InvalidConfig.Code, fmt.Sprintf("Config %s is given twice", c.Name)
		}
		if err := kafkaconfig.CheckTopic(c.Name, *c.Value); err != nil {
			return nil, kerr.InvalidConfig.Code, err.Error()
		}
		if spec.config == nil {
			spec.config = map[string]string{}
		}
		spec.config[c.Name] = *c.Value
	}
	if p := kafkaconfig.TopicConflicts(spec.config, s.ConfigMap); len(p) > 0 {
		return nil, kerr.InvalidConfig.Code, kafkaconfig.Summary(p)
	}
	return spec, 0, ""
}

// createTopic creates spec's KafkaTopic. A KafkaTopic of the same name that is being deleted
// is waited out (until wait ends) and the create retried once.
func (rc *requestContext) createTopic(write, wait context.Context, spec *createSpec) (int16, string) {
	a := rc.h.Admin
	err := a.CreateTopic(write, spec.name, spec.partitions, spec.config)
	if apierrors.IsAlreadyExists(err) {
		if _, deleting := rc.h.View.Snapshot().Deleted(spec.name); deleting {
			if _, gone := waitView(wait, rc.h.View, func(s *cluster.Snapshot) bool { _, d := s.Deleted(spec.name); return !d }); gone {
				err = a.CreateTopic(write, spec.name, spec.partitions, spec.config)
			} else {
				return kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' is marked for deletion.", spec.name)
			}
		}
	}
	switch {
	case err == nil:
		return 0, ""
	case apierrors.IsAlreadyExists(err):
		return kerr.TopicAlreadyExists.Code, fmt.Sprintf("Topic '%s' already exists.", spec.name)
	}
	code, msg := apiErrorCode(err)
	return code, fmt.Sprintf("create KafkaTopic for '%s': %s", spec.name, msg)
}

// createdAndLed is true when every created topic is in the view with a topic id and a listed
// leader for every partition.
func (rc *requestContext) createdAndLed(s *cluster.Snapshot, specs []*createSpec) bool {
	for _, spec := range specs {
		if spec == nil {
			continue
		}
		t, ok := s.Topic(spec.name)
		if !ok || t.ID == ([16]byte{}) || len(t.Partitions) < int(spec.partitions) || !rc.leadersListed(s, t) {
			return false
		}
	}
	return true
}

// fillCreated fills the v5+ fields of a successful topic: the partition count, replication
// factor 1, its configs (as DescribeConfigs reports them; when the principal may describe
// them) and, when the view has it, its id.
func fillCreated(r *kmsg.CreateTopicsResponseTopic, s *cluster.Snapshot, spec *createSpec, describeConfigs bool) {
	r.NumPartitions, r.ReplicationFactor = spec.partitions, 1
	if t, ok := s.Topic(spec.name); ok {
		r.TopicID = t.ID
	}
	if !describeConfigs {
		r.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
		return
	}
	for _, e := range kafkaconfig.DescribeTopic(spec.config, s.ConfigMap) {
		c := kmsg.NewCreateTopicsResponseTopicConfig()
		c.Name, c.Source = e.Key.Name, int8(e.Value.Source)
		if !e.Value.Null {
			c.Value = strptr(e.Value.Value)
		}
		r.Configs = append(r.Configs, c)
	}
}
