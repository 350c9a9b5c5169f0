package txn

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// State is a transactional id's state, numbered as Apache's TransactionState (the numbers
// are what DescribeTransactions and ListTransactions name by string).
type State int8

const (
	Empty             State = 0
	Ongoing           State = 1
	PrepareCommit     State = 2
	PrepareAbort      State = 3
	CompleteCommit    State = 4
	CompleteAbort     State = 5
	Dead              State = 6
	PrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
	"CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Apache's name of the state, as ListTransactions filters and reports it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState inverts String.
func ParseState(name string) (State, bool) {
	i := slices.Index(stateNames[:], name)
	return State(i), i >= 0
}

// complete reports the states a new transaction may start from.
func (s State) complete() bool { return s == CompleteCommit || s == CompleteAbort }

// preparing reports a decided transaction whose markers are not all written.
func (s State) preparing() bool { return s == PrepareCommit || s == PrepareAbort }

const (
	// NoProducerID and NoEpoch are Kafka's "none" values (RecordBatch.NO_PRODUCER_ID/EPOCH).
	NoProducerID int64 = -1
	NoEpoch      int16 = -1
	// maxEpoch is Short.MaxValue; an epoch ≥ maxEpoch-1 is exhausted (Apache's
	// isEpochExhausted): the next InitProducerId rotates to a new producer id.
	maxEpoch int16 = 32767
)

func epochExhausted(e int16) bool { return e >= maxEpoch-1 }

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string `json:"t"`
	Partition int32  `json:"p"`
}

// Txn is what is persisted per transactional id (Apache's TransactionMetadata): the
// transition counts once it is written.
type Txn struct {
	ID            string           `json:"id"`
	ProducerID    int64            `json:"pid"`
	ProducerEpoch int16            `json:"epoch"`
	LastPID       int64            `json:"lastPid"`
	LastEpoch     int16            `json:"lastEpoch"`
	TimeoutMs     int32            `json:"timeoutMs"`
	State         State            `json:"state"`
	Partitions    []TopicPartition `json:"partitions,omitempty"` // sorted, unique
	StartMs       int64            `json:"startMs"`              // -1 until the first AddPartitions
	UpdateMs      int64            `json:"updateMs"`
}

// clone copies t so a transition never aliases the stored partitions.
func (t Txn) clone() Txn {
	t.Partitions = slices.Clone(t.Partitions)
	return t
}

// has reports whether every one of tps is in the transaction.
func (t Txn) has(tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, ok := slices.BinarySearchFunc(t.Partitions, tp, cmpTP); !ok {
			return false
		}
	}
	return true
}

func cmpTP(a, b TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

func union(a, b []TopicPartition) []TopicPartition {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, cmpTP)
	return slices.Compact(out)
}

// Limits are the coordinator's configured bounds.
type Limits struct {
	// MaxTimeoutMs is transaction.max.timeout.ms (Apache default 900000).
	MaxTimeoutMs int32
}

// fencedCode is PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH for versions before
// fencedFrom (InitProducerId v<4, AddPartitions/AddOffsets/EndTxn v<2).
func fencedCode(version, fencedFrom int16) int16 {
	if version < fencedFrom {
		return kerr.InvalidProducerEpoch.Code
	}
	return kerr.ProducerFenced.Code
}

// InitInput is a decoded InitProducerId with a transactional id.
type InitInput struct {
	TimeoutMs int32
	// ProducerID and ProducerEpoch are the v3+ fields, NoProducerID/NoEpoch when absent.
	ProducerID    int64
	ProducerEpoch int16
	Version       int16
}

// InitOutcome says what an InitProducerId does: Code is the error to answer (0 = none);
// otherwise Next is the state to persist, and Fence says Next is the abort that fences an
// Ongoing transaction (the answer is then CONCURRENT_TRANSACTIONS once it is durable).
type InitOutcome struct {
	Code     int16
	Next     Txn
	Fence    bool
	NeedsPID bool // Next needs a fresh producer id (new id or epoch exhaustion) in Next.ProducerID
}

// Init is the rule of InitProducerId for an existing (or, with exists=false, new) id at now
// (Apache TransactionCoordinator.handleInitProducerId / prepareInitProducerIdTransit). A
// caller that gets NeedsPID sets Next.ProducerID to a fresh producer id.
func Init(cur Txn, exists bool, in InitInput, lim Limits, now int64) InitOutcome {
	if in.TimeoutMs <= 0 || in.TimeoutMs > lim.MaxTimeoutMs {
		return InitOutcome{Code: kerr.InvalidTransactionTimeout.Code}
	}
	if (in.ProducerID == NoProducerID) != (in.ProducerEpoch == NoEpoch) {
		return InitOutcome{Code: kerr.InvalidRequest.Code}
	}
	expected := in.ProducerID != NoProducerID
	if !exists || cur.State == Dead {
		cur = Txn{ID: cur.ID, ProducerID: NoProducerID, ProducerEpoch: NoEpoch,
			LastPID: NoProducerID, LastEpoch: NoEpoch, State: Empty, StartMs: -1}
		n := cur.clone()
		n.TimeoutMs, n.UpdateMs = in.TimeoutMs, now
		n.ProducerEpoch = 0
		return InitOutcome{Next: n, NeedsPID: true}
	}
	fenced := fencedCode(in.Version, 4)
	if expected && !validProducer(cur, in) {
		return InitOutcome{Code: fenced}
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return InitOutcome{Code: kerr.ConcurrentTransactions.Code}
	case Ongoing:
		// Fence the producer: bump the epoch (never returned), abort with it, answer
		// CONCURRENT_TRANSACTIONS; the retry bumps again.
		n := cur.clone()
		if n.ProducerEpoch < maxEpoch {
			n.ProducerEpoch++
		}
		n.LastEpoch = NoEpoch
		n.State, n.UpdateMs = PrepareAbort, now
		return InitOutcome{Next: n, Fence: true}
	}
	// Empty or Complete*.
	n := cur.clone()
	n.TimeoutMs, n.UpdateMs, n.StartMs, n.Partitions, n.State = in.TimeoutMs, now, -1, nil, Empty
	if epochExhausted(cur.ProducerEpoch) && (!expected || in.ProducerEpoch == cur.ProducerEpoch) {
		n.LastPID, n.ProducerEpoch = cur.ProducerID, 0
		n.LastEpoch = NoEpoch
		if expected {
			n.LastEpoch = cur.ProducerEpoch
		}
		return InitOutcome{Next: n, NeedsPID: true}
	}
	switch {
	case !expected:
		if epochExhausted(cur.ProducerEpoch) {
			return InitOutcome{Code: fenced}
		}
		n.ProducerEpoch, n.LastEpoch = cur.ProducerEpoch+1, NoEpoch
	case cur.ProducerEpoch == NoEpoch || in.ProducerEpoch == cur.ProducerEpoch:
		n.ProducerEpoch, n.LastEpoch = cur.ProducerEpoch+1, cur.ProducerEpoch
	case in.ProducerEpoch == cur.LastEpoch:
		// A retry of a call that succeeded: the current epoch again, no bump.
		n.ProducerEpoch, n.LastEpoch = cur.ProducerEpoch, cur.LastEpoch
	default:
		return InitOutcome{Code: fenced}
	}
	return InitOutcome{Next: n}
}

// validProducer is Apache's isValidProducerId for a supplied PID/epoch: the stored epoch is
// −1 (the id was just created), or the PID is the current one (its epoch is checked by the
// bump), or it is the previous PID with an exhausted epoch (a retry of a rotation).
func validProducer(cur Txn, in InitInput) bool {
	return cur.ProducerEpoch == NoEpoch || in.ProducerID == cur.ProducerID ||
		(in.ProducerID == cur.LastPID && epochExhausted(in.ProducerEpoch))
}

// Producer is the (transactional id, producer id, epoch) a transactional call names, with the
// request's version.
type Producer struct {
	ProducerID    int64
	ProducerEpoch int16
	Version       int16
}

// checkProducer is the common first step of AddPartitions, AddOffsets and EndTxn: unknown id
// or another producer id → INVALID_PRODUCER_ID_MAPPING; another epoch → PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2).
func checkProducer(cur Txn, exists bool, p Producer) int16 {
	if !exists || cur.State == Dead || cur.ProducerID != p.ProducerID {
		return kerr.InvalidProducerIDMapping.Code
	}
	if cur.ProducerEpoch != p.ProducerEpoch {
		return fencedCode(p.Version, 2)
	}
	return 0
}

// AddOutcome says what an AddPartitions (or AddOffsets) does: Code to answer, or Next to
// persist when Write is set (Ongoing and already holding the partitions needs no write).
type AddOutcome struct {
	Code  int16
	Next  Txn
	Write bool
}

// Add is the rule of AddPartitionsToTxn (v0–3, and v4 without VerifyOnly) and of
// AddOffsetsToTxn (with the group's offsets partition as tps): one error for all partitions
// (Apache handleAddPartitionsToTransaction).
func Add(cur Txn, exists bool, p Producer, tps []TopicPartition, now int64) AddOutcome {
	if c := checkProducer(cur, exists, p); c != 0 {
		return AddOutcome{Code: c}
	}
	switch cur.State {
	case PrepareCommit, PrepareAbort, PrepareEpochFence:
		return AddOutcome{Code: kerr.ConcurrentTransactions.Code}
	case Ongoing:
		if cur.has(tps) {
			return AddOutcome{}
		}
	}
	n := cur.clone()
	if n.State != Ongoing {
		n.StartMs = now // the timeout runs from the first partition
	}
	n.State, n.UpdateMs, n.Partitions = Ongoing, now, union(n.Partitions, tps)
	return AddOutcome{Next: n, Write: true}
}

// Verify is AddPartitionsToTxn v4's VerifyOnly (KIP-890 part 1): the producer check; a
// transaction being decided (Prepare*) is CONCURRENT_TRANSACTIONS, as Apache's
// handleVerifyPartitionsInTransaction answers; then per partition NONE if it is in the
// transaction, else INVALID_TXN_STATE (3.7's code; 3.8 answers TRANSACTION_ABORTABLE). A
// non-zero code is for every partition. A pending write is not looked at: the append's own
// check is final, as in Apache.
func Verify(cur Txn, exists bool, p Producer, tps []TopicPartition) (code int16, per []int16) {
	if c := checkProducer(cur, exists, p); c != 0 {
		return c, nil
	}
	if cur.State.preparing() {
		return kerr.ConcurrentTransactions.Code, nil
	}
	per = make([]int16, len(tps))
	for i, tp := range tps {
		if cur.State != Ongoing || !cur.has([]TopicPartition{tp}) {
			per[i] = kerr.InvalidTxnState.Code
		}
	}
	return 0, per
}

// EndOutcome says what an EndTxn does: Code to answer, or Next (Prepare*) to persist before
// answering NONE and sending markers when Write is set. A retry of a completed commit/abort
// answers NONE with no write.
type EndOutcome struct {
	Code  int16
	Next  Txn
	Write bool
}

// End is the rule of EndTxn (Apache endTransaction; the table in docs/transactions.md "The coordinator").
func End(cur Txn, exists bool, p Producer, commit bool, now int64) EndOutcome {
	if c := checkProducer(cur, exists, p); c != 0 {
		return EndOutcome{Code: c}
	}
	switch cur.State {
	case Ongoing:
		n := cur.clone()
		n.State, n.UpdateMs = PrepareAbort, now
		if commit {
			n.State = PrepareCommit
		}
		return EndOutcome{Next: n, Write: true}
	case PrepareCommit:
		if commit {
			return EndOutcome{Code: kerr.ConcurrentTransactions.Code}
		}
	case PrepareAbort:
		if !commit {
			return EndOutcome{Code: kerr.ConcurrentTransactions.Code}
		}
	case CompleteCommit:
		if commit {
			return EndOutcome{}
		}
	case CompleteAbort:
		if !commit {
			return EndOutcome{}
		}
	case PrepareEpochFence:
		return EndOutcome{Code: kerr.ConcurrentTransactions.Code}
	}
	return EndOutcome{Code: kerr.InvalidTxnState.Code}
}

// Complete is the state once every marker of a Prepare* transaction is written: Complete*,
// partitions cleared (Apache prepareComplete; the start time stays).
func Complete(cur Txn, now int64) Txn {
	n := cur.clone()
	n.State, n.UpdateMs, n.Partitions = CompleteAbort, now, nil
	if cur.State == PrepareCommit {
		n.State = CompleteCommit
	}
	return n
}

// TimedOut reports whether cur is an Ongoing transaction past its timeout at now
// (Apache TransactionStateManager.timedOutTransactions).
func TimedOut(cur Txn, now int64) bool {
	return cur.State == Ongoing && cur.StartMs >= 0 && now > cur.StartMs+int64(cur.TimeoutMs)
}

// AbortTimedOut is the proactive abort of a timed-out transaction: epoch+1 (fencing the
// producer) and PrepareAbort (Apache abortTimedOutTransactions / prepareFenceProducerEpoch).
func AbortTimedOut(cur Txn, now int64) Txn {
	n := cur.clone()
	if n.ProducerEpoch < maxEpoch {
		n.ProducerEpoch++
	}
	n.LastEpoch = NoEpoch
	n.State, n.UpdateMs = PrepareAbort, now
	return n
}

// Expired reports whether an idle id should be removed: Empty or Complete* with no update for
// expirationMs (transactional.id.expiration.ms).
func Expired(cur Txn, now, expirationMs int64) bool {
	return (cur.State == Empty || cur.State.complete()) && now-cur.UpdateMs >= expirationMs
}
