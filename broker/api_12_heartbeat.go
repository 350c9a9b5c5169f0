package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// Heartbeat (key 12): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - It never waits for other clients, so it is answered in place.
//   - Authorization (Apache's handleHeartbeatRequest): READ on the group, else
//     GROUP_AUTHORIZATION_FAILED.
func init() { registerGroupAPI(12, handleHeartbeat) }

func handleHeartbeat(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	return answer(rc.coordinator().Heartbeat(rc.ctx, req))
}
