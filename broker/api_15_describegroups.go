package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups (key 15): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place.
func init() { registerGroupAPI(15, handleDescribeGroups) }

func handleDescribeGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().DescribeGroups(rc.ctx, kreq.(*kmsg.DescribeGroupsRequest)))
}
