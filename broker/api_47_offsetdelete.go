package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// OffsetDelete (key 47): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, once the deletion is durable.
//   - Authorization (Apache's handleOffsetDeleteRequest): DELETE on the group, else the
//     top-level GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions
//     answer TOPIC_AUTHORIZATION_FAILED (after the others). Nothing refused is deleted.
func init() { registerGroupAPI(47, handleOffsetDelete) }

func handleOffsetDelete(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	if !rc.allowedGroup(acl.OpDelete, req.Group) {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	allowed, denied := splitAuthorized(rc, req.Topics, func(t kmsg.OffsetDeleteRequestTopic) string { return t.Topic }, acl.OpRead)
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if len(denied) == 0 || len(allowed) > 0 {
		req.Topics = allowed
		got, err := rc.coordinator().OffsetDelete(rc.ctx, req)
		if err != nil {
			return nil, err
		}
		resp = got
	}
	for _, rt := range denied {
		ot := kmsg.NewOffsetDeleteResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetDeleteResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, kerr.TopicAuthorizationFailed.Code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp, nil
}
