package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetDelete (key 47): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, once the deletion is durable.
func init() { registerGroupAPI(47, handleOffsetDelete) }

func handleOffsetDelete(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().OffsetDelete(rc.ctx, kreq.(*kmsg.OffsetDeleteRequest)))
}
