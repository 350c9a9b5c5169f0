package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat (key 12): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - It never waits for other clients, so it is answered in place.
func init() { registerGroupAPI(12, handleHeartbeat) }

func handleHeartbeat(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().Heartbeat(rc.ctx, kreq.(*kmsg.HeartbeatRequest)))
}
