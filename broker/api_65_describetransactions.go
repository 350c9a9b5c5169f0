package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeTransactions (key 65): version 0, Apache 3.7's (handleDescribeTransactionsRequest).
//
// Behaviour:
//   - Per id, from its coordinator (another broker's id → NOT_COORDINATOR, as Apache's
//     coordinator answers an id it does not own): state, timeout, start time (-1 before the
//     first partition), producer id and epoch, and the partitions by topic. Unknown or
//     expired (Dead) ids → TRANSACTIONAL_ID_NOT_FOUND; an empty id → INVALID_REQUEST.
//   - Authorization: DESCRIBE on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED; topics the principal may not DESCRIBE are left
//     out of the partitions.
func init() { register(65, 0, 0, handleDescribeTransactions) }

func handleDescribeTransactions(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	ids := append([]string(nil), req.TransactionalIDs...)
	rc.answerLater(func() (kmsg.Response, error) {
		for _, id := range ids {
			resp.TransactionStates = append(resp.TransactionStates, rc.describeTransaction(id))
		}
		return resp, nil
	})
	return nil, nil
}

func (rc *requestContext) describeTransaction(id string) kmsg.DescribeTransactionsResponseTransactionState {
	st := kmsg.NewDescribeTransactionsResponseTransactionState()
	st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
	if !rc.allowed(v1alpha1.ACLTransactionalID, id, acl.OpDescribe) {
		st.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		return st
	}
	if id == "" {
		st.ErrorCode = kerr.InvalidRequest.Code
		return st
	}
	c, code := rc.h.Txns.Coordinator(id)
	var t txn.Txn
	if code == 0 {
		t, code = c.Describe(id)
	}
	if code != 0 {
		st.ErrorCode = code
		return st
	}
	st.State, st.TimeoutMillis, st.StartTimestamp = t.State.String(), t.TimeoutMs, t.StartMs
	st.ProducerID, st.ProducerEpoch = t.ProducerID, t.ProducerEpoch
	for _, tp := range t.Partitions { // sorted by topic, then partition
		if !rc.allowedTopic(acl.OpDescribe, tp.Topic) {
			continue
		}
		if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
			rt.Topic = tp.Topic
			st.Topics = append(st.Topics, rt)
		}
		last := &st.Topics[len(st.Topics)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return st
}
