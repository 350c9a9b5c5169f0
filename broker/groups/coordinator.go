package groups

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"k8s.io/utils/clock"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/notify"
)

// Coordinator is this broker's group coordinator: the groups it coordinates, each owned by
// its own goroutine, and their committed offsets on the shared volume. It is safe for
// concurrent use. Create it with New, tell it which groups are its own with SetView, hand it
// requests, Close it on shutdown.
type Coordinator struct {
	cfg     Config
	fs      storage.FS
	clock   clock.Clock
	log     logr.Logger
	m       *Metrics
	loadSem chan struct{} // bounds concurrent loads
	kick    chan struct{} // buffered 1: the view changed, scan the volume for our groups
	quit    chan struct{} // closed by Close
	wg      sync.WaitGroup
	scans   atomic.Int32 // scans in progress, for ListGroups' COORDINATOR_LOAD_IN_PROGRESS
	handled atomic.Int64 // calls the group goroutines have run (tests wait on it)

	mu     sync.Mutex
	closed bool              // guarded by mu
	epoch  int32             // the view's coordinator epoch; -1 before the first; guarded by mu
	owns   func(string) bool // the view's rule; nil before the first; guarded by mu
	groups map[string]*group // running group goroutines (loading, serving or stopping); guarded by mu
	// claimed is the epoch this process claimed each group's fence at, while that claim may
	// still be the fence's value (so a group reloaded after an unload reuses it instead of
	// claiming again, which the fence would refuse), with how much of that epoch's file it
	// acknowledged. Guarded by mu.
	claimed map[string]claim
	// fenced remembers groups whose fence held our view's epoch or more, so requests answer
	// NOT_COORDINATOR without touching the disk until the view's epoch moves. Guarded by mu.
	fenced  map[string]int32
	running int // group goroutines not yet exited; guarded by mu
	// txnParts is the transaction index of each __consumer_offsets partition this process
	// has served a transactional call of (txn_index.go). The map is guarded by mu; each
	// partition's state by its own lock.
	txnParts map[int32]*txnPartition
	// ownedChanged wakes OwnedChanged's waiters whenever running changes (owned.go).
	ownedChanged notify.Notifier
}

// New returns a Coordinator that coordinates nothing until the first SetView.
func New(cfg Config) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Coordinator{
		cfg:     cfg,
		fs:      cfg.FS,
		clock:   cfg.Clock,
		log:     cfg.Log,
		m:       cfg.Metrics,
		loadSem: make(chan struct{}, cfg.LoadConcurrency),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		epoch:   -1,
		groups:  map[string]*group{},
		claimed: map[string]claim{},
		fenced:  map[string]int32{},
	}
	if c.fs == nil {
		c.fs = storage.OSFS{}
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if err := c.fs.MkdirAll(cfg.Dir); err != nil {
		return nil, fmt.Errorf("groups: create %s: %w", cfg.Dir, err)
	}
	c.wg.Add(1)
	go c.scanLoop()
	return c, nil
}

// SetView tells the coordinator which groups this broker coordinates: those for which owns
// returns true, as of coordinatorEpoch epoch (docs/groups.md "API and how the broker calls
// it"). Call it with every new cluster view; it returns at once. A lower epoch than the last
// one is ignored. owns is called with the coordinator's lock held and must not call back into
// it.
//
// Groups no longer owned are unloaded: their waiting JoinGroup and SyncGroup requests are
// answered NOT_COORDINATOR and their membership is dropped (Owned counts them until their
// goroutines finish). Groups kept across an epoch change re-check their fence, so one another
// coordinator took meanwhile is dropped too. Groups newly owned with offsets on the volume are
// taken over in the background; any other group is taken over by its first request.
func (c *Coordinator) SetView(epoch int32, owns func(groupID string) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || epoch < c.epoch || owns == nil {
		return
	}
	moved := epoch > c.epoch
	c.epoch, c.owns = epoch, owns
	if moved {
		clear(c.fenced)
		// A claim at an older epoch is only needed by a group still running here; any other
		// group is claimed afresh at the new epoch when it is next taken over.
		for id := range c.claimed {
			if c.groups[id] == nil {
				delete(c.claimed, id)
			}
		}
	}
	for id, g := range c.groups {
		switch {
		case !owns(id):
			g.unload()
		case moved:
			select {
			case g.viewed <- struct{}{}:
			default:
			}
		}
	}
	c.m.setEpoch(epoch)
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Owned is how many groups this coordinator still holds — loading, serving, or unloading
// after a view change (an in-flight commit finishing). The SIGTERM drain waits until the view
// gives this broker no group and Owned is 0.
func (c *Coordinator) Owned() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running
}

// Close unloads every group (waiting requests are answered NOT_COORDINATOR), waits for their
// goroutines and stops. Later requests are answered COORDINATOR_NOT_AVAILABLE. Close is safe
// to call more than once.
func (c *Coordinator) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		c.wg.Wait()
		return nil
	}
	c.closed = true
	for _, g := range c.groups {
		g.unload()
	}
	close(c.quit)
	c.mu.Unlock()
	c.wg.Wait()
	return nil
}

// PurgeTopic removes, from every group this coordinator holds, the committed offsets of a
// deleted topic's incarnation id (a zero id: every offset of that name). It returns when
// every group has made the removal durable, or with the groups' errors (such a group is
// unloaded; offsets left on the volume stay hidden once a topic of that name with another id
// exists). Call it when the view shows a topic deleted.
func (c *Coordinator) PurgeTopic(ctx context.Context, topic string, id [16]byte) error {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	var errs []error
	for _, g := range gs {
		w := newWaiter[error]()
		cl := &call{
			run:    func(g *group) { w.send(g.purgeTopic(topic, id)) },
			refuse: func(int16) { w.send(nil) }, // unloading: whoever takes it over next purges
		}
		select {
		case <-g.loaded:
		case <-g.done:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		if g.loadErr != nil {
			continue
		}
		select {
		case g.calls <- cl:
		case <-g.done:
			continue
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-w.ch:
			if err != nil {
				errs = append(errs, fmt.Errorf("purge %s from group %q: %w", topic, g.id, err))
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return errors.Join(errs...)
}

// ---- routing requests to group goroutines ----

// status answers the checks every group API starts with (Apache's validateGroupStatus, after
// the group id check), or 0.
func (c *Coordinator) statusLocked(id string) int16 {
	switch {
	case c.closed, c.owns == nil:
		return kerr.CoordinatorNotAvailable.Code
	case !c.owns(id):
		return kerr.NotCoordinator.Code
	}
	if e, ok := c.fenced[id]; ok && e >= c.epoch {
		return kerr.NotCoordinator.Code
	}
	return 0
}

// do hands run to group id's goroutine and waits for its answer, starting the goroutine (and
// so the group's takeover) if needed. When the group is not served here (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE) or is still loading after LoadWait
// (COORDINATOR_LOAD_IN_PROGRESS), or unloads before it answers, the answer is refuse(code).
// It returns ctx's error when ctx ends first — a JoinGroup or SyncGroup that waits for a
// rebalance then stays in the group, as in Kafka when a client goes away.
func do[T any](ctx context.Context, c *Coordinator, id string, run func(g *group, w *waiter[T]), refuse func(code int16) T) (T, error) {
	v, code, err := do1(ctx, c, id, run, refuse)
	if err == nil && code != 0 {
		v = refuse(code)
	}
	return v, err
}

func do1[T any](ctx context.Context, c *Coordinator, id string, run func(g *group, w *waiter[T]), refuse func(code int16) T) (T, int16, error) {
	var zero T
	retried := false
	for {
		w := newWaiter[T]()
		cl := &call{run: func(g *group) { run(g, w) }, refuse: func(code int16) { w.send(refuse(code)) }}
		c.mu.Lock()
		if code := c.statusLocked(id); code != 0 {
			c.mu.Unlock()
			return zero, code, nil
		}
		g, started := c.groups[id], false
		if g == nil {
			g, started = c.startLocked(id, cl), true
		}
		c.mu.Unlock()

		if code, err := c.awaitLoad(ctx, g, cl, started, retried); err != nil || code != 0 {
			if code == -1 {
				// The group we found was unloading, or failed a load another request started
				// (perhaps at an older epoch): take it over again, once.
				retried = true
				continue
			}
			return zero, code, err
		}
		if !started { // a group started for cl takes it as its first call
			select {
			case g.calls <- cl:
			case <-g.done:
				continue // the group exited in between; a new goroutine takes it over
			case <-ctx.Done():
				return zero, 0, ctx.Err()
			}
		}
		select {
		case v := <-w.ch:
			return v, 0, nil
		case <-ctx.Done():
			return zero, 0, ctx.Err()
		}
	}
}

// awaitLoad waits until g is loaded. For a group started for cl (its first call), the
// caller may withdraw cl when giving up. It returns -1 when the caller should take the group
// over again: it was unloaded while loading, or (unless retried) its load, which another
// request started, failed.
func (c *Coordinator) awaitLoad(ctx context.Context, g *group, cl *call, started, retried bool) (int16, error) {
	select {
	case <-g.loaded:
	default:
		t := time.NewTimer(c.cfg.LoadWait)
		defer t.Stop()
		select {
		case <-g.loaded:
		case <-t.C:
			if !started || cl.withdraw() {
				return kerr.CoordinatorLoadInProgress.Code, nil
			}
			<-g.loaded // the group has taken cl: it is loaded
		case <-ctx.Done():
			if started {
				cl.withdraw()
			}
			return 0, ctx.Err()
		}
	}
	if g.loadErr != nil {
		if started {
			cl.withdraw()
		}
		if errors.Is(g.loadErr, errUnloaded) || !started && !retried {
			select {
			case <-g.done:
				return -1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		return errorCode(g.loadErr), nil
	}
	return 0, nil
}

// startLocked starts group id's goroutine; first, if not nil, is its first call.
func (c *Coordinator) startLocked(id string, first *call) *group {
	g := newGroup(c, id)
	g.first = first
	c.groups[id] = g
	c.running++
	c.ownedChanged.Notify()
	c.m.coordinated(c.running)
	c.wg.Add(1)
	go g.run()
	return g
}

// claim is this process's claim of a group's fence.
type claim struct {
	epoch int32
	// acked is the length of file `epoch` this process had acknowledged when the group last
	// unloaded: a group resuming the file cuts it there, so a frame whose write or fsync
	// failed (and whose bytes the page cache may or may not keep) is never served. -1 while
	// the group runs.
	acked int64
}

// claimFor is the claim to serve group id at: this process's earlier claim if it has one
// (own), else the view's epoch (to be claimed).
func (c *Coordinator) claimFor(id string) (cl claim, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.claimed[id]; ok {
		return e, true
	}
	return claim{epoch: c.epoch, acked: -1}, false
}

func (c *Coordinator) recordClaim(id string, epoch int32) {
	c.mu.Lock()
	c.claimed[id] = claim{epoch: epoch, acked: -1}
	c.mu.Unlock()
}

func (c *Coordinator) dropClaim(id string, epoch int32) {
	c.mu.Lock()
	if e, ok := c.claimed[id]; ok && e.epoch == epoch {
		delete(c.claimed, id)
	}
	c.mu.Unlock()
}

func (c *Coordinator) noteFenced(id string, epoch int32) {
	c.mu.Lock()
	c.fenced[id] = epoch
	c.mu.Unlock()
}

// groupExited forgets g. st is its store, nil if it had none.
func (c *Coordinator) groupExited(g *group, deposed bool, st *store) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups[g.id] == g {
		delete(c.groups, g.id)
	}
	if st != nil {
		if cl, ok := c.claimed[g.id]; ok && cl.epoch == st.epoch {
			if deposed {
				delete(c.claimed, g.id)
			} else {
				c.claimed[g.id] = claim{epoch: st.epoch, acked: st.end}
			}
		}
	}
	c.running--
	c.ownedChanged.Notify()
	c.m.coordinated(c.running)
	c.wg.Done()
}

func (c *Coordinator) storageFailed(err error) {
	if errors.Is(err, storage.ErrStorage) {
		c.m.storageError()
	}
}

// ---- taking over groups found on the volume ----

// scanLoop takes over, after each view change, the groups on the volume that the view gives
// us: so the previous coordinator is fenced promptly, ListGroups shows idle groups, their
// offsets expire on time, and groups left without offsets are removed. A group that is gone
// (no offsets, no members) exits again at once, its files removed.
func (c *Coordinator) scanLoop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.quit:
			return
		case <-c.kick:
			c.scans.Add(1)
			c.scan()
			c.scans.Add(-1)
		}
	}
}

func (c *Coordinator) scan() {
	names, err := c.fs.ReadDirNames(c.cfg.Dir)
	if err != nil {
		c.storageFailed(storageErr("scan", err))
		c.log.Error(err, "Cannot list the groups directory", "dir", c.cfg.Dir)
		return
	}
	for _, name := range names {
		select {
		case <-c.quit:
			return
		default:
		}
		id, hashed, ok := parseDirName(name)
		if !ok {
			continue
		}
		if hashed {
			pid, err := peekID(c.fs, filepath.Join(c.cfg.Dir, name))
			if err != nil {
				c.storageFailed(err)
				c.log.Error(err, "Cannot read a group's offsets", "dir", name)
				continue
			}
			if pid == "" || dirName(pid) != name {
				continue
			}
			id = pid
		}
		if !c.wantsScan(id) {
			continue
		}
		c.mu.Lock()
		if c.statusLocked(id) == 0 && c.groups[id] == nil {
			c.startLocked(id, nil)
		}
		c.mu.Unlock()
	}
}

func (c *Coordinator) wantsScan(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statusLocked(id) == 0 && c.groups[id] == nil
}
