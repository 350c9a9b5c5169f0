package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
)

// CreatePartitions (key 37): versions 0-3, Apache 3.7's (docs/topics.md, "Admin APIs
// (broker)").
//
// Behaviour:
//   - Count is the topic's new total: the KafkaTopic's spec.partitions is raised to it (the
//     CRD refuses any decrease) and the assignment reconciler places the new partitions.
//   - Errors: a topic named twice → INVALID_REQUEST; unknown → UNKNOWN_TOPIC_OR_PARTITION;
//     Count not above the current count, or above v1alpha1.MaxPartitions →
//     INVALID_PARTITIONS; an assignment → INVALID_REPLICA_ASSIGNMENT (with a wrong number of
//     entries in Apache's words, otherwise because paddock places leaders itself).
//   - ValidateOnly runs the checks and changes nothing.
//   - Authorization (Apache's ControllerApis.createPartitions): ALTER on the topic, after the
//     duplicate check and before the others, else TOPIC_AUTHORIZATION_FAILED; nothing grows.
//   - The answer waits (for at most the request's timeout) until this broker's view shows
//     the new partitions with listed leaders.
func init() { register(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	write, wait, cancel := rc.adminDeadlines(req.TimeoutMillis)
	defer cancel()

	counts := countBy(req.Topics, func(t kmsg.CreatePartitionsRequestTopic) string { return t.Topic })
	grown := map[string]int32{}
	room := rc.topicRoom()
	for _, rt := range req.Topics {
		r := kmsg.NewCreatePartitionsResponseTopic()
		r.Topic = rt.Topic
		t, code, msg := rc.checkCreatePartitions(rt, counts[rt.Topic] > 1)
		if code == 0 {
			added := int(rt.Count) - len(t.Partitions)
			code, msg = room.take(fmt.Sprintf("Adding %d partitions to topic '%s'", added, rt.Topic), 0, added)
		}
		if code == 0 && !req.ValidateOnly {
			code, msg = rc.growTopic(write, t, rt.Count)
		}
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
		} else {
			grown[rt.Topic] = rt.Count
		}
		resp.Topics = append(resp.Topics, r)
	}
	if !req.ValidateOnly {
		waitView(wait, rc.h.View, func(s *cluster.Snapshot) bool {
			for name, n := range grown {
				t, ok := s.Topic(name)
				if !ok || len(t.Partitions) < int(n) || !rc.leadersListed(s, t) {
					return false
				}
			}
			return true
		})
	}
	return resp, nil
}

func (rc *requestContext) checkCreatePartitions(rt kmsg.CreatePartitionsRequestTopic, duplicate bool) (*cluster.Topic, int16, string) {
	if duplicate {
		return nil, kerr.InvalidRequest.Code, "Duplicate topic in the request."
	}
	if !rc.allowedTopic(acl.OpAlter, rt.Topic) {
		return nil, kerr.TopicAuthorizationFailed.Code, msgTopicAuthorizationFailed
	}
	if code, msg := createPartitionsInternalRefusal(rt.Topic); code != 0 {
		return nil, code, msg
	}
	if rc.h.Admin == nil {
		return nil, kerr.UnknownServerError.Code, errNoAdmin
	}
	t, ok := rc.view.Topic(rt.Topic)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition."
	}
	cur := int32(len(t.Partitions))
	switch {
	case rt.Count < cur:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("Topic currently has %d partitions, which is higher than the requested %d.", cur, rt.Count)
	case rt.Count == cur:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("Topic already has %d partitions.", cur)
	case rt.Count > v1alpha1.MaxPartitions:
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("Number of partitions %d is above paddock's limit of %d per topic.", rt.Count, v1alpha1.MaxPartitions)
	case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count-cur):
		return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", rt.Count-cur, len(rt.Assignment))
	case rt.Assignment != nil:
		return nil, kerr.InvalidReplicaAssignment.Code, "paddock places partition leaders itself (one replica per partition on shared storage); manual replica assignments are not supported"
	}
	return t, 0, ""
}

// growTopic raises t's spec.partitions to count, on the current object.
func (rc *requestContext) growTopic(write context.Context, t *cluster.Topic, count int32) (int16, string) {
	_, err := rc.h.Admin.UpdateSpec(write, t.Object, t.UID, func(kt *v1alpha1.KafkaTopic) error {
		if kt.Spec.Partitions >= count {
			return errAlreadyGrown{have: kt.Spec.Partitions}
		}
		kt.Spec.Partitions = count
		return nil
	})
	var grown errAlreadyGrown
	switch {
	case err == nil:
		return 0, ""
	case errors.As(err, &grown):
		return kerr.InvalidPartitions.Code, fmt.Sprintf("Topic currently has %d partitions, which is not below the requested %d.", grown.have, count)
	}
	code, msg := apiErrorCode(err)
	return code, fmt.Sprintf("update KafkaTopic %s of '%s': %s", t.Object, t.Name, msg)
}

// errAlreadyGrown refuses an update that would not grow the topic (another request grew it
// first).
type errAlreadyGrown struct{ have int32 }

func (e errAlreadyGrown) Error() string {
	return fmt.Sprintf("the topic already has %d partitions", e.have)
}
