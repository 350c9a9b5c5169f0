package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConsumerGroupDescribe (key 69): the versions broker/groups serves (groups.VersionRange:
// Apache 4.0's 0-1; docs/groups.md "The consumer protocol").
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place.
//
// Version notes:
//   - v1: each member's type (1, the consumer protocol).
func init() { registerGroupAPI(69, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().ConsumerGroupDescribe(rc.ctx, kreq.(*kmsg.ConsumerGroupDescribeRequest)))
}
