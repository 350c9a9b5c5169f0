package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit (key 8): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, in request order: a commit is acknowledged once its frame is fsynced
//     on the shared volume and the group's fence still holds this broker's coordinator epoch,
//     so a later OffsetFetch on this connection sees it.
func init() { registerGroupAPI(8, handleOffsetCommit) }

func handleOffsetCommit(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	return answer(rc.coordinator().OffsetCommit(rc.ctx, kreq.(*kmsg.OffsetCommitRequest)))
}
