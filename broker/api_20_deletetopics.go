package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// DeleteTopics (key 20): versions 0-6, Apache 3.7's (docs/topics.md, "Admin APIs (broker)").
//
// Behaviour:
//   - Deleting a topic deletes its KafkaTopic, guarded by the object's uid (a topic re-created
//     meanwhile is not deleted by a stale request); the assignment reconciler then unassigns
//     it and one broker removes its data (docs/topics.md, "Deleting a topic").
//   - Errors: a topic named twice → INVALID_REQUEST; an unknown name →
//     UNKNOWN_TOPIC_OR_PARTITION, an unknown id → UNKNOWN_TOPIC_ID; the cluster's
//     delete.topic.enable=false → TOPIC_DELETION_DISABLED.
//   - A deleted topic stops being served at once: the answer waits (for at most the
//     request's timeout) until this broker's view no longer lists it, so the client's next
//     Metadata here does not see it.
//   - Authorization (Apache's ControllerApis.deleteTopics): DELETE on the topic or on the
//     cluster, after the request checks (both or neither of name and id, duplicates) and
//     before the others, else TOPIC_AUTHORIZATION_FAILED and nothing is deleted; an id that
//     names no topic is UNKNOWN_TOPIC_ID first (there is no name to authorize).
//
// Version notes:
//   - v0-v2: TOPIC_DELETION_DISABLED does not exist: INVALID_REQUEST instead.
//   - v0-v5: topics by name in TopicNames; v6: in Topics, each by name or by topic id, and an
//     entry with both or neither → INVALID_REQUEST.
func init() { register(20, 0, 6, handleDeleteTopics) }

func handleDeleteTopics(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	write, wait, cancel := rc.adminDeadlines(req.TimeoutMillis)
	defer cancel()

	entries := req.Topics
	if req.Version < 6 {
		entries = make([]kmsg.DeleteTopicsRequestTopic, len(req.TopicNames))
		for i, name := range req.TopicNames {
			entries[i] = kmsg.NewDeleteTopicsRequestTopic()
			entries[i].Topic = strptr(name)
		}
	}
	seen := countBy(entries, deleteKey)
	var deleted []*cluster.Topic
	for _, e := range entries {
		r := kmsg.NewDeleteTopicsResponseTopic()
		r.Topic, r.TopicID = e.Topic, e.TopicID
		t, code, msg := rc.checkDelete(e, seen[deleteKey(e)] > 1, req.Version)
		if code == 0 {
			r.Topic, r.TopicID = strptr(t.Name), t.ID
			code, msg = rc.deleteTopic(write, t)
		}
		if code == 0 {
			deleted = append(deleted, t)
		} else {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		resp.Topics = append(resp.Topics, r)
	}
	waitView(wait, rc.h.View, func(s *cluster.Snapshot) bool {
		for _, t := range deleted {
			if live, ok := s.Topic(t.Name); ok && live.UID == t.UID {
				return false
			}
		}
		return true
	})
	return resp, nil
}

// deleteKey identifies an entry for the duplicate check.
func deleteKey(e kmsg.DeleteTopicsRequestTopic) string {
	if e.Topic != nil {
		return "name:" + *e.Topic
	}
	return fmt.Sprintf("id:%x", e.TopicID)
}

// checkDelete finds the topic an entry names, or the error the entry answers with.
func (rc *requestContext) checkDelete(e kmsg.DeleteTopicsRequestTopic, duplicate bool, version int16) (*cluster.Topic, int16, string) {
	hasID := e.TopicID != ([16]byte{})
	switch {
	case (e.Topic != nil) == hasID:
		return nil, kerr.InvalidRequest.Code, "Exactly one of the topic name and the topic id must be set."
	case duplicate:
		return nil, kerr.InvalidRequest.Code, "Duplicate topic in the request."
	case !rc.mayDeleteTopic(e):
		return nil, kerr.TopicAuthorizationFailed.Code, msgTopicAuthorizationFailed
	case rc.deletesInternal(e):
		msg := fmt.Sprintf(errDeleteInternal, topicname.ConsumerOffsets)
		if version < 3 {
			return nil, kerr.InvalidRequest.Code, msg
		}
		return nil, kerr.TopicDeletionDisabled.Code, msg
	case rc.h.Admin == nil:
		return nil, kerr.UnknownServerError.Code, errNoAdmin
	case !rc.view.Config.DeleteTopicEnable:
		if version < 3 {
			return nil, kerr.InvalidRequest.Code, "Topic deletion is disabled (delete.topic.enable=false)."
		}
		return nil, kerr.TopicDeletionDisabled.Code, "Topic deletion is disabled (delete.topic.enable=false)."
	}
	if hasID {
		if t, ok := rc.view.TopicByID(e.TopicID); ok {
			return t, 0, ""
		}
		return nil, kerr.UnknownTopicID.Code, "This server does not host this topic ID."
	}
	if t, ok := rc.view.Topic(*e.Topic); ok {
		return t, 0, ""
	}
	return nil, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition."
}

// mayDeleteTopic reports whether the principal may delete the topic e names: DELETE on it or
// on the cluster. An id no topic has is left to the existence check.
func (rc *requestContext) mayDeleteTopic(e kmsg.DeleteTopicsRequestTopic) bool {
	if !rc.enforcing() || rc.allowedCluster(acl.OpDelete) {
		return true
	}
	name := ""
	switch {
	case e.Topic != nil:
		name = *e.Topic
	case rc.deletesInternal(e):
		name = topicname.ConsumerOffsets
	default:
		t, ok := rc.view.TopicByID(e.TopicID)
		if !ok {
			return true
		}
		name = t.Name
	}
	return rc.allowedTopic(acl.OpDelete, name)
}

// deleteTopic deletes t's KafkaTopic, if it is still the object the view showed.
func (rc *requestContext) deleteTopic(write context.Context, t *cluster.Topic) (int16, string) {
	err := rc.h.Admin.DeleteTopic(write, t.Object, t.UID)
	switch {
	case err == nil:
		return 0, ""
	case apierrors.IsConflict(err): // the uid precondition: another topic of that name now
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("Topic '%s' was deleted and re-created meanwhile.", t.Name)
	}
	code, msg := apiErrorCode(err)
	return code, fmt.Sprintf("delete KafkaTopic %s of '%s': %s", t.Object, t.Name, msg)
}
