package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DeleteGroups (key 42), the versions broker/groups serves (docs/groups.md): the coordinator
// applies every rule; this handler only routes. Answered in place, once the deletion is durable.
func init() { registerGroupAPI(42, handleDeleteGroups) }

func handleDeleteGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	c := rc.h.Groups.Coordinator()
	if c == nil {
		return groupsUnavailable(kreq), nil
	}
	resp, err := c.DeleteGroups(rc.ctx, kreq.(*kmsg.DeleteGroupsRequest))
	if err != nil {
		return nil, err
	}
	return resp, nil
}
