package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// TxnOffsetCommit (key 28) v0–3: the versions broker/groups serves (groups.VersionRange;
// docs/groups.md "Transactional offsets").
//
// Behaviour:
//   - The coordinator applies every rule; this handler only routes (rc.coordinator). The
//     offsets are pending under the producer id until the transaction's marker reaches
//     groups.Coordinator.CompleteTransaction (the WriteTxnMarkers handler calls it).
//   - Answered in place, in request order, once the pending offsets are fsynced on the
//     shared volume under the group's and its __consumer_offsets partition's fences.
//   - Authorization (Apache's handleTxnOffsetCommitRequest): WRITE on the transactional id,
//     else every partition answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group,
//     else GROUP_AUTHORIZATION_FAILED; then READ on each topic, else its partitions answer
//     TOPIC_AUTHORIZATION_FAILED (after the others' answers). Unknown topics answer
//     UNKNOWN_TOPIC_OR_PARTITION (the coordinator). Only authorized topics reach the
//     coordinator, and nothing at all when none is.
func init() { registerGroupAPI(28, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	if !rc.allowed(v1alpha1.ACLTransactionalID, req.TransactionalID, acl.OpWrite) {
		return txnOffsetCommitRefused(req, req.Topics, kerr.TransactionalIDAuthorizationFailed.Code), nil
	}
	if !rc.allowedGroup(acl.OpRead, req.Group) {
		return txnOffsetCommitRefused(req, req.Topics, kerr.GroupAuthorizationFailed.Code), nil
	}
	allowed, denied := splitAuthorized(rc, req.Topics, func(t kmsg.TxnOffsetCommitRequestTopic) string { return t.Topic }, acl.OpRead)
	if len(denied) == 0 {
		return answer(rc.coordinator().TxnOffsetCommit(rc.ctx, req))
	}
	refused := txnOffsetCommitRefused(req, denied, kerr.TopicAuthorizationFailed.Code)
	if len(allowed) == 0 {
		return refused, nil
	}
	req.Topics = allowed
	resp, err := rc.coordinator().TxnOffsetCommit(rc.ctx, req)
	if err != nil {
		return nil, err
	}
	resp.Topics = append(resp.Topics, refused.Topics...)
	return resp, nil
}

// txnOffsetCommitRefused answers every partition of topics with code.
func txnOffsetCommitRefused(req *kmsg.TxnOffsetCommitRequest, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range topics {
		ot := kmsg.NewTxnOffsetCommitResponseTopic()
		ot.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			op := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			op.Partition, op.ErrorCode = rp.Partition, code
			ot.Partitions = append(ot.Partitions, op)
		}
		resp.Topics = append(resp.Topics, ot)
	}
	return resp
}
