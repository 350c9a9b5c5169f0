package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch (key 9): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place; shows only acknowledged commits.
func init() { registerGroupAPI(9, handleOffsetFetch) }

func handleOffsetFetch(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().OffsetFetch(rc.ctx, kreq.(*kmsg.OffsetFetchRequest)))
}
