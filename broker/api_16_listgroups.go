package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListGroups (key 16): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - The groups this broker coordinates; answered in place.
func init() { registerGroupAPI(16, handleListGroups) }

func handleListGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().ListGroups(rc.ctx, kreq.(*kmsg.ListGroupsRequest)))
}
