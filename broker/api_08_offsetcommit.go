package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// OffsetCommit (key 8): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place, in request order: a commit is acknowledged once its frame is fsynced
//     on the shared volume and the group's fence still holds this broker's coordinator epoch,
//     so a later OffsetFetch on this connection sees it.
//   - Authorization (Apache's handleOffsetCommitRequest): READ on the group, else every
//     partition answers GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its
//     partitions answer TOPIC_AUTHORIZATION_FAILED (after the others' answers). Only the
//     authorized topics reach the coordinator, and not at all when none is: nothing refused
//     is committed.
func init() { registerGroupAPI(8, handleOffsetCommit) }

func handleOffsetCommit(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		return offsetCommitRefused(req, req.Topics, kerr.GroupAuthorizationFailed.Code), nil
	}
	allowed, denied := splitAuthorized(rc, req.Topics, func(t kmsg.OffsetCommitRequestTopic) string { return t.Topic }, acl.OpRead)
	if len(denied) == 0 {
		return answer(rc.coordinator().OffsetCommit(rc.ctx, req))
	}
	refused := offsetCommitRefused(req, denied, kerr.TopicAuthorizationFailed.Code)
	if len(allowed) == 0 {
		return refused, nil
	}
	req.Topics = allowed
	resp, err := rc.coordinator().OffsetCommit(rc.ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Topics = append(resp.Topics, refused.Topics...)
	return resp, nil
}

// offsetCommitRefused answers every partition of topics with code.
func offsetCommitRefused(req *kmsg.OffsetCommitRequest, topics []kmsg.OffsetCommitRequestTopic, code int16) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range topics {
		ot := kmsg.NewOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
