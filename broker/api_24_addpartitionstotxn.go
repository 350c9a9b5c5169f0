package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// AddPartitionsToTxn (key 24): versions 0-4, Apache 3.7's (handleAddPartitionsToTxnRequest,
// TransactionCoordinator.handleAddPartitionsToTransaction; docs/transactions.md).
//
// Behaviour:
//   - v0-3 (clients): one transaction; every partition gets the same code, the
//     coordinator's (broker/txn's Add rule: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED,
//     CONCURRENT_TRANSACTIONS, NONE once the partitions are durably in the transaction).
//   - v4 (brokers): a batch of transactions, each answered on its own; VerifyOnly asks
//     whether the partitions are in the transaction (NONE or INVALID_TXN_STATE per
//     partition) and changes nothing.
//   - Before the coordinator: a partition of a topic the principal may not WRITE →
//     TOPIC_AUTHORIZATION_FAILED, of a topic or partition that does not exist →
//     UNKNOWN_TOPIC_OR_PARTITION; then every other partition of that transaction is
//     OPERATION_NOT_ATTEMPTED and nothing is added.
//   - The id is served by its coordinator only (FindCoordinator's rule): another broker's id
//     → NOT_COORDINATOR; before the coordinator epoch is known → COORDINATOR_NOT_AVAILABLE.
//   - Authorization: v4 needs CLUSTER_ACTION on the cluster, else the top-level
//     CLUSTER_AUTHORIZATION_FAILED; v0-3 WRITE on the transactional id, else
//     TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition.
//
// Version notes:
//   - v2: PRODUCER_FENCED replaces INVALID_PRODUCER_EPOCH.
func init() { register(24, 0, 4, handleAddPartitionsToTxn) }

// txnRequestPartitions is one transaction's partitions of an AddPartitionsToTxn, by topic.
type txnRequestPartitions struct {
	topic      string
	partitions []int32
}

func handleAddPartitionsToTxn(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		topics := make([]txnRequestPartitions, len(req.Topics))
		for i, t := range req.Topics {
			topics[i] = txnRequestPartitions{t.Topic, t.Partitions}
		}
		id, p := req.TransactionalID, txn.Producer{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Version: req.Version}
		rc.answerLater(func() (kmsg.Response, error) {
			for _, t := range rc.addPartitionsToTxn(id, p, false, topics) {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.topic
				for i, part := range t.partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = part, t.codes[i]
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp, nil
		})
		return nil, nil
	}
	if !rc.allowedCluster(acl.OpClusterAction) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	type one struct {
		id     string
		p      txn.Producer
		verify bool
		topics []txnRequestPartitions
	}
	txns := make([]one, len(req.Transactions))
	for i, t := range req.Transactions {
		txns[i] = one{id: t.TransactionalID, p: txn.Producer{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch, Version: req.Version}, verify: t.VerifyOnly}
		for _, tt := range t.Topics {
			txns[i].topics = append(txns[i].topics, txnRequestPartitions{tt.Topic, tt.Partitions})
		}
	}
	rc.answerLater(func() (kmsg.Response, error) {
		for _, t := range txns {
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = t.id
			for _, tt := range rc.addPartitionsToTxn(t.id, t.p, t.verify, t.topics) {
				rtt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rtt.Topic = tt.topic
				for i, part := range tt.partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					rp.Partition, rp.ErrorCode = part, tt.codes[i]
					rtt.Partitions = append(rtt.Partitions, rp)
				}
				rt.Topics = append(rt.Topics, rtt)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp, nil
	})
	return nil, nil
}

// txnPartitionCodes is one topic's answer: a code per requested partition.
type txnPartitionCodes struct {
	topic      string
	partitions []int32
	codes      []int16
}

// addPartitionsToTxn answers one transaction of an AddPartitionsToTxn (verify: v4's
// VerifyOnly), in request order.
func (rc *requestContext) addPartitionsToTxn(id string, p txn.Producer, verify bool, topics []txnRequestPartitions) []txnPartitionCodes {
	out := make([]txnPartitionCodes, len(topics))
	var tps []txn.TopicPartition
	failed := false
	for i, t := range topics {
		out[i] = txnPartitionCodes{topic: t.topic, partitions: t.partitions, codes: make([]int16, len(t.partitions))}
		if p.Version < 4 && !rc.allowed(v1alpha1.ACLTransactionalID, id, acl.OpWrite) {
			failed = true
			fillCodes(out[i].codes, kerr.TransactionalIDAuthorizationFailed.Code)
			continue
		}
		allowed := rc.allowedTopic(acl.OpWrite, t.topic)
		vt, known := rc.view.Topic(t.topic)
		for j, part := range t.partitions {
			switch {
			case !allowed:
				out[i].codes[j], failed = kerr.TopicAuthorizationFailed.Code, true
			case !known || part < 0 || int(part) >= len(vt.Partitions):
				out[i].codes[j], failed = kerr.UnknownTopicOrPartition.Code, true
			default:
				tps = append(tps, txn.TopicPartition{Topic: t.topic, Partition: part})
			}
		}
	}
	if failed {
		for i := range out {
			for j, c := range out[i].codes {
				if c == 0 {
					out[i].codes[j] = kerr.OperationNotAttempted.Code
				}
			}
		}
		return out
	}
	if id == "" {
		return answerAll(out, kerr.InvalidRequest.Code)
	}
	c, code := rc.h.Txns.Coordinator(id)
	var per []int16
	switch {
	case code != 0:
	case verify:
		code, per = c.VerifyPartitions(id, p, tps)
	default:
		code = c.AddPartitions(id, p, tps)
	}
	k := 0
	for i := range out {
		for j := range out[i].codes {
			if code == 0 && per != nil {
				out[i].codes[j] = per[k]
			} else {
				out[i].codes[j] = code
			}
			k++
		}
	}
	return out
}

// answerAll gives every partition of out code.
func answerAll(out []txnPartitionCodes, code int16) []txnPartitionCodes {
	for i := range out {
		fillCodes(out[i].codes, code)
	}
	return out
}

func fillCodes(codes []int16, code int16) {
	for i := range codes {
		codes[i] = code
	}
}
