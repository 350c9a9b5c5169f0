package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// LeaveGroup (key 13): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place: a leave completes at once (the rebalance it starts goes on without
//     it).
//   - Authorization (Apache's handleLeaveGroupRequest): READ on the group, else the
//     top-level GROUP_AUTHORIZATION_FAILED and no member leaves.
func init() { registerGroupAPI(13, handleLeaveGroup) }

func handleLeaveGroup(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	return answer(rc.coordinator().LeaveGroup(rc.ctx, req))
}
