package broker

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// JoinGroup (key 11): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - A join may wait for its rebalance (the initial delay, the other members' rejoins) for up
//     to the rebalance timeout, so it is answered later and alone (wire.Answer.Alone): the
//     connection handles its next request only once this one is answered, as an Apache
//     broker does, and a client that goes away ends the wait (the member stays in the group,
//     as in Kafka).
//   - The protocol metadata is copied first: it aliases the connection's frame buffer, which
//     the next request reuses.
//   - Authorization (Apache's handleJoinGroupRequest): READ on the group, else
//     GROUP_AUTHORIZATION_FAILED (generation -1, the request's member id) at once; the
//     coordinator never sees the join.
func init() { registerGroupAPI(11, handleJoinGroup) }

func handleJoinGroup(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	c := rc.coordinator()
	req := kreq.(*kmsg.JoinGroupRequest)
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation, resp.MemberID = kerr.GroupAuthorizationFailed.Code, -1, req.MemberID
		return resp, nil
	}
	for i := range req.Protocols {
		req.Protocols[i].Metadata = bytes.Clone(req.Protocols[i].Metadata)
	}
	ctx, cl := rc.connCtx, rc.groupClient()
	rc.answerLaterAlone(func() (kmsg.Response, error) {
		return answer(c.JoinGroup(ctx, cl, req))
	})
	return nil, nil
}
