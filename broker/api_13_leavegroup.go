package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LeaveGroup (key 13): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place: a leave completes at once (the rebalance it starts goes on without
//     it).
func init() { registerGroupAPI(13, handleLeaveGroup) }

func handleLeaveGroup(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().LeaveGroup(rc.ctx, kreq.(*kmsg.LeaveGroupRequest)))
}
