package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// DeleteGroups (key 42): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, once the deletion is durable.
//   - Authorization (Apache's handleDeleteGroupsRequest): DELETE on each group, else it
//     answers GROUP_AUTHORIZATION_FAILED (after the others) and is not deleted.
func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	if !rc.enforcing() {
		return answer(rc.coordinator().DeleteGroups(rc.ctx, req))
	}
	allowed, denied := rc.splitGroups(acl.OpDelete, req.Groups)
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		got, err := rc.coordinator().DeleteGroups(rc.ctx, req)
		if err != nil {
			return nil, err
		}
		resp = got
	}
	for _, g := range denied {
		rg := kmsg.NewDeleteGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
