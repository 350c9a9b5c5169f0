package broker

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// SyncGroup (key 14): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - A follower's sync waits for the leader's assignment (up to the rebalance timeout), so
//     it is answered later and alone, as JoinGroup is (api_11_joingroup.go).
//   - The leader's assignments are copied first: they alias the connection's frame buffer.
//   - Authorization (Apache's handleSyncGroupRequest): READ on the group, else
//     GROUP_AUTHORIZATION_FAILED with no assignment; the coordinator never sees the sync.
func init() { registerGroupAPI(14, handleSyncGroup) }

func handleSyncGroup(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	c := rc.coordinator()
	req := kreq.(*kmsg.SyncGroupRequest)
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	for i := range req.GroupAssignment {
		req.GroupAssignment[i].MemberAssignment = bytes.Clone(req.GroupAssignment[i].MemberAssignment)
	}
	ctx := rc.connCtx
	rc.answerLaterAlone(func() (kmsg.Response, error) {
		return answer(c.SyncGroup(ctx, req))
	})
	return nil, nil
}
