package broker

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// InitProducerId (key 22): versions 0-4, Apache 3.7's (docs/dataplane.md, "ListOffsets,
// OffsetForLeaderEpoch, InitProducerId").
//
// Behaviour:
//   - Idempotent producers (a null transactional id) get a new producer id every time, epoch
//     0 — also when the request names an existing producer id and epoch, as Apache's
//     coordinator does for a null transactional id.
//   - Ids come from storage.ProducerIDs on the shared volume (<data>/<clusterID>/producer-ids/:
//     blocks claimed and made durable before any id in them is handed out), so they are
//     unique across brokers and restarts. The allocator opens on first use, once the view
//     knows the cluster id; until then → COORDINATOR_NOT_AVAILABLE (retriable). A volume
//     failure → KAFKA_STORAGE_ERROR (retriable).
//   - Checks, in Apache's order (KafkaApis.handleInitProducerIdRequest, then
//     TransactionCoordinator.handleInitProducerId): exactly one of producer id and epoch is
//     -1 → INVALID_REQUEST; a null transactional id → a new id; an empty one →
//     INVALID_REQUEST; transaction_timeout_ms ≤ 0 or above transaction.max.timeout.ms
//     (900000) → INVALID_TRANSACTION_TIMEOUT.
//   - A transactional id is served by its transaction coordinator (txn_coordinator.go; the
//     broker FindCoordinator names for it, else NOT_COORDINATOR): broker/txn's Init rule —
//     a new id gets a new producer id at epoch 0, a known one its epoch bumped (an Ongoing
//     transaction is aborted first: CONCURRENT_TRANSACTIONS until that is done), a zombie
//     PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v4). Before the coordinator epoch is
//     known → COORDINATOR_NOT_AVAILABLE.
//   - Authorization (Apache's handleInitProducerIdRequest), before every other check: a
//     transactional id needs WRITE on it, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; a null
//     one IDEMPOTENT_WRITE on the cluster or WRITE on some topic (authorizeByResourceType:
//     acl.Authorizer.AllowedOnAny), else CLUSTER_AUTHORIZATION_FAILED. No id is allocated.
//
// Version notes:
//   - v3 (KIP-360): an existing producer id and epoch may be named.
func init() { register(22, 0, 4, handleInitProducerID) }

// transactionMaxTimeoutMs is Apache's transaction.max.timeout.ms default.
const transactionMaxTimeoutMs = 900000

func handleInitProducerID(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	switch {
	case req.TransactionalID != nil && !rc.allowed(v1alpha1.ACLTransactionalID, *req.TransactionalID, acl.OpWrite):
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
	case req.TransactionalID == nil && !rc.allowedCluster(acl.OpIdempotentWrite) && !rc.allowedOnAnyTopic(acl.OpWrite):
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
	case (req.ProducerID == -1) != (req.ProducerEpoch == -1):
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionalID == nil:
		id, err := rc.h.ProducerIDs.next(rc.view.ClusterID)
		switch {
		case errors.Is(err, errNoClusterID):
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		case err != nil:
			rc.h.Log.Error(err, "InitProducerId: no producer id allocated")
			resp.ErrorCode = kerr.KafkaStorageError.Code
		default:
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
	case *req.TransactionalID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.TransactionTimeoutMillis <= 0 || req.TransactionTimeoutMillis > transactionMaxTimeoutMs:
		resp.ErrorCode = kerr.InvalidTransactionTimeout.Code
	default:
		id := *req.TransactionalID
		in := txn.InitInput{TimeoutMs: req.TransactionTimeoutMillis, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch, Version: req.Version}
		rc.answerLater(func() (kmsg.Response, error) {
			c, code := rc.h.Txns.Coordinator(id)
			if code == 0 {
				resp.ProducerID, resp.ProducerEpoch, code = c.InitProducerID(id, in)
			}
			resp.ErrorCode = code
			return resp, nil
		})
		return nil, nil
	}
	return resp, nil
}

// errNoClusterID: the view has no cluster id yet, so the allocator's directory has no name.
var errNoClusterID = errors.New("the cluster id is not known yet")

// ProducerIDSource opens the cluster's producer-id allocator on first use: its directory
// (storage.ProducerIDsDir) is named by the cluster id, which the view learns from the
// KafkaCluster status. Safe for concurrent use; a nil source has no volume and fails.
type ProducerIDSource struct {
	DataDir string
	FS      storage.FS

	mu        sync.Mutex
	clusterID string               // guarded by mu
	ids       *storage.ProducerIDs // guarded by mu
}

// next returns a producer id no one has been given before.
func (s *ProducerIDSource) next(clusterID string) (int64, error) {
	if s == nil {
		return 0, fmt.Errorf("this broker has no data volume for producer ids")
	}
	if clusterID == "" {
		return 0, errNoClusterID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil || s.clusterID != clusterID {
		fsys := s.FS
		if fsys == nil {
			fsys = storage.OSFS{}
		}
		ids, err := storage.OpenProducerIDs(fsys, storage.ProducerIDsDir(s.DataDir, clusterID), 0)
		if err != nil {
			return 0, err
		}
		s.ids, s.clusterID = ids, clusterID
	}
	return s.ids.Next()
}
