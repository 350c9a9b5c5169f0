package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// EndTxn (key 26): versions 0-3, Apache 3.7's (handleEndTxnRequest,
// TransactionCoordinator.endTransaction).
//
// Behaviour:
//   - broker/txn's End rule (docs/transactions.md, the EndTxn table): from Ongoing the
//     decision (PrepareCommit or PrepareAbort) is made durable, then answered NONE; the
//     markers are written after and the id completes when every partition has its marker.
//     A retried EndTxn of the decision made answers NONE (or CONCURRENT_TRANSACTIONS while
//     its markers are still being written).
//   - The id is served by its coordinator only, as for AddPartitionsToTxn.
//   - Authorization: WRITE on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
//
// Version notes:
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH.
//   - v4+ (TRANSACTION_ABORTABLE) and v5 (KIP-890 part 2, an epoch bump per transaction)
//     are not served: 3.7's range.
func init() { register(26, 0, 3, handleEndTxn) }

func handleEndTxn(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !rc.allowed(v1alpha1.ACLTransactionalID, req.TransactionalID, acl.OpWrite) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return resp, nil
	}
	id, commit := req.TransactionalID, req.Commit
	p := txn.Producer{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Version: req.Version}
	rc.answerLater(func() (kmsg.Response, error) {
		c, code := rc.h.Txns.Coordinator(id)
		if id == "" {
			c, code = nil, kerr.InvalidRequest.Code
		}
		if code == 0 {
			code = c.EndTxn(id, p, commit)
		}
		resp.ErrorCode = code
		return resp, nil
	})
	return nil, nil
}
