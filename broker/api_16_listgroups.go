package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// ListGroups (key 16): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - The groups this broker coordinates; answered in place.
//   - Authorization (Apache's handleListGroupsRequest): with DESCRIBE on the cluster every
//     group, else only the groups the principal may DESCRIBE; never an error.
func init() { registerGroupAPI(16, handleListGroups) }

func handleListGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	resp, err := rc.coordinator().ListGroups(rc.ctx, kreq.(*kmsg.ListGroupsRequest))
	if err != nil {
		return nil, err
	}
	if !rc.allowedCluster(acl.OpDescribe) {
		resp.Groups = slices.DeleteFunc(resp.Groups, func(g kmsg.ListGroupsResponseGroup) bool { return !rc.allowedGroup(acl.OpDescribe, g.Group) })
	}
	return resp, nil
}
