package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// ConsumerGroupDescribe (key 69): the versions broker/groups serves (groups.VersionRange:
// Apache 4.0's 0-1; docs/groups.md "The consumer protocol").
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place.
//   - Authorization (Apache 4.0's handleConsumerGroupDescribe): DESCRIBE on each group, else
//     it answers GROUP_AUTHORIZATION_FAILED (after the others) and is not looked up;
//     requested authorized operations are the principal's on the group.
//
// Version notes:
//   - v1: each member's type (1, the consumer protocol).
func init() { registerGroupAPI(69, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	if !rc.enforcing() {
		return answer(rc.coordinator().ConsumerGroupDescribe(rc.ctx, req))
	}
	allowed, denied := rc.splitGroups(acl.OpDescribe, req.Groups)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	if len(allowed) > 0 {
		req.Groups = allowed
		got, err := rc.coordinator().ConsumerGroupDescribe(rc.ctx, req)
		if err != nil {
			return nil, err
		}
		resp = got
		for i := range resp.Groups {
			if req.IncludeAuthorizedOperations {
				resp.Groups[i].AuthorizedOperations = rc.authorizedOps(v1alpha1.ACLGroup, resp.Groups[i].Group)
			}
		}
	}
	for _, g := range denied {
		rg := kmsg.NewConsumerGroupDescribeResponseGroup()
		rg.Group, rg.ErrorCode = g, kerr.GroupAuthorizationFailed.Code
		resp.Groups = append(resp.Groups, rg)
	}
	return resp, nil
}
