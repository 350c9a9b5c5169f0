package broker

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// ListTransactions (key 66): version 0, Apache 3.7's (handleListTransactionsRequest).
//
// Behaviour:
//   - Sent to every broker: each lists the ids its transaction coordinator holds (every id
//     the coordinator rule gives it, claimed at its coordinator epoch's start), filtered by
//     state names and producer ids (an empty filter matches all). State names it does not
//     know are returned in UnknownStateFilters and match nothing; Dead ids are left out.
//     Before the coordinator runs the list is empty.
//   - Authorization: ids the principal may not DESCRIBE are left out.
func init() { register(66, 0, 0, handleListTransactions) }

func handleListTransactions(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	c := rc.h.Txns.Current()
	if c == nil {
		return resp, nil
	}
	txns, unknown := c.List(req.StateFilters, req.ProducerIDFilters)
	resp.UnknownStateFilters = unknown
	for _, t := range txns {
		if !rc.allowed(v1alpha1.ACLTransactionalID, t.ID, acl.OpDescribe) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.ProducerID, t.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp, nil
}
