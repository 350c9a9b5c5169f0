package groups

import (
	"cmp"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"k8s.io/utils/clock"

	"github.com/paddock-dev/paddock/broker/storage"
)

// State is a classic group's state (Apache's GroupState names, which clients print).
type State int8

const (
	StateEmpty State = iota
	StatePreparingRebalance
	StateCompletingRebalance
	StateStable
	StateDead
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

func (s State) String() string { return stateNames[s] }

// validPrevious is Apache's GroupState.validPreviousStates: a transition from any other
// state is a bug.
var validPrevious = [...][]State{
	StateEmpty:               {StatePreparingRebalance},
	StatePreparingRebalance:  {StateStable, StateCompletingRebalance, StateEmpty},
	StateCompletingRebalance: {StatePreparingRebalance},
	StateStable:              {StateCompletingRebalance},
	StateDead:                {StateStable, StatePreparingRebalance, StateCompletingRebalance, StateEmpty, StateDead},
}

// Overview is what ListGroups shows of a group.
type Overview struct {
	Group        string
	ProtocolType string
	// Type is the group's protocol: "classic" or "consumer" (ListGroups v5's GroupType).
	Type string
	// State is the state's name: a classic group's (Empty, PreparingRebalance,
	// CompletingRebalance, Stable) or a consumer group's (Empty, Assigning, Reconciling,
	// Stable); Dead for a group that does not exist.
	State string
}

// The group types (ListGroups v5, ConsumerGroupDescribe v1's member types).
const (
	TypeClassic  = "classic"
	TypeConsumer = "consumer"
)

// call is one request handed to a group's goroutine. run executes in the goroutine and
// answers (now, or later for a JoinGroup or SyncGroup that waits); refuse answers without
// touching the group, when it is unloading.
type call struct {
	run    func(g *group)
	refuse func(code int16)
	// state: 0 new, 1 taken by the group, 2 withdrawn by the caller (which answered the client
	// itself, e.g. COORDINATOR_LOAD_IN_PROGRESS, so the group must not act on it).
	state atomic.Int32
}

func (cl *call) take() bool     { return cl.state.CompareAndSwap(0, 1) }
func (cl *call) withdraw() bool { return cl.state.CompareAndSwap(0, 2) }

// errUnloaded: the group left this coordinator (view change or Close).
var errUnloaded = errors.New("group unloaded")

// group is one consumer group: all of its state is owned by the goroutine running run, and
// requests reach it only through calls (kfake's groups.go model; docs/groups.md "One owner
// per group"). The fields above the line are set before the goroutine starts or are
// synchronization; everything below is touched only by run.
type group struct {
	c  *Coordinator
	id string

	calls    chan *call    // unbuffered: a send succeeds only when run takes it
	first    *call         // the call that started the goroutine, handled once loaded
	stop     chan struct{} // closed (stopOnce) to unload
	stopOnce sync.Once
	viewed   chan struct{} // buffered 1: the view's epoch moved, re-check the fence
	loaded   chan struct{} // closed when loading finished; loadErr is set before
	loadErr  error
	done     chan struct{} // closed when run has returned and answered every waiter
	overview atomic.Pointer[Overview]

	// ---- owned by run ----
	st    *store    // nil while the group has no files on the volume
	fatal error     // set by a handler: run unloads the group after the current event
	at    time.Time // the deadline being processed (virtual now), zero otherwise
	timer clock.Timer
	armed time.Time // the deadline timer is armed for

	state      State
	generation int32
	// protocolType is the group's protocol type: set by its first member, kept while Empty
	// (and durable once a member commits), "" for groups that only commit offsets.
	protocolType string
	protocol     string // the selected protocol of this generation; "" when none
	leader       string
	members      map[string]*member
	order        []string          // member ids in the order they were added
	static       map[string]string // group.instance.id → member id
	pending      map[string]time.Time
	numAwaiting  int            // members with a JoinGroup waiting
	supported    map[string]int // protocol name → members supporting it
	pendingSync  map[string]struct{}

	joinDeadline   time.Time // PreparingRebalance: when the join phase ends
	joinInitial    bool      // the deadline is Apache's InitialDelayedJoin (never completes early)
	joinDelay      time.Duration
	joinRemaining  time.Duration
	newMemberAdded bool
	syncDeadline   time.Time // pending syncs expire (DelayedSync)
	syncGeneration int32

	// cg is the consumer-protocol state while the group is a consumer group (consumer.go); nil
	// while it is classic. A consumer group's classic state stays Empty.
	cg *consumerState
	// pubConsumer is the consumer state the metrics count the group in ("" none).
	pubConsumer string

	subscribed      map[string]struct{} // topics the consumer members subscribe to
	subscribedKnown bool                // false: not a consumer group, or a member's metadata did not parse

	offsets map[tp]committed
	// txn is the pending transactional offsets by producer id, txnSeq the next TxnOffsetCommit
	// frame's order (txn_record.go); durable like offsets.
	txn     map[int64]*pendingTxn
	txnSeq  uint64
	created bool // created by a JoinGroup or OffsetCommit and not yet forgotten
	// gone: the group was deleted, or a retention check found it Empty without offsets: its
	// files are removed as it exits. A group loaded from files that hold no offsets does not
	// exist either, but keeps its files (and its claim on the fence) until a retention check,
	// so a coordinator with a stale view that still has members cannot claim it back at once.
	gone bool
	// emptySince is when the group last became Empty (meaningful while it is): an Empty
	// group's offsets expire a retention after it. Kept durable at every transition to and
	// from Empty.
	emptySince       time.Time
	storedEmptySince int64     // what the file says of it (durable.emptySinceMs)
	retentionAt      time.Time // the next retention check (offsets.retention.check.interval.ms)
	published        Overview
	hasPub           bool
}

func newGroup(c *Coordinator, id string) *group {
	return &group{
		c:         c,
		id:        id,
		calls:     make(chan *call),
		stop:      make(chan struct{}),
		viewed:    make(chan struct{}, 1),
		loaded:    make(chan struct{}),
		done:      make(chan struct{}),
		members:   map[string]*member{},
		static:    map[string]string{},
		pending:   map[string]time.Time{},
		supported: map[string]int{},
		offsets:   map[tp]committed{},
		txn:       map[int64]*pendingTxn{},
	}
}

func (g *group) unload() { g.stopOnce.Do(func() { close(g.stop) }) }

// run is the group's goroutine.
func (g *group) run() {
	defer g.exit()
	g.c.m.groupState(-1, g.state)
	g.loadErr = g.load()
	close(g.loaded)
	if g.loadErr != nil {
		return
	}
	for {
		if cl := g.first; cl != nil {
			// Handled before the group may exit: a group that does not exist still answers
			// the request that started it.
			g.first = nil
			g.handle(cl)
		}
		// Deadlines a request set at "now" (an initial delay of 0) fire before we wait.
		g.expire()
		g.maybeCompact()
		g.publish()
		if g.fatal != nil {
			return
		}
		if !g.exists() && (g.st == nil || g.gone) {
			g.removeFiles()
			return
		}
		g.arm()
		var timerC <-chan time.Time
		if g.timer != nil {
			timerC = g.timer.C()
		}
		select {
		case cl := <-g.calls:
			g.handle(cl)
		case <-timerC:
			g.timer, g.armed = nil, time.Time{}
		case <-g.viewed:
			g.recheckFence()
		case <-g.stop:
			g.fatal = errUnloaded
		}
	}
}

// handle runs one call, unless its caller withdrew it; a group told to unload refuses it.
func (g *group) handle(cl *call) {
	if !cl.take() {
		return
	}
	select {
	case <-g.stop:
		cl.refuse(kerr.NotCoordinator.Code)
		g.fatal = errUnloaded
		return
	default:
	}
	if g.fatal != nil {
		cl.refuse(errorCode(g.fatal))
		return
	}
	g.expire()
	cl.run(g)
	g.c.handled.Add(1)
}

// load takes the group over if it has files: claim (or reuse this process's claim), read the
// inherited state, write our snapshot. A group without files stays file-less until a request
// creates it (ensureStore).
func (g *group) load() error {
	select {
	case g.c.loadSem <- struct{}{}:
		defer func() { <-g.c.loadSem }()
	case <-g.stop:
		return errUnloaded
	}
	st, err := openStore(g.c.fs, g.c.cfg.Dir, g.id, false)
	if errors.Is(err, errNoGroup) {
		return nil
	}
	if err != nil {
		g.c.storageFailed(err)
		return err
	}
	return g.takeover(st)
}

// ensureStore gives a group being created (JoinGroup without member id, OffsetCommit with
// generation -1) its files. On failure it returns the error code to answer; the group is then
// unloaded.
func (g *group) ensureStore() int16 {
	if g.st != nil {
		return 0
	}
	st, err := openStore(g.c.fs, g.c.cfg.Dir, g.id, true)
	if err == nil {
		err = g.takeover(st)
	} else {
		g.c.storageFailed(err)
	}
	if err != nil {
		g.fatal = err
		return errorCode(err)
	}
	return 0
}

// takeover serves the group at the coordinator epoch: reuse this process's claim when the
// fence still holds it (nobody took the group since, so our own file is current), else claim
// the view's epoch; then load (docs/groups.md "Takeover, commit, deposition": claim, load,
// serve).
func (g *group) takeover(st *store) error {
	c := g.c
	start := c.clock.Now()
	st.compactMin = cmp.Or(c.cfg.compactMin, defaultCompactMin)
	cl, own := c.claimFor(g.id)
	if own {
		d, err := st.load(cl.epoch, cl.acked, start.UnixMilli())
		if err == nil {
			return g.adopt(st, d, start, "resumed")
		}
		if !errors.Is(err, storage.ErrFenced) {
			c.storageFailed(err)
			c.m.takeover("error")
			return err
		}
		c.dropClaim(g.id, cl.epoch)
		if cl, own = c.claimFor(g.id); own {
			return err
		}
	}
	epoch := cl.epoch
	if err := st.claim(epoch); err != nil {
		if errors.Is(err, storage.ErrFenced) {
			c.noteFenced(g.id, epoch)
			c.m.takeover("fenced")
			c.log.V(1).Info("Group fence holds a newer epoch", "group", g.id, "epoch", epoch, "err", err.Error())
		} else {
			c.storageFailed(err)
			c.m.takeover("error")
		}
		return err
	}
	c.recordClaim(g.id, epoch)
	d, err := st.load(epoch, -1, start.UnixMilli())
	if err != nil {
		c.log.V(1).Info("Group load failed", "group", g.id, "epoch", epoch, "err", err.Error())
		if errors.Is(err, storage.ErrFenced) {
			c.dropClaim(g.id, epoch)
			c.noteFenced(g.id, epoch)
			c.m.takeover("fenced")
		} else {
			c.storageFailed(err)
			c.m.takeover("error")
		}
		return err
	}
	return g.adopt(st, d, start, "claimed")
}

// adopt makes the loaded durable state the group's and records how the takeover went.
func (g *group) adopt(st *store, d *durable, start time.Time, how string) error {
	g.st = st
	g.offsets = d.offsets
	g.txn, g.txnSeq = d.txn, d.txnSeq
	if g.txn == nil {
		g.txn = map[int64]*pendingTxn{}
	}
	g.protocolType = d.protocolType
	if d.consumer {
		g.becomeConsumer()
	}
	g.created = len(g.offsets) > 0 || len(g.txn) > 0
	// A group loads Empty (membership does not move). A file that says it had members at
	// its last record (a claim this process resumes) counts as Empty from now.
	g.emptySince = start
	if d.emptySinceMs > 0 {
		g.emptySince = time.UnixMilli(d.emptySinceMs)
	}
	g.storedEmptySince = d.emptySinceMs
	g.retentionAt = start.Add(g.c.cfg.CleanupInterval)
	g.publishAll()
	g.c.m.takeover(how)
	g.c.log.V(1).Info("Group loaded", "group", g.id, "epoch", st.epoch, "how", how, "offsets", len(g.offsets),
		"took", g.c.clock.Since(start).String())
	return nil
}

// recheckFence runs when the view's epoch moved while we kept the group: if another
// coordinator claimed it in between (our view skipped the epochs where it was theirs), our
// state is stale and the group is unloaded; the next request takes it over afresh.
func (g *group) recheckFence() { g.fenceCheck() }

// fenceCheck answers NOT_COORDINATOR (and unloads the group) once another coordinator has
// claimed the group: JoinGroup and SyncGroup check, so a deposed coordinator stops running
// rebalances as soon as a member asks, not only at its next commit.
func (g *group) fenceCheck() int16 {
	if g.st == nil {
		return 0
	}
	if err := g.st.check(); err != nil {
		g.fail(err)
		return errorCode(err)
	}
	return 0
}

// fail unloads the group after the current event because its storage failed or its fence
// moved past it.
func (g *group) fail(err error) {
	if g.fatal == nil {
		g.fatal = err
	}
	if errors.Is(err, storage.ErrFenced) {
		g.c.log.Info("Group coordinator deposed: the fence moved past its epoch", "group", g.id, "err", err.Error())
	} else {
		g.c.storageFailed(err)
		g.c.log.Error(err, "Group storage failed; unloading it", "group", g.id)
	}
}

// exit runs when run returns: every waiting JoinGroup and SyncGroup is answered (Apache's
// onGroupUnloaded answers NOT_COORDINATOR), files are closed, the coordinator forgets us.
func (g *group) exit() {
	code := kerr.NotCoordinator.Code
	if g.loadErr != nil || g.fatal != nil {
		if err := firstErr(g.loadErr, g.fatal); err != nil && !errors.Is(err, errUnloaded) {
			code = errorCode(err)
		}
	}
	for _, id := range g.order {
		m := g.members[id]
		if m.joinW != nil {
			m.joinW.send(joinError(m.id, code))
			m.joinW = nil
		}
		if m.syncW != nil {
			m.syncW.send(syncResult{code: code})
			m.syncW = nil
		}
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	if g.st != nil {
		g.st.close()
	}
	if g.cg != nil {
		g.c.m.consumerGroupState(g.pubConsumer, "")
		g.c.m.membersDelta(-len(g.cg.members))
	} else {
		g.c.m.groupState(g.state, -1)
	}
	g.c.m.membersDelta(-len(g.members))
	g.c.groupExited(g, errors.Is(g.fatal, storage.ErrFenced), g.st)
	close(g.done)
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// exists: Apache keeps a group until it is deleted, or is Empty without offsets at its
// periodic cleanup. A group that does not exist answers as one that never did, and its
// goroutine exits.
func (g *group) exists() bool {
	return g.created || len(g.members) > 0 || len(g.pending) > 0 || len(g.offsets) > 0 || len(g.txn) > 0 ||
		g.cg != nil && len(g.cg.members) > 0
}

// isEmpty: the group has no members of either protocol (a classic group in state Empty, or a
// consumer group without members).
func (g *group) isEmpty() bool {
	return g.state == StateEmpty && (g.cg == nil || len(g.cg.members) == 0)
}

func (g *group) now() time.Time {
	if !g.at.IsZero() {
		return g.at
	}
	return g.c.clock.Now()
}

func (g *group) transition(to State) {
	ok := false
	for _, s := range validPrevious[to] {
		if s == g.state {
			ok = true
		}
	}
	if !ok {
		// A bug in this package, never a client's doing; Apache throws.
		panic("groups: invalid transition " + g.state.String() + " → " + to.String())
	}
	g.c.m.groupState(g.state, to)
	g.c.log.V(1).Info("Group state", "group", g.id, "from", g.state.String(), "to", to.String(), "generation", g.generation)
	from := g.state
	g.state = to
	switch {
	case to == StateEmpty && from != StateEmpty:
		g.emptySince = g.now()
		g.recordEmptySince(g.emptySince.UnixMilli())
	case from == StateEmpty && to == StatePreparingRebalance:
		g.recordEmptySince(0)
	}
}

// publish stores the overview ListGroups reads without a round trip.
func (g *group) publish() {
	ov := Overview{Group: g.id, ProtocolType: g.protocolType, Type: TypeClassic, State: g.state.String()}
	if g.cg != nil {
		ov.Type, ov.State = TypeConsumer, g.cg.stateName()
		if st := ov.State; st != g.pubConsumer {
			g.c.m.consumerGroupState(g.pubConsumer, st)
			g.pubConsumer = st
		}
	}
	if !g.exists() {
		ov.State = StateDead.String()
	}
	if !g.hasPub || ov != g.published {
		g.published, g.hasPub = ov, true
		g.overview.Store(&ov)
	}
}

// ---- deadlines ----
//
// A group has one timer, armed for its earliest deadline. expire processes every deadline
// that has passed, in time order, each at its own instant (so a chain of delays reacts as it
// would have on time, however late the goroutine wakes); every request runs expire first, so
// a request never sees state a passed deadline should have changed.

// nextDeadline is the earliest pending deadline and what to do then; fire is nil if none.
func (g *group) nextDeadline() (at time.Time, fire func()) {
	consider := func(t time.Time, f func()) {
		if !t.IsZero() && (fire == nil || t.Before(at)) {
			at, fire = t, f
		}
	}
	for _, id := range g.order {
		m := g.members[id]
		consider(m.deadline, func() { g.onMemberDeadline(m) })
	}
	for id, t := range g.pending {
		consider(t, func() { g.onPendingDeadline(id) })
	}
	if g.state == StatePreparingRebalance {
		consider(g.joinDeadline, g.onJoinDeadline)
	}
	consider(g.syncDeadline, g.onSyncDeadline)
	g.consumerDeadlines(consider)
	if g.st != nil {
		consider(g.retentionAt, g.onRetentionCheck)
	}
	return at, fire
}

func (g *group) expire() {
	now := g.c.clock.Now()
	for range 1 << 16 { // a bound against a bug looping; every fire clears or moves its deadline
		at, fire := g.nextDeadline()
		if fire == nil || at.After(now) {
			return
		}
		g.at = at
		fire()
		g.at = time.Time{}
		if g.fatal != nil {
			return
		}
	}
}

func (g *group) arm() {
	at, fire := g.nextDeadline()
	if fire == nil {
		if g.timer != nil {
			g.timer.Stop()
			g.timer, g.armed = nil, time.Time{}
		}
		return
	}
	if g.timer != nil && at.Equal(g.armed) {
		return
	}
	if g.timer != nil {
		g.timer.Stop()
	}
	g.timer = g.c.clock.NewTimer(max(at.Sub(g.c.clock.Now()), 0))
	g.armed = at
}

// waiter carries one answer back to a caller. The channel has room for it, so the group's
// goroutine never blocks on a caller that has gone away; a second answer is a bug and is
// dropped.
type waiter[T any] struct{ ch chan T }

func newWaiter[T any]() *waiter[T] { return &waiter[T]{ch: make(chan T, 1)} }

func (w *waiter[T]) send(v T) {
	select {
	case w.ch <- v:
	default:
	}
}
