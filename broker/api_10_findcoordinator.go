package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// FindCoordinator (key 10): versions 0-4 (docs/wire.md, "FindCoordinator").
//
// Behaviour:
//   - Group keys follow the registry's coordinator rule, coordinator.Pick over the view's
//     registered and Alive ids: the leader of the group's __consumer_offsets partition
//     (offsets.topic.num.partitions of them), as Metadata lists it (internal_topics.go). The answer is read from the view only — the answering broker
//     is added to neither set — so every broker gives the same answer for a group, and a
//     draining broker (no longer Alive) stops being picked.
//   - The endpoint is the chosen broker's address on the request's listener (its registry
//     row's, or this connection's when it is the answering broker).
//   - Nothing alive, or a chosen broker with no address on this listener →
//     COORDINATOR_NOT_AVAILABLE.
//   - Transaction keys (type 1) follow the same rule over the transactional id: a
//     transaction coordinator is the broker that coordinates the groups of the id's
//     partition (txn_coordinator.go). An empty transactional id → INVALID_REQUEST. Any other
//     key type → INVALID_REQUEST.
//   - Authorization (Apache's handleFindCoordinatorRequest), per key: a group needs DESCRIBE
//     on it, else GROUP_AUTHORIZATION_FAILED; a transactional id DESCRIBE on it, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED (node -1, empty host, port -1).
//
// Version notes:
//   - v0: no key type: the key is a group.
//   - v0-v3: one key, answered at the top level; v4 batches keys, each answered on its own.
func init() { register(10, 0, 4, handleFindCoordinator) }

const (
	coordinatorTypeGroup       = 0
	coordinatorTypeTransaction = 1
)

func handleFindCoordinator(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)

	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		resp.Coordinators = append(resp.Coordinators, rc.findCoordinator(key, req.CoordinatorType))
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.ErrorMessage = c.ErrorCode, c.ErrorMessage
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
	}
	return resp, nil
}

func (rc *requestContext) findCoordinator(key string, keyType int8) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	fail := func(e *kerr.Error, msg string) kmsg.FindCoordinatorResponseCoordinator {
		c.ErrorCode, c.ErrorMessage = e.Code, &msg
		c.NodeID, c.Host, c.Port = -1, "", -1
		return c
	}
	switch keyType {
	case coordinatorTypeGroup:
		if !rc.allowedGroup(acl.OpDescribe, key) {
			return fail(kerr.GroupAuthorizationFailed, msgGroupAuthorizationFailed)
		}
	case coordinatorTypeTransaction:
		if !rc.allowed(v1alpha1.ACLTransactionalID, key, acl.OpDescribe) {
			return fail(kerr.TransactionalIDAuthorizationFailed, msgTxnAuthorizationFailed)
		}
		if key == "" {
			return fail(kerr.InvalidRequest, "the transactional id is empty")
		}
	default:
		return fail(kerr.InvalidRequest, "unknown coordinator key type")
	}

	id, ok := coordinator.Pick(key, rc.view.Config.OffsetsTopicPartitions, rc.view.RegisteredIDs(), rc.view.AliveIDs())
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "no broker is alive")
	}
	row, _ := rc.view.Row(id)
	addr, ok := rc.address(row)
	if !ok {
		return fail(kerr.CoordinatorNotAvailable, "the coordinator has no address on this listener yet")
	}
	c.NodeID, c.Host, c.Port = id, addr.Host, addr.Port
	return c
}
