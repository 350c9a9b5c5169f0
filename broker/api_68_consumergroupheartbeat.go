package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
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
func init() { registerGroupAPI(68, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().ConsumerGroupHeartbeat(rc.ctx, rc.groupClient(), kreq.(*kmsg.ConsumerGroupHeartbeatRequest)))
}
