package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeProducers (key 61): version 0, Apache 3.7's (handleDescribeProducersRequest,
// UnifiedLog.activeProducers).
//
// Behaviour:
//   - Per partition, from its leader's log: every producer the partition keeps state for
//     (idempotent and transactional, not expired) with its epoch, last sequence, last
//     timestamp, the coordinator epoch of its last marker and the first offset of its open
//     transaction (-1 none), by producer id — what `kafka-transactions.sh
//     describe-producers` prints to find a hanging transaction.
//   - Unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; not led here →
//     NOT_LEADER_OR_FOLLOWER (the client asks the leader).
//   - Authorization: READ on the topic, else TOPIC_AUTHORIZATION_FAILED for its partitions.
func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		allowed := rc.allowedTopic(acl.OpRead, t.Topic)
		vt, known := rc.view.Topic(t.Topic)
		for _, p := range t.Partitions {
			rp := kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			switch {
			case !allowed:
				rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			case !known:
				rp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				sp := rc.partition(vt, p, -1)
				if sp.code != 0 {
					rp.ErrorCode = sp.code
					break
				}
				for _, a := range sp.log.ActiveProducers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = a.ProducerID, int32(a.ProducerEpoch), a.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = a.LastTimestamp, a.CoordinatorEpoch, a.CurrentTxnStartOffset
					rp.ActiveProducers = append(rp.ActiveProducers, ap)
				}
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
