package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeGroups (key 15): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place.
//   - Authorization (Apache's handleDescribeGroupsRequest): DESCRIBE on each group, else it
//     answers GROUP_AUTHORIZATION_FAILED (after the others) and is not looked up; requested
//     authorized operations are the principal's on the group.
func init() { registerGroupAPI(15, handleDescribeGroups) }

func handleDescribeGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	if !rc.enforcing() {
		return answer(rc.coordinator().DescribeGroups(rc.ctx, req))
	}
	allowed, denied := rc.splitGroups(acl.OpDescribe, req.Groups)
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		got, err := rc.coordinator().DescribeGroups(rc.ctx, req)
		if err != nil {
			return nil, err
		}
		resp = got
		for i := range resp.Groups {
			if req.Version >= 3 && req.IncludeAuthorizedOperations {
				resp.Groups[i].AuthorizedOperations = rc.authorizedOps(v1alpha1.ACLGroup, resp.Groups[i].Group)
			}
		}
	}
	for _, g := range denied {
		rg := kmsg.NewDescribeGroupsResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
