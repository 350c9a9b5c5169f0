package txn

import (
	"context"
	"errors"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"k8s.io/utils/clock"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// Apache 3.7's defaults.
const (
	DefaultMaxTimeoutMs         = 900000    // transaction.max.timeout.ms
	DefaultExpirationMs         = 604800000 // transactional.id.expiration.ms
	DefaultAbortScanInterval    = 10 * time.Second
	DefaultExpiryScanInterval   = time.Hour
	DefaultMarkerRetryBackoff   = 100 * time.Millisecond
	DefaultMarkerRequestTimeout = 30 * time.Second
	// OffsetsTopic is the topic AddOffsetsToTxn adds a partition of.
	OffsetsTopic = "__consumer_offsets"
)

// ProducerIDs hands out cluster-unique producer ids; *storage.ProducerIDs is one.
type ProducerIDs interface{ Next() (int64, error) }

// Marker is one control batch for one partition (WriteTxnMarkers' entry, one partition).
type Marker struct {
	Topic            string
	Partition        int32
	ProducerID       int64
	ProducerEpoch    int16
	Commit           bool
	CoordinatorEpoch int32
	TimestampMs      int64
}

// MarkerWriter gets markers written by a partition's leader. It returns one Kafka error code
// per marker, in order; a Go error means none is known to be written (all are retried).
type MarkerWriter interface {
	WriteMarkers(ctx context.Context, leader int32, markers []Marker) ([]int16, error)
}

// LeaderFunc is the current leader of a partition; ok is false when there is none now (the
// marker waits and is resent). PartitionGone with ok says the partition no longer exists
// (its topic was deleted): its marker is dropped, as Apache's marker channel drops a
// partition whose topic is gone, so a deleted topic never leaves a transaction deciding.
type LeaderFunc func(topic string, partition int32) (leader int32, ok bool)

// PartitionGone is the leader a LeaderFunc answers for a partition that no longer exists.
const PartitionGone int32 = -2

// Config is what a Coordinator needs. Zero durations and limits take the defaults above.
type Config struct {
	FS storage.FS
	// Root is <data>/<clusterID>/txn.
	Root string
	// Epoch is the coordinator epoch this coordinator claims ids at. A new epoch is a new
	// Coordinator (the old one is Closed).
	Epoch       int32
	Clock       clock.WithTicker // the real clock when nil; tests use k8s.io/utils/clock/testing
	ProducerIDs ProducerIDs
	Markers     MarkerWriter
	Leader      LeaderFunc
	Log         logr.Logger
	// Metrics, when not nil, counts decisions, markers and durations.
	Metrics *Metrics

	MaxTimeoutMs      int32
	ExpirationMs      int64
	OffsetsPartitions int32
	// AbortScanInterval and ExpiryScanInterval pace Run, on Clock.
	AbortScanInterval  time.Duration
	ExpiryScanInterval time.Duration
	// MarkerRetryBackoff and MarkerRequestTimeout pace marker sending in wall time (not Clock:
	// they are pacing, not semantics).
	MarkerRetryBackoff   time.Duration
	MarkerRequestTimeout time.Duration
}

func (c *Config) defaults() {
	if c.FS == nil {
		c.FS = storage.OSFS{}
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.MaxTimeoutMs <= 0 {
		c.MaxTimeoutMs = DefaultMaxTimeoutMs
	}
	if c.ExpirationMs <= 0 {
		c.ExpirationMs = DefaultExpirationMs
	}
	if c.OffsetsPartitions <= 0 {
		c.OffsetsPartitions = coordinator.DefaultPartitions
	}
	if c.AbortScanInterval <= 0 {
		c.AbortScanInterval = DefaultAbortScanInterval
	}
	if c.ExpiryScanInterval <= 0 {
		c.ExpiryScanInterval = DefaultExpiryScanInterval
	}
	if c.MarkerRetryBackoff <= 0 {
		c.MarkerRetryBackoff = DefaultMarkerRetryBackoff
	}
	if c.MarkerRequestTimeout <= 0 {
		c.MarkerRequestTimeout = DefaultMarkerRequestTimeout
	}
}

// Coordinator serves the transactional ids it claims at one coordinator epoch.
type Coordinator struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu  sync.Mutex
	ids map[string]*entry // guarded by mu
}

// entry is one claimed id. mu is held for a whole transition, its write included, so the
// transitions of one id are serial.
type entry struct {
	mu      sync.Mutex
	s       *store
	t       Txn  // the last durable, fenced-in state
	found   bool // t was ever written
	gone    bool // the claim failed or was lost: answer NOT_COORDINATOR
	failed  bool // a storage error: answer COORDINATOR_NOT_AVAILABLE until a new epoch
	sending bool // a marker driver runs for t
	// shown is what StateCounts reads without taking mu (a transition holds mu through its
	// fsync, and the heartbeat must never wait on the volume): t.State+1 while the id is
	// usable and not Dead, else 0. Set by publish, under mu.
	shown atomic.Int32
}

// publish updates shown from the entry's fields (locked e).
func (e *entry) publish() {
	if e.found && !e.gone && !e.failed && e.t.State != Dead {
		e.shown.Store(int32(e.t.State) + 1)
	} else {
		e.shown.Store(0)
	}
}

// New returns a Coordinator; it claims ids lazily, on their first request (or LoadOwned).
func New(cfg Config) *Coordinator {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{cfg: cfg, ctx: ctx, cancel: cancel, ids: map[string]*entry{}}
}

// Close stops marker sending and scans and waits for them. Safe twice.
func (c *Coordinator) Close() {
	c.cancel()
	c.wg.Wait()
}

func (c *Coordinator) now() int64 { return c.cfg.Clock.Now().UnixMilli() }

// get returns id's entry locked, claiming it first if this coordinator has not. With
// create=false an id with no directory is (nil, 0): unknown. Otherwise a non-zero code is
// the answer (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE).
func (c *Coordinator) get(id string, create bool) (*entry, int16) {
	c.mu.Lock()
	e, ok := c.ids[id]
	if !ok {
		if !create {
			c.mu.Unlock()
			has, err := exists(c.cfg.FS, c.cfg.Root, id)
			if err != nil {
				return nil, kerr.CoordinatorNotAvailable.Code
			}
			if !has {
				return nil, 0
			}
			c.mu.Lock()
			e, ok = c.ids[id]
		}
	}
	if !ok {
		e = &entry{}
		e.mu.Lock()
		c.ids[id] = e
		c.mu.Unlock()
		s, t, found, err := claimStore(c.cfg.FS, c.cfg.Root, id, c.cfg.Epoch)
		if err != nil {
			c.forget(id, e)
			e.gone = true
			e.mu.Unlock()
			return nil, c.codeOf(id, "claim", err)
		}
		e.s, e.t, e.found = s, t, found
		if !found {
			e.t = Txn{ID: id}
		}
		e.publish()
		if e.t.State.preparing() {
			// A decision an earlier coordinator made: finish it.
			c.startMarkers(id, e)
		}
		return e, 0
	}
	c.mu.Unlock()
	e.mu.Lock()
	switch {
	case e.gone:
		e.mu.Unlock()
		return nil, kerr.NotCoordinator.Code
	case e.failed:
		e.mu.Unlock()
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	return e, 0
}

func (c *Coordinator) forget(id string, e *entry) {
	c.mu.Lock()
	if c.ids[id] == e {
		delete(c.ids, id)
	}
	c.mu.Unlock()
}

// codeOf maps a claim/write/check failure to the answer, and marks what it means.
func (c *Coordinator) codeOf(id, op string, err error) int16 {
	if errors.Is(err, storage.ErrFenced) {
		c.cfg.Log.V(1).Info("Transactional id fenced by a newer coordinator", "transactionalID", id, "op", op, "epoch", c.cfg.Epoch, "err", err.Error())
		return kerr.NotCoordinator.Code
	}
	c.cfg.Log.Error(err, "Transactional id storage failed", "transactionalID", id, "op", op)
	return kerr.CoordinatorNotAvailable.Code
}

// persist makes next e's durable, fenced-in state (locked e). A failure leaves e unusable.
func (c *Coordinator) persist(id string, e *entry, next Txn) int16 {
	if err := e.s.write(next); err != nil {
		code := c.codeOf(id, "write", err)
		if code == kerr.NotCoordinator.Code {
			e.gone = true
			c.forget(id, e)
		} else {
			e.failed = true
		}
		e.publish()
		return code
	}
	e.t, e.found = next, true
	e.publish()
	return 0
}

// answer returns code once the fence still holds our epoch (locked e): a deposed coordinator
// answers nothing but NOT_COORDINATOR, even what needs no write.
func (c *Coordinator) answer(id string, e *entry, code int16) int16 {
	if err := e.s.check(); err != nil {
		c2 := c.codeOf(id, "check", err)
		if c2 == kerr.NotCoordinator.Code {
			e.gone = true
			c.forget(id, e)
			e.publish()
		}
		return c2
	}
	return code
}

// InitProducerID serves InitProducerId for a transactional id (the caller has checked the
// id is non-empty and authorized): the producer id and epoch, or an error code.
func (c *Coordinator) InitProducerID(id string, in InitInput) (pid int64, epoch int16, code int16) {
	e, code := c.get(id, true)
	if code != 0 {
		return NoProducerID, NoEpoch, code
	}
	defer e.mu.Unlock()
	if e.sending {
		return NoProducerID, NoEpoch, c.answer(id, e, kerr.ConcurrentTransactions.Code)
	}
	out := Init(e.t, e.found, in, Limits{MaxTimeoutMs: c.cfg.MaxTimeoutMs}, c.now())
	if out.Code != 0 {
		return NoProducerID, NoEpoch, c.answer(id, e, out.Code)
	}
	if out.NeedsPID {
		p, err := c.cfg.ProducerIDs.Next()
		if err != nil {
			c.cfg.Log.Error(err, "Allocate producer id", "transactionalID", id)
			return NoProducerID, NoEpoch, kerr.CoordinatorNotAvailable.Code
		}
		out.Next.ProducerID = p
	}
	out.Next.ID = id
	if code := c.persist(id, e, out.Next); code != 0 {
		return NoProducerID, NoEpoch, code
	}
	if out.Fence {
		c.cfg.Metrics.abort("fenced")
		c.startMarkers(id, e)
		return NoProducerID, NoEpoch, kerr.ConcurrentTransactions.Code
	}
	return out.Next.ProducerID, out.Next.ProducerEpoch, 0
}

// AddPartitions serves AddPartitionsToTxn v0–3 (and a v4 transaction without VerifyOnly):
// one code for every partition.
func (c *Coordinator) AddPartitions(id string, p Producer, tps []TopicPartition) int16 {
	if id == "" {
		return kerr.InvalidRequest.Code
	}
	e, code := c.get(id, false)
	if code != 0 {
		return code
	}
	if e == nil {
		return Add(Txn{}, false, p, tps, 0).Code
	}
	defer e.mu.Unlock()
	if e.sending {
		return c.answer(id, e, kerr.ConcurrentTransactions.Code)
	}
	out := Add(e.t, e.found, p, tps, c.now())
	if !out.Write {
		return c.answer(id, e, out.Code)
	}
	return c.persist(id, e, out.Next)
}

// OffsetsPartition is the __consumer_offsets partition of group (internal/coordinator's rule).
func (c *Coordinator) OffsetsPartition(group string) TopicPartition {
	return TopicPartition{Topic: OffsetsTopic, Partition: coordinator.Partition(group, c.cfg.OffsetsPartitions)}
}

// AddOffsets serves AddOffsetsToTxn: the group's offsets partition joins the transaction.
func (c *Coordinator) AddOffsets(id string, p Producer, group string) int16 {
	return c.AddPartitions(id, p, []TopicPartition{c.OffsetsPartition(group)})
}

// VerifyPartitions serves AddPartitionsToTxn v4 VerifyOnly: a code for all, or one per
// partition (NONE or INVALID_TXN_STATE).
func (c *Coordinator) VerifyPartitions(id string, p Producer, tps []TopicPartition) (int16, []int16) {
	e, code := c.get(id, false)
	if code != 0 {
		return code, nil
	}
	if e == nil {
		return Verify(Txn{}, false, p, tps)
	}
	defer e.mu.Unlock()
	code, per := Verify(e.t, e.found, p, tps)
	if code = c.answer(id, e, code); code != 0 {
		return code, nil
	}
	return 0, per
}

// EndTxn serves EndTxn: NONE once the decision (Prepare*) is durable and fenced-in; the
// markers are sent after, and the id completes when all are written.
func (c *Coordinator) EndTxn(id string, p Producer, commit bool) int16 {
	e, code := c.get(id, false)
	if code != 0 {
		return code
	}
	if e == nil {
		return End(Txn{}, false, p, commit, 0).Code
	}
	defer e.mu.Unlock()
	out := End(e.t, e.found, p, commit, c.now())
	if !out.Write {
		return c.answer(id, e, out.Code)
	}
	if code := c.persist(id, e, out.Next); code != 0 {
		return code
	}
	if !commit {
		c.cfg.Metrics.abort("client")
	}
	c.startMarkers(id, e)
	return 0
}

// Describe serves one id of DescribeTransactions.
func (c *Coordinator) Describe(id string) (Txn, int16) {
	if id == "" {
		return Txn{}, kerr.InvalidRequest.Code
	}
	e, code := c.get(id, false)
	if code != 0 {
		return Txn{}, code
	}
	if e == nil {
		return Txn{}, kerr.TransactionalIDNotFound.Code
	}
	defer e.mu.Unlock()
	if !e.found || e.t.State == Dead {
		return Txn{}, c.answer(id, e, kerr.TransactionalIDNotFound.Code)
	}
	t := e.t.clone()
	return t, c.answer(id, e, 0)
}

// List serves ListTransactions over the ids this coordinator has claimed: those matching
// every non-empty filter, sorted by id; unknown state names are returned, not matched.
// It reads memory only (no fence check): a list is a hint, not an acknowledgement.
func (c *Coordinator) List(stateFilters []string, pidFilters []int64) (txns []Txn, unknownStates []string) {
	states := map[State]bool{}
	for _, s := range stateFilters {
		if st, ok := ParseState(s); ok {
			states[st] = true
		} else {
			unknownStates = append(unknownStates, s)
		}
	}
	pids := map[int64]bool{}
	for _, p := range pidFilters {
		pids[p] = true
	}
	for _, e := range c.entries() {
		e.mu.Lock()
		t, ok := e.t.clone(), e.found && !e.gone && !e.failed && e.t.State != Dead
		e.mu.Unlock()
		if !ok || len(stateFilters) > 0 && !states[t.State] || len(pidFilters) > 0 && !pids[t.ProducerID] {
			continue
		}
		txns = append(txns, t)
	}
	sort.Slice(txns, func(i, j int) bool { return txns[i].ID < txns[j].ID })
	return txns, unknownStates
}

// StateCounts counts the ids this coordinator holds by state (Dead and unusable ones left
// out): the per-state gauge and the broker's heartbeat read it.
func (c *Coordinator) StateCounts() map[State]int {
	counts := map[State]int{}
	for _, e := range c.entries() {
		// Without e.mu: a transition holds it through its fsync (a hung volume would hold
		// the heartbeat that reads this); shown is the last published state.
		if v := e.shown.Load(); v > 0 {
			counts[State(v-1)]++
		}
	}
	return counts
}

func (c *Coordinator) entries() map[string]*entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]*entry, len(c.ids))
	for id, e := range c.ids {
		out[id] = e
	}
	return out
}

// AbortTimedOut aborts every claimed Ongoing transaction past its timeout: epoch+1,
// PrepareAbort durable, then markers. It returns how many it began aborting.
func (c *Coordinator) AbortTimedOut() int {
	n := 0
	for id, e := range c.entries() {
		e.mu.Lock()
		if !e.gone && !e.failed && !e.sending && TimedOut(e.t, c.now()) {
			if c.persist(id, e, AbortTimedOut(e.t, c.now())) == 0 {
				c.cfg.Metrics.abort("timeout")
				c.startMarkers(id, e)
				n++
			}
		}
		e.mu.Unlock()
	}
	return n
}

// ExpireIDs makes Dead (durably) every claimed id idle past transactional.id.expiration.ms
// and forgets it. It returns how many it expired.
func (c *Coordinator) ExpireIDs() int {
	n := 0
	for id, e := range c.entries() {
		e.mu.Lock()
		if !e.gone && !e.failed && !e.sending && e.found && Expired(e.t, c.now(), c.cfg.ExpirationMs) {
			dead := e.t.clone()
			dead.State, dead.UpdateMs, dead.Partitions = Dead, c.now(), nil
			if c.persist(id, e, dead) == 0 {
				n++
			}
		}
		e.mu.Unlock()
	}
	return n
}

// Run scans for timed-out transactions and expired ids on Clock until ctx ends or Close.
func (c *Coordinator) Run(ctx context.Context) {
	abort := c.cfg.Clock.NewTicker(c.cfg.AbortScanInterval)
	defer abort.Stop()
	expiry := c.cfg.Clock.NewTicker(c.cfg.ExpiryScanInterval)
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.ctx.Done():
			return
		case <-abort.C():
			c.AbortTimedOut()
		case <-expiry.C():
			c.ExpireIDs()
		}
	}
}

// startMarkers starts the driver of e's Prepare* decision (locked e), once.
func (c *Coordinator) startMarkers(id string, e *entry) {
	if e.sending {
		return
	}
	e.sending = true
	t := e.t.clone()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.drive(id, e, t)
	}()
}

// Marker outcomes (Apache TransactionMarkerRequestCompletionHandler).
func markerOutcome(code int16) (done, retry bool) {
	switch code {
	case 0, kerr.UnsupportedForMessageFormat.Code, kerr.UnsupportedVersion.Code:
		// Written, or a partition that cannot hold a marker: dropped from the set.
		// (Apache: UNSUPPORTED_FOR_MESSAGE_FORMAT 43, UNSUPPORTED_VERSION 35.)
		return true, false
	case kerr.UnknownTopicOrPartition.Code, kerr.NotLeaderForPartition.Code,
		kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code,
		kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code:
		return false, true
	}
	// 47, 52: the producer or coordinator epoch moved on; 2, 10, 18, 21 and anything else:
	// fatal in Apache. Stop sending; the decision stays durable for the next coordinator.
	return false, false
}

// drive gets every marker of the decision t written, then persists Complete*. It stops on
// a fatal outcome, a lost fence or Close, leaving the durable Prepare* to be finished by a
// coordinator that loads it.
func (c *Coordinator) drive(id string, e *entry, t Txn) {
	pending := append([]TopicPartition(nil), t.Partitions...)
	stop := func() {
		e.mu.Lock()
		e.sending = false
		e.mu.Unlock()
	}
	for len(pending) > 0 {
		if c.ctx.Err() != nil {
			stop()
			return
		}
		byLeader := map[int32][]TopicPartition{}
		var next []TopicPartition
		for _, tp := range pending {
			l, ok := c.cfg.Leader(tp.Topic, tp.Partition)
			switch {
			case ok && l == PartitionGone:
				c.cfg.Log.Info("Transaction marker dropped: the partition no longer exists", "transactionalID", id,
					"topic", tp.Topic, "partition", tp.Partition)
				c.cfg.Metrics.marker("dropped", 1)
			case ok:
				byLeader[l] = append(byLeader[l], tp)
			default:
				next = append(next, tp)
			}
		}
		var mu sync.Mutex
		fatal := false
		var wg sync.WaitGroup
		for leader, tps := range byLeader {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ms := make([]Marker, len(tps))
				for i, tp := range tps {
					ms[i] = Marker{Topic: tp.Topic, Partition: tp.Partition, ProducerID: t.ProducerID,
						ProducerEpoch: t.ProducerEpoch, Commit: t.State == PrepareCommit,
						CoordinatorEpoch: c.cfg.Epoch, TimestampMs: c.now()}
				}
				ctx, cancel := context.WithTimeout(c.ctx, c.cfg.MarkerRequestTimeout)
				codes, err := c.cfg.Markers.WriteMarkers(ctx, leader, ms)
				cancel()
				mu.Lock()
				defer mu.Unlock()
				if err != nil || len(codes) != len(ms) {
					c.cfg.Metrics.marker("retried", len(tps))
					next = append(next, tps...)
					return
				}
				for i, code := range codes {
					done, retry := markerOutcome(code)
					switch {
					case done && code == 0:
						c.cfg.Metrics.marker("written", 1)
					case done:
						c.cfg.Metrics.marker("dropped", 1)
					case retry:
						c.cfg.Metrics.marker("retried", 1)
						next = append(next, tps[i])
					default:
						c.cfg.Metrics.marker("refused", 1)
						c.cfg.Log.Info("Transaction marker refused; not sending more", "transactionalID", id,
							"topic", tps[i].Topic, "partition", tps[i].Partition, "code", code)
						fatal = true
					}
				}
			}()
		}
		wg.Wait()
		if fatal {
			stop()
			return
		}
		pending = next
		if len(pending) > 0 {
			timer := time.NewTimer(c.cfg.MarkerRetryBackoff)
			select {
			case <-timer.C:
			case <-c.ctx.Done():
				timer.Stop()
			}
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sending = false
	if e.gone || e.failed {
		return
	}
	decided := e.t
	if c.persist(id, e, Complete(e.t, c.now())) == 0 {
		c.cfg.Metrics.completed(decided, c.now())
	}
}

// LoadOwned claims every id on the volume that owns says is this coordinator's (the
// coordinator rule at this epoch), so decisions an earlier coordinator left in Prepare* are
// finished and ListTransactions sees them without waiting for a request. It returns how
// many it claimed; an id it cannot claim is skipped (a newer coordinator holds it).
func (c *Coordinator) LoadOwned(owns func(id string) bool) (int, error) {
	ids, err := listIDs(c.cfg.FS, c.cfg.Root)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		if !owns(id) {
			continue
		}
		e, code := c.get(id, false)
		if code != 0 || e == nil {
			continue
		}
		e.mu.Unlock()
		n++
	}
	return n, nil
}
