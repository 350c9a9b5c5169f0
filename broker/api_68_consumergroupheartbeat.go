package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// ConsumerGroupHeartbeat (key 68): the versions broker/groups serves (groups.VersionRange:
// Apache 4.0's 0-1; docs/groups.md "The consumer protocol").
//
// Behaviour:
//   - The coordinator applies every rule (validation, member epochs, the assignors,
//     revocation before assignment); this handler only routes (rc.coordinator).
//   - Advertised whether or not the cluster enables the protocol, as Apache 4.0 does; with
//     group.coordinator.rebalance.protocols lacking "consumer" it answers
//     UNSUPPORTED_VERSION, and ApiVersions finalizes group.version at 0
//     (api_18_apiversions.go).
//   - It never waits for other clients, so it is answered in place.
//   - Authorization (Apache 4.0's handleConsumerGroupHeartbeat): READ on the group, else
//     GROUP_AUTHORIZATION_FAILED; then DESCRIBE on every subscribed topic name, else
//     TOPIC_AUTHORIZATION_FAILED; the coordinator never sees a refused heartbeat. A
//     SubscribedTopicRegex resolves only over the topics the member's principal may
//     DESCRIBE (groups.Client.MayDescribeTopic, set by groupClient; per member, where
//     Apache 4.0 uses the principal of the heartbeat that triggered the resolution).
func init() { registerGroupAPI(68, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	code := int16(0)
	switch {
	case !rc.allowedGroup(acl.OpRead, req.Group):
		code = kerr.GroupAuthorizationFailed.Code
	case slices.ContainsFunc(req.SubscribedTopicNames, func(t string) bool { return !rc.allowedTopic(acl.OpDescribe, t) }):
		code = kerr.TopicAuthorizationFailed.Code
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	return answer(rc.coordinator().ConsumerGroupHeartbeat(rc.ctx, rc.groupClient(), req))
}
