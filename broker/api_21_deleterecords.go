package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// DeleteRecords (key 21): versions 0-2, Apache 3.7's (docs/dataplane.md, "DeleteRecords").
//
// Behaviour, per partition, on its leader (clients send each partition to its leader):
//   - Offset -1 means the high watermark. The log start moves to the offset when that is
//     higher (storage.Log.DeleteRecords: durable, after a fence check, before the answer);
//     closed segments wholly below it are deleted. LowWatermark is the log start after the
//     call (-1 on error).
//   - An offset past the high watermark, or negative other than -1 → OFFSET_OUT_OF_RANGE; a
//     topic whose cleanup.policy lacks "delete" (cleanup.policy=compact) → POLICY_VIOLATION
//     (Apache's rule); an unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION;
//     not led or not yet taken over here → NOT_LEADER_OR_FOLLOWER; a volume failure →
//     KAFKA_STORAGE_ERROR; the move not durable within the request's timeout (at least the
//     admin APIs' minimum write time, so TimeoutMs 0 still moves it) → REQUEST_TIMED_OUT.
//   - A partition named twice is answered once per mention, each with the same outcome
//     (the second move changes nothing).
//   - There are no follower replicas to wait for: the answer comes once the move is durable.
//   - Authorization (Apache's handleDeleteRecordsRequest): DELETE on each topic, else its
//     partitions answer TOPIC_AUTHORIZATION_FAILED, first; nothing is moved.
//
// Version notes: v2 is the flexible encoding; the versions do not differ otherwise.
func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	ctx, _, cancel := rc.adminDeadlines(req.TimeoutMillis)
	defer cancel()
	for _, rt := range req.Topics {
		ot := kmsg.NewDeleteRecordsResponseTopic()
		ot.Topic = rt.Topic
		t, known := rc.view.Topic(rt.Topic)
		authorized := rc.allowedTopic(acl.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			op := kmsg.NewDeleteRecordsResponseTopicPartition()
			op.Partition, op.LowWatermark = rp.Partition, -1
			switch {
			case !authorized:
				op.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known:
				op.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case !t.Config.Delete():
				op.ErrorCode = kerr.PolicyViolation.Code
			case rp.Offset < -1:
				op.ErrorCode = kerr.OffsetOutOfRange.Code
			default:
				sp := rc.partition(t, rp.Partition, -1)
				if op.ErrorCode = sp.code; sp.code == 0 {
					low, err := sp.log.DeleteRecords(ctx, rp.Offset)
					if op.ErrorCode = storageCode(err); err == nil {
						op.LowWatermark = low
					}
				}
			}
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
