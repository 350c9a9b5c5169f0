package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (key 42): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, once the deletion is durable.
func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().DeleteGroups(rc.ctx, kreq.(*kmsg.DeleteGroupsRequest)))
}
