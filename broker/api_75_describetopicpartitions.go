package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// DescribeTopicPartitions (key 75, KIP-966): version 0, Apache 3.8's (the key is not in 3.7;
// docs/wire.md, "DescribeTopicPartitions"). Java's Admin describeTopics uses it when offered.
//
// Behaviour:
//   - Topics empty: every served topic and __consumer_offsets (internal_topics.go); else the
//     named ones (a name twice counts once).
//     Either way sorted by name, from the cursor's topic (and, in it, the cursor's partition)
//     on.
//   - At most max(1, min(ResponsePartitionLimit, 2000)) partitions are answered (2000 is
//     Apache's max.request.partition.size.limit). A topic cut short sets NextCursor to its next
//     partition; a limit reached exactly at a topic's end sets it to the next topic's partition
//     0 (that topic may not exist: Apache's rule).
//   - Partitions are answered as Metadata answers them (api_03_metadata.go): the leader when
//     Metadata would list it, else LEADER_NOT_AVAILABLE with leader -1; replicas and ISR are
//     the leader alone, no eligible leader replicas (ELR), no offline replicas.
//   - A named topic that is not served: UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
//     for a name Kafka refuses), zero id, no partitions; listing all topics never reports
//     one.
//   - Authorization (Apache's DescribeTopicPartitionsRequestHandler): DESCRIBE on each topic.
//     Listing all topics leaves out those not allowed; a named one not allowed →
//     TOPIC_AUTHORIZATION_FAILED, zero id, no partitions, after the answered topics and
//     outside the partition limit, whether or not it exists. AuthorizedOperations are the
//     principal's (without spec.authorization: every topic operation).
//   - A cursor naming a topic the request does not list, or a negative partition →
//     INVALID_REQUEST for every named topic, as Apache's error response.
func init() { register(75, 0, 0, handleDescribeTopicPartitions) }

// maxDescribePartitions is Apache's max.request.partition.size.limit default.
const maxDescribePartitions = 2000

func handleDescribeTopicPartitions(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	all := len(req.Topics) == 0
	var names []string
	if all {
		names = append(names, topicname.ConsumerOffsets)
		for _, t := range rc.view.Topics {
			names = append(names, t.Name)
		}
	} else {
		for _, rt := range req.Topics {
			names = append(names, rt.Topic)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	cur := req.Cursor
	if cur != nil && (cur.Partition < 0 || !all && !slices.Contains(names, cur.Topic)) {
		for _, rt := range req.Topics {
			name := rt.Topic
			t := kmsg.NewDescribeTopicPartitionsResponseTopic()
			t.Topic, t.ErrorCode = &name, kerr.InvalidRequest.Code
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	var unauthorized []string
	if rc.enforcing() {
		allowed := names[:0]
		for _, name := range names {
			if rc.allowedTopic(acl.OpDescribe, name) {
				allowed = append(allowed, name)
			} else if !all {
				unauthorized = append(unauthorized, name)
			}
		}
		names = allowed
	}
	if cur != nil {
		i, _ := slices.BinarySearch(names, cur.Topic)
		names = names[i:]
	}
	listed := map[int32]bool{}
	for _, b := range rc.brokers(false) {
		listed[b.id] = true
	}
	remaining := max(1, min(req.ResponsePartitionLimit, maxDescribePartitions))
	for _, name := range names {
		if remaining == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name}
			break
		}
		t, ok := rc.describedTopic(name)
		if !ok {
			if !all {
				resp.Topics = append(resp.Topics, unknownDescribedTopic(name))
			}
			continue
		}
		from := int32(0)
		if cur != nil && name == cur.Topic {
			from = cur.Partition
		}
		dt, next := describeTopicPartitions(t, from, remaining, listed)
		resp.Topics = append(resp.Topics, dt)
		if next >= 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: next}
			break
		}
		remaining -= int32(len(dt.Partitions))
	}
	if rc.enforcing() {
		for i := range resp.Topics {
			if dt := &resp.Topics[i]; dt.ErrorCode == 0 && dt.Topic != nil {
				dt.AuthorizedOperations = rc.authorizedOps(v1alpha1.ACLTopic, *dt.Topic)
			}
		}
	}
	for _, name := range unauthorized {
		dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		dt.Topic, dt.ErrorCode, dt.Partitions = &name, kerr.TopicAuthorizationFailed.Code, []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
		resp.Topics = append(resp.Topics, dt)
	}
	return resp, nil
}

// describeTopicPartitions answers t's partitions from index from, at most limit of them, and
// the index of the next one left out (-1 when none is).
func describeTopicPartitions(t *cluster.Topic, from, limit int32, listed map[int32]bool) (kmsg.DescribeTopicPartitionsResponseTopic, int32) {
	dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	name := t.Name
	dt.Topic, dt.TopicID, dt.IsInternal, dt.AuthorizedOperations = &name, t.ID, isInternal(name), topicAuthorizedOps
	dt.Partitions = []kmsg.DescribeTopicPartitionsResponseTopicPartition{}
	next := int32(-1)
	for _, p := range t.Partitions {
		if p.Index < from {
			continue
		}
		if int32(len(dt.Partitions)) == limit {
			next = p.Index
			break
		}
		mp := describePartition(p, listed)
		dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
		dp.ErrorCode, dp.Partition, dp.LeaderID, dp.LeaderEpoch = mp.ErrorCode, mp.Partition, mp.Leader, mp.LeaderEpoch
		dp.Replicas, dp.ISR = mp.Replicas, mp.ISR
		dp.EligibleLeaderReplicas, dp.LastKnownELR, dp.OfflineReplicas = []int32{}, []int32{}, []int32{}
		dt.Partitions = append(dt.Partitions, dp)
	}
	return dt, next
}

// unknownDescribedTopic is a named topic that is not served.
func unknownDescribedTopic(name string) kmsg.DescribeTopicPartitionsResponseTopic {
	dt := kmsg.NewDescribeTopicPartitionsResponseTopic()
	dt.Topic, dt.ErrorCode = &name, kerr.UnknownTopicOrPartition.Code
	if topicname.Validate(name) != nil {
		dt.ErrorCode = kerr.InvalidTopicException.Code
	}
	return dt
}
