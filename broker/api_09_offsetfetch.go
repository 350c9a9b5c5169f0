package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// OffsetFetch (key 9): the versions broker/groups serves (groups.VersionRange;
// docs/groups.md).
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator).
//   - Answered in place; shows only acknowledged commits.
//   - Authorization (Apache's handleOffsetFetchRequest): DESCRIBE on the group, else
//     GROUP_AUTHORIZATION_FAILED (v0-1 on every named partition, v2-7 at the top, v8+ on the
//     group); then DESCRIBE on each topic: all topics asked (null) → the unauthorized ones
//     are left out; named → their partitions answer TOPIC_AUTHORIZATION_FAILED, offset -1,
//     after the others. Unauthorized groups and topics never reach the coordinator.
func init() { registerGroupAPI(9, handleOffsetFetch) }

func handleOffsetFetch(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	if !rc.enforcing() {
		return answer(rc.coordinator().OffsetFetch(rc.ctx, req))
	}
	if req.Version >= 8 {
		return rc.offsetFetchGroups(req)
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if !rc.allowedGroup(acl.OpDescribe, req.Group) {
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		if req.Version < 2 {
			resp.Topics = refusedOffsets(req.Topics, func(t kmsg.OffsetFetchRequestTopic) (string, []int32) { return t.Topic, t.Partitions }, kerr.GroupAuthorizationFailed.Code)
		}
		return resp, nil
	}
	topic := func(t kmsg.OffsetFetchRequestTopic) string { return t.Topic }
	allowed, denied := splitAuthorized(rc, req.Topics, topic, acl.OpDescribe)
	if req.Topics != nil && len(allowed) == 0 && len(denied) > 0 {
		resp.Topics = refusedOffsets(denied, func(t kmsg.OffsetFetchRequestTopic) (string, []int32) { return t.Topic, t.Partitions }, kerr.TopicAuthorizationFailed.Code)
		return resp, nil
	}
	if req.Topics != nil {
		req.Topics = allowed
	}
	got, err := rc.coordinator().OffsetFetch(rc.ctx, req)
	if err != nil {
		return nil, err
	}
	got.Topics = slices.DeleteFunc(got.Topics, func(t kmsg.OffsetFetchResponseTopic) bool { return !rc.allowedTopic(acl.OpDescribe, t.Topic) })
	got.Topics = append(got.Topics, refusedOffsets(denied, func(t kmsg.OffsetFetchRequestTopic) (string, []int32) { return t.Topic, t.Partitions }, kerr.TopicAuthorizationFailed.Code)...)
	return got, nil
}

// offsetFetchGroups is the v8+ answer under authorization: each group's checks as above.
func (rc *requestContext) offsetFetchGroups(req *kmsg.OffsetFetchRequest) (kmsg.Response, error) {
	var (
		asked   []kmsg.OffsetFetchRequestGroup
		refused []kmsg.OffsetFetchResponseGroup
		denied  = map[string][]kmsg.OffsetFetchRequestGroupTopic{}
	)
	topic := func(t kmsg.OffsetFetchRequestGroupTopic) string { return t.Topic }
	parts := func(t kmsg.OffsetFetchRequestGroupTopic) (string, []int32) { return t.Topic, t.Partitions }
	for _, g := range req.Groups {
		if !rc.allowedGroup(acl.OpDescribe, g.Group) {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			refused = append(refused, rg)
			continue
		}
		allowed, d := splitAuthorized(rc, g.Topics, topic, acl.OpDescribe)
		if g.Topics != nil && len(allowed) == 0 && len(d) > 0 {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			rg.Topics = groupTopics(refusedOffsets(d, parts, kerr.TopicAuthorizationFailed.Code))
			refused = append(refused, rg)
			continue
		}
		if g.Topics != nil {
			g.Topics = allowed
		}
		denied[g.Group] = d
		asked = append(asked, g)
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if len(asked) > 0 {
		req.Groups = asked
		got, err := rc.coordinator().OffsetFetch(rc.ctx, req)
		if err != nil {
			return nil, err
		}
		resp = got
		for i := range resp.Groups {
			g := &resp.Groups[i]
			g.Topics = slices.DeleteFunc(g.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !rc.allowedTopic(acl.OpDescribe, t.Topic) })
			g.Topics = append(g.Topics, groupTopics(refusedOffsets(denied[g.Group], parts, kerr.TopicAuthorizationFailed.Code))...)
		}
	}
	resp.Groups = append(resp.Groups, refused...)
	return resp, nil
}

// refusedOffsets answers every named partition of topics with code and no offset.
func refusedOffsets[T any](topics []T, parts func(T) (string, []int32), code int16) []kmsg.OffsetFetchResponseTopic {
	var out []kmsg.OffsetFetchResponseTopic
	for _, rt := range topics {
		name, partitions := parts(rt)
		ot := kmsg.NewOffsetFetchResponseTopic()
		ot.Topic = name
		for _, p := range partitions {
			op := kmsg.NewOffsetFetchResponseTopicPartition()
			op.Partition, op.Offset, op.LeaderEpoch, op.Metadata, op.ErrorCode = p, -1, -1, strptr(""), code
			ot.Partitions = append(ot.Partitions, op)
		}
		out = append(out, ot)
	}
	return out
}

// groupTopics is topics in the v8+ shape.
func groupTopics(topics []kmsg.OffsetFetchResponseTopic) []kmsg.OffsetFetchResponseGroupTopic {
	out := make([]kmsg.OffsetFetchResponseGroupTopic, 0, len(topics))
	for _, t := range topics {
		gt := kmsg.NewOffsetFetchResponseGroupTopic()
		gt.Topic = t.Topic
		for _, p := range t.Partitions {
			gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
			gt.Partitions = append(gt.Partitions, gp)
		}
		out = append(out, gt)
	}
	return out
}
