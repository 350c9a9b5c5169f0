package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// OffsetForLeaderEpoch (key 23): versions 0-4, Apache 3.7's (docs/dataplane.md, "ListOffsets,
// OffsetForLeaderEpoch, InitProducerId"). librdkafka sends exactly v2, franz-go v4; clients
// use it to detect truncation after a leader change (kgo validates committed offsets carrying
// an epoch, and reacts to FENCED_LEADER_EPOCH with it).
//
// Behaviour, per partition:
//   - A CurrentLeaderEpoch (-1 = none) below the view's epoch → FENCED_LEADER_EPOCH, above →
//     UNKNOWN_LEADER_EPOCH; an unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; not
//     led or not taken over here → NOT_LEADER_OR_FOLLOWER; offline → KAFKA_STORAGE_ERROR.
//   - Otherwise storage's EpochEndOffset (Apache's LeaderEpochFileCache.endOffsetFor) from the
//     epochs the segments are stamped with: the leader's own epoch → (epoch, log end offset);
//     an older epoch → (the largest epoch ≤ it, the start offset of the epoch after that);
//     older than every epoch → (the requested epoch, the first epoch's start); newer than
//     every epoch → (-1, -1). Every leader rolls a segment at its epoch when it takes over, so
//     the current epoch always answers.
//   - Authorization (Apache's handleOffsetForLeaderEpochRequest, a consumer's): DESCRIBE on
//     each topic, else its partitions answer TOPIC_AUTHORIZATION_FAILED, first.
//
// Version notes:
//   - v0: no epoch in the answer.
//   - v2: CurrentLeaderEpoch.
func init() { register(23, 0, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for i, rt := range req.Topics {
		ot := &resp.Topics[i]
		*ot = kmsg.NewOffsetForLeaderEpochResponseTopic()
		ot.Topic = rt.Topic
		ot.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(rt.Partitions))
		t, known := rc.view.Topic(rt.Topic)
		authorized := rc.allowedTopic(acl.OpDescribe, rt.Topic)
		for j, rp := range rt.Partitions {
			op := &ot.Partitions[j]
			*op = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			op.Partition = rp.Partition
			if !authorized {
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
				continue
			}
			if !known {
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			}
			current := int32(-1)
			if req.Version >= 2 {
				current = rp.CurrentLeaderEpoch
			}
			sp := rc.partition(t, rp.Partition, current)
			if op.ErrorCode = sp.code; sp.code != 0 {
				continue
			}
			epoch, end, err := sp.log.EpochEndOffset(rp.LeaderEpoch)
			if op.ErrorCode = storageCode(err); err == nil {
				op.LeaderEpoch, op.EndOffset = epoch, end
			}
		}
	}
	return resp, nil
}
