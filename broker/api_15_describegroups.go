package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups (key 15), the versions broker/groups serves (docs/groups.md): the coordinator
// applies every rule; this handler only routes. Answered in place.
func init() { registerGroupAPI(15, handleDescribeGroups) }

func handleDescribeGroups(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	c := rc.h.Groups.Coordinator()
	if c == nil {
		return groupsUnavailable(kreq), nil
	}
	resp, err := c.DescribeGroups(rc.ctx, kreq.(*kmsg.DescribeGroupsRequest))
	if err != nil {
		return nil, err
	}
	return resp, nil
}
