package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// AddOffsetsToTxn (key 25): versions 0-3, Apache 3.7's (handleAddOffsetsToTxnRequest).
//
// Behaviour:
//   - The group's __consumer_offsets partition (the group rule: the one FindCoordinator's
//     group answer leads) joins the transaction, by broker/txn's Add rule, so the marker that
//     ends the transaction completes the offsets TxnOffsetCommit left pending there.
//   - The id is served by its coordinator only, as for AddPartitionsToTxn.
//   - Authorization: WRITE on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; READ on the group, else
//     GROUP_AUTHORIZATION_FAILED.
//
// Version notes:
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH.
func init() { register(25, 0, 3, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !rc.allowed(v1alpha1.ACLTransactionalID, req.TransactionalID, acl.OpWrite):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	case !rc.allowedGroup(acl.OpRead, req.Group):
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		return resp, nil
	}
	id, group := req.TransactionalID, req.Group
	p := txn.Producer{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Version: req.Version}
	rc.answerLater(func() (kmsg.Response, error) {
		c, code := rc.h.Txns.Coordinator(id)
		if id == "" {
			c, code = nil, kerr.InvalidRequest.Code
		}
		if code == 0 {
			code = c.AddOffsets(id, p, group)
		}
		resp.ErrorCode = code
		return resp, nil
	})
	return nil, nil
}
