package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/notify"
)

// The partitions this broker leads (docs/dataplane.md, "Ownership"). The view's KafkaTopics
// say which partitions this broker leads and at which leader epoch; Partitions follows them:
// a partition given to it at epoch E is opened (storage.Open on its directory under the
// cluster id and topic id) and taken over at E (storage.Takeover: claim the fence, recover,
// roll), a bounded number at a time, and is served from then on; a partition the view takes
// away, or gives it at another epoch, is relinquished. Until its takeover completes a
// partition answers NOT_LEADER_OR_FOLLOWER. A topic without a topic id yet is not served:
// its directory has no name.

const (
	// DefaultTakeoverParallelism bounds how many takeovers run at once: each is a few fsyncs
	// and a scan of the log's tail, so a broker given a thousand partitions claims them
	// steadily instead of opening a thousand recoveries at once.
	DefaultTakeoverParallelism = 16
	// relinquishTimeout bounds one relinquish (a final fsync, a checkpoint, closing files);
	// past it the log finishes in the background and the broker counts it as released.
	relinquishTimeout = 30 * time.Second
	// storageProbeInterval is how often a broker whose storage failed re-tests its volume.
	storageProbeInterval = 5 * time.Second
	// failureMemory is how long a broker remembers that a partition failed here: a partition
	// that failed here twice within it is announced (Failed) so the assignment keeps it on
	// another broker (docs/storage.md, "A failed partition comes back").
	failureMemory = 10 * time.Minute
	// failuresKept bounds the failures remembered per partition.
	failuresKept = 8
)

// partitionKey names a partition by topic id and index: a topic deleted and re-created under
// its name gets a new id, and so new state and a new directory.
type partitionKey struct {
	topicID [16]byte
	index   int32
}

// leaderPhase is where a led partition is in its life on this broker.
type leaderPhase int

const (
	// phaseTakingOver: queued for, or running, its takeover. NOT_LEADER_OR_FOLLOWER.
	phaseTakingOver leaderPhase = iota
	// phaseServing: taken over; appends and reads are served.
	phaseServing
	// phaseFenced: the fence holds a newer epoch than this broker's (its view is stale, or a
	// newer leader claimed the partition). NOT_LEADER_OR_FOLLOWER until the view moves.
	phaseFenced
	// phaseFailed: a storage error took the partition offline here. KAFKA_STORAGE_ERROR until
	// the view moves it (another epoch).
	phaseFailed
)

func (p leaderPhase) String() string {
	switch p {
	case phaseTakingOver:
		return "takingOver"
	case phaseServing:
		return "serving"
	case phaseFenced:
		return "fenced"
	default:
		return "failed"
	}
}

// leader is one partition this broker was given at one epoch. It is immutable once
// published: the owner replaces it to change its phase.
type leader struct {
	topic string
	epoch int32
	log   *storage.Log
	phase leaderPhase
	err   error // why phaseFenced or phaseFailed
}

// PartitionsConfig is what a Partitions needs. Zero values take the defaults.
type PartitionsConfig struct {
	Self    int32
	DataDir string
	View    cluster.View
	// FS is the storage file system (storage.OSFS when nil).
	FS storage.FS
	// Cache bounds the closed-segment files open over every partition (256 when nil).
	Cache *storage.FileCache
	// TakeoverParallelism bounds concurrent takeovers (DefaultTakeoverParallelism when ≤ 0).
	TakeoverParallelism int
	Metrics             *Metrics
	Log                 logr.Logger
	// Now reads the clock for storage (LogAppendTime, segment.ms, retention); time.Now when nil.
	Now func() time.Time
	// IOTimeout is every log's storage.Options.IOTimeout (its default when zero).
	IOTimeout time.Duration
}

// cleanerConfig is the broker's log cleaner settings from the cluster's log.cleaner.* keys.
func cleanerConfig(c kafkaconfig.ClusterConfig, log logr.Logger) storage.CleanerConfig {
	rate := c.CleanerIOMaxBytesPerSecond
	if math.IsInf(rate, 1) {
		rate = 0 // Apache's Double.MAX_VALUE: no limit
	}
	return storage.CleanerConfig{
		DedupeBufferBytes: c.CleanerDedupeBufferBytes, IOBufferBytes: int(c.CleanerIOBufferBytes),
		IOBytesPerSecond: rate, Backoff: c.CleanerBackoff, Disabled: !c.CleanerEnable,
		Log: log.WithName("cleaner"),
	}
}

// Partitions owns the partition logs this broker leads. One goroutine, Run, is the owner: it
// alone opens, takes over and relinquishes logs and writes the table; the request path reads
// the table (Leader) under mu and never holds a log past its request. Every method is safe
// for concurrent use.
type Partitions struct {
	cfg PartitionsConfig
	log logr.Logger
	// cleaner cleans the compacted partitions this broker leads (docs/compaction.md), with
	// the settings last taken from the view (cleanerSet, owner only).
	cleaner    *storage.Cleaner
	cleanerSet storage.CleanerConfig

	mu  sync.RWMutex
	led map[partitionKey]*leader // guarded by mu; written only by the owner goroutine
	// failures are the storage failures of each partition here within failureMemory, oldest
	// first. Guarded by mu; written only by the owner goroutine.
	failures map[partitionKey][]failureAt

	events chan partitionEvent // worker goroutines → owner
	sem    chan struct{}       // takeover slots

	// open counts logs from Open until their relinquish returned (or their open failed):
	// the broker leads nothing only when it is zero.
	open         atomic.Int64
	takeoverDone atomic.Bool                      // every partition the reconciled view gives here is served or failed
	reconciled   atomic.Pointer[cluster.Snapshot] // the view snapshot the owner last acted on
	storageOK    atomic.Bool                      // the volume probe passed (or never ran)
	probing      atomic.Bool
	changed      notify.Notifier // wakes Changed waiters on every change of open or takeoverDone
	quit         chan struct{}   // closed when Run's context ends: stops the volume probe

	workers sync.WaitGroup // takeover, relinquish, watcher and probe goroutines

	// Owner-only state (the Run goroutine).
	owned         map[partitionKey]*ownedPartition
	relinquishing map[partitionKey]chan struct{} // closed when the last relinquish of key ended
	wanted        map[partitionKey]bool          // the keys the last reconciled view gives here
}

// failureAt is one storage failure of a partition on this broker.
type failureAt struct {
	epoch int32
	at    time.Time
}

// ownedPartition is the owner's record of a partition it holds.
type ownedPartition struct {
	cur    *leader
	cfg    storage.Config
	dir    string
	cancel context.CancelFunc // ends a queued or running takeover
}

// partitionEvent is a worker's report to the owner.
type partitionEvent struct {
	key  partitionKey
	log  *storage.Log
	kind eventKind
	err  error
	took time.Duration
}

type eventKind int

const (
	eventTakenOver    eventKind = iota // Takeover returned (err says how)
	eventStopped                       // a serving log stopped on its own (fenced, storage error)
	eventRelinquished                  // Relinquish returned
)

// NewPartitions returns a Partitions for cfg; Run makes it follow the view.
func NewPartitions(cfg PartitionsConfig) *Partitions {
	if cfg.FS == nil {
		cfg.FS = storage.OSFS{}
	}
	if cfg.Cache == nil {
		cfg.Cache = storage.NewFileCache(256)
	}
	if cfg.TakeoverParallelism <= 0 {
		cfg.TakeoverParallelism = DefaultTakeoverParallelism
	}
	p := &Partitions{
		cfg:           cfg,
		log:           cfg.Log,
		led:           map[partitionKey]*leader{},
		failures:      map[partitionKey][]failureAt{},
		events:        make(chan partitionEvent, 64),
		sem:           make(chan struct{}, cfg.TakeoverParallelism),
		owned:         map[partitionKey]*ownedPartition{},
		relinquishing: map[partitionKey]chan struct{}{},
		wanted:        map[partitionKey]bool{},
		quit:          make(chan struct{}),
	}
	p.storageOK.Store(true)
	p.cleaner = storage.NewCleaner(storage.CleanerConfig{Log: cfg.Log.WithName("cleaner")})
	return p
}

// Leader returns this broker's current leadership of key, or nil when it holds none.
func (p *Partitions) Leader(key partitionKey) *leader {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.led[key]
}

// Open is how many partition logs this broker holds open: taking over, serving, or still
// relinquishing. Zero means it leads nothing.
func (p *Partitions) Open() int {
	if p == nil {
		return 0
	}
	return int(p.open.Load())
}

// TakeoverDone reports whether every partition the view gives this broker — as the owner
// last acted on it, a few milliseconds behind a change — has been taken over: served, or
// failed with a storage error (answered, just not served). Vacuously true when nothing is
// assigned. A partition queued, taking over, or fenced by a newer epoch than the view shows
// (waiting for the view to move) is not done. /readyz reads it; it does not blink false at
// every view change, only while a takeover is really pending.
func (p *Partitions) TakeoverDone() bool { return p == nil || p.takeoverDone.Load() }

// CaughtUp is TakeoverDone for the current view snapshot: false until the owner has acted on
// the latest change. Tests wait on it after changing the view.
func (p *Partitions) CaughtUp() bool {
	return p == nil || p.takeoverDone.Load() && p.reconciled.Load() == p.cfg.View.Snapshot()
}

// Claims lists the partitions whose fence this broker holds at the epoch the view gave it:
// taken over (serving), or found claimed at a newer epoch (fenced — a newer leader holds it,
// which fences older epochs just as well). The heartbeat announces them on the Lease
// (v1alpha1.AnnotationClaimed) for the recovery reconciler: a partition still taking over,
// or failed, is not claimed. Nil on a nil Partitions.
func (p *Partitions) Claims() []v1alpha1.PartitionClaim {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]v1alpha1.PartitionClaim, 0, len(p.led))
	for key, l := range p.led {
		if l.phase == phaseServing || l.phase == phaseFenced {
			out = append(out, v1alpha1.PartitionClaim{
				TopicID: v1alpha1.KafkaUUID(key.topicID).String(), Partition: key.index, Epoch: l.epoch})
		}
	}
	return out
}

// StorageHealthy is false while the data volume fails the broker's probe after a storage
// error: the broker cannot serve at all, and its heartbeat says so.
func (p *Partitions) StorageHealthy() bool { return p == nil || p.storageOK.Load() }

// Changed returns a channel closed at the next change of Open or TakeoverDone.
func (p *Partitions) Changed() <-chan struct{} { return p.changed.Changed() }

// Run follows the view until ctx ends, then relinquishes every partition it holds (each
// bounded by relinquishTimeout, all at once) and returns once every worker goroutine has
// ended.
func (p *Partitions) Run(ctx context.Context) {
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		p.cleaner.Run(ctx)
	}()
	updated := p.cfg.View.Updated()
	p.reconcile(ctx, p.cfg.View.Snapshot())
	for {
		select {
		case <-ctx.Done():
			close(p.quit)
			p.releaseAll()
			return
		case <-updated:
			updated = p.cfg.View.Updated()
			p.reconcile(ctx, p.cfg.View.Snapshot())
		case ev := <-p.events:
			p.handle(ev)
		}
	}
}

// want is one partition the view gives this broker.
type want struct {
	topic string
	epoch int32
	dir   string
	cfg   storage.Config
}

// wantedHere is what s gives broker self: every partition it leads of every topic that has
// a topic id, with its directory and storage configuration. Nothing without a cluster id.
func wantedHere(s *cluster.Snapshot, self int32, dataDir string) map[partitionKey]want {
	out := map[partitionKey]want{}
	if s.ClusterID == "" {
		return out
	}
	for i := range s.Topics {
		t := &s.Topics[i]
		if t.ID == ([16]byte{}) {
			continue
		}
		cfg := storageConfig(t, s)
		for _, part := range t.Partitions {
			if part.Leader != self {
				continue
			}
			out[partitionKey{t.ID, part.Index}] = want{
				topic: t.Name, epoch: part.LeaderEpoch, cfg: cfg,
				dir: storage.PartitionDir(dataDir, s.ClusterID, t.Name, t.ID, part.Index),
			}
		}
	}
	return out
}

// batchHeaderBytes is a record batch v2 header: storage's smallest segment.bytes and
// max.message.bytes (no batch is smaller).
const batchHeaderBytes = 61

// storageConfig is the storage side of topic t's effective configuration. Kafka accepts a
// few values below what storage takes (segment.bytes from 14, max.message.bytes and
// index.interval.bytes from 0); they are raised to storage's minimum, which answers the same:
// a segment or message limit below a batch header refuses every batch, as Apache's does, and
// an index interval of 0 indexes every batch, as 1 does. The compaction fields pass storage's
// checks for every value kafkaconfig accepts: each key's range is storage's, and
// kafkaconfig.ResolveTopic never resolves a min compaction lag above the max.
func storageConfig(t *cluster.Topic, s *cluster.Snapshot) storage.Config {
	c := t.Config
	return storage.Config{
		SegmentBytes:           max(int64(c.SegmentBytes), batchHeaderBytes),
		SegmentMs:              c.SegmentMs,
		RetentionMs:            c.RetentionMs,
		RetentionBytes:         c.RetentionBytes,
		MaxMessageBytes:        max(c.MaxMessageBytes, batchHeaderBytes),
		LogAppendTime:          c.LogAppendTime(),
		IndexIntervalBytes:     max(c.IndexIntervalBytes, 1),
		ProducerIDExpirationMs: s.Config.ProducerIDExpirationMs,
		Compact:                c.Compact(),
		NoDelete:               !c.Delete(),
		DeleteRetentionMs:      c.DeleteRetentionMs,
		MinCompactionLagMs:     c.MinCompactionLagMs,
		MaxCompactionLagMs:     c.MaxCompactionLagMs,
		MinCleanableDirtyRatio: c.MinCleanableDirtyRatio,
	}
}

// reconcile makes the held partitions match what s gives this broker: release what it no
// longer gives (or gives at another epoch), take over what is new, and pass config changes on.
func (p *Partitions) reconcile(ctx context.Context, s *cluster.Snapshot) {
	if cc := cleanerConfig(s.Config, p.log); cc.DedupeBufferBytes != p.cleanerSet.DedupeBufferBytes || cc.IOBufferBytes != p.cleanerSet.IOBufferBytes ||
		cc.IOBytesPerSecond != p.cleanerSet.IOBytesPerSecond || cc.Backoff != p.cleanerSet.Backoff || cc.Disabled != p.cleanerSet.Disabled {
		p.cleaner.SetConfig(cc)
		p.cleanerSet = cc
	}
	wanted := wantedHere(s, p.cfg.Self, p.cfg.DataDir)
	for key, o := range p.owned {
		if w, ok := wanted[key]; !ok || w.epoch != o.cur.epoch || w.dir != o.dir {
			p.release(key)
		}
	}
	for key, w := range wanted {
		o, ok := p.owned[key]
		if !ok {
			p.acquire(ctx, key, w, s)
			continue
		}
		if w.cfg != o.cfg && o.cur.log == nil {
			// Its log never opened (a config storage refused): try again with the new one.
			p.release(key)
			p.acquire(ctx, key, w, s)
			continue
		}
		if w.cfg != o.cfg {
			if err := o.cur.log.SetConfig(w.cfg); err != nil {
				p.log.Error(err, "Topic config not applied to the partition log", "topic", w.topic, "partition", key.index)
			} else {
				o.cfg = w.cfg
			}
		}
	}
	p.wanted = make(map[partitionKey]bool, len(wanted))
	for key := range wanted {
		p.wanted[key] = true
	}
	p.reconciled.Store(s)
	p.refresh()
}

// acquire opens key's log and queues its takeover at w.epoch.
func (p *Partitions) acquire(ctx context.Context, key partitionKey, w want, s *cluster.Snapshot) {
	opts := storage.Options{
		FS: p.cfg.FS, Cache: p.cfg.Cache, Now: p.cfg.Now,
		Log:                    p.log.WithValues("topic", w.topic, "partition", key.index),
		RetentionCheckInterval: s.Config.RetentionCheckInterval,
		IOTimeout:              p.cfg.IOTimeout,
		Cleaner:                p.cleaner,
		FenceChecked:           p.cfg.Metrics.fenceChecked,
	}
	l, err := storage.Open(w.dir, w.cfg, opts)
	if err != nil {
		// Only an invalid configuration fails Open; the view validated it, so this is a bug
		// or a value storage refuses. Answer with a storage error rather than serve it wrong.
		p.log.Error(err, "Partition log not opened", "topic", w.topic, "partition", key.index)
		p.owned[key] = &ownedPartition{cur: &leader{topic: w.topic, epoch: w.epoch, phase: phaseFailed,
			err: &storage.StorageError{Op: "open", Err: err}}, cfg: w.cfg, dir: w.dir, cancel: func() {}}
		p.publish(key, p.owned[key].cur)
		p.failed(key, w.epoch)
		return
	}
	p.open.Add(1)
	tctx, cancel := context.WithCancel(ctx)
	cur := &leader{topic: w.topic, epoch: w.epoch, log: l, phase: phaseTakingOver}
	p.owned[key] = &ownedPartition{cur: cur, cfg: w.cfg, dir: w.dir, cancel: cancel}
	p.publish(key, cur)
	p.cfg.Metrics.underTakeover(1)
	prev := p.relinquishing[key]
	p.workers.Add(1)
	go p.takeover(tctx, key, cur, prev)
}

// takeover runs on a worker: it waits for an earlier log of the same partition to finish
// relinquishing (so its last appends are acknowledged before the new epoch claims the fence),
// then for a takeover slot, then takes over.
func (p *Partitions) takeover(ctx context.Context, key partitionKey, cur *leader, prev <-chan struct{}) {
	defer p.workers.Done()
	ev := partitionEvent{key: key, log: cur.log, kind: eventTakenOver}
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
		}
	}
	select {
	case p.sem <- struct{}{}:
		start := time.Now()
		ev.err = cur.log.Takeover(ctx, cur.epoch)
		ev.took = time.Since(start)
		<-p.sem
	case <-ctx.Done():
		ev.err = ctx.Err()
	}
	p.events <- ev
}

// release removes key from the table at once (requests now answer NOT_LEADER_OR_FOLLOWER)
// and relinquishes its log on a worker.
func (p *Partitions) release(key partitionKey) {
	o := p.owned[key]
	delete(p.owned, key)
	p.unpublish(key)
	o.cancel()
	if o.cur.phase == phaseTakingOver {
		p.cfg.Metrics.underTakeover(-1)
	}
	if o.cur.phase == phaseServing {
		p.cfg.Metrics.partitionsLed(-1)
	}
	if o.cur.log == nil {
		return // never opened
	}
	prev := p.relinquishing[key]
	done := make(chan struct{})
	p.relinquishing[key] = done
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		ctx, cancel := context.WithTimeout(context.Background(), relinquishTimeout)
		defer cancel()
		err := o.cur.log.Relinquish(ctx)
		if prev != nil {
			<-prev // keep "the last relinquish of key ended" true for whoever waits on done
		}
		close(done)
		p.events <- partitionEvent{key: key, log: o.cur.log, kind: eventRelinquished, err: err}
	}()
}

// releaseAll relinquishes everything at shutdown and waits for every worker, answering their
// events meanwhile so none blocks.
func (p *Partitions) releaseAll() {
	for key := range p.owned {
		p.release(key)
	}
	p.wanted = map[partitionKey]bool{}
	done := make(chan struct{})
	go func() { p.workers.Wait(); close(done) }()
	for {
		select {
		case ev := <-p.events:
			p.handle(ev)
		case <-done:
			for {
				select {
				case ev := <-p.events:
					p.handle(ev)
				default:
					p.refresh()
					return
				}
			}
		}
	}
}

// handle applies one worker report.
func (p *Partitions) handle(ev partitionEvent) {
	switch ev.kind {
	case eventRelinquished:
		p.relinquished(ev)
	case eventTakenOver:
		p.tookOver(ev)
	case eventStopped:
		p.stopped(ev)
	}
	p.refresh()
}

// relinquished counts a log closed, and forgets the partition's relinquish once its newest
// one has ended.
func (p *Partitions) relinquished(ev partitionEvent) {
	if ev.err != nil {
		p.log.Error(ev.err, "Relinquish did not finish in time; the log closes in the background", "partition", ev.key.index)
	}
	p.open.Add(-1)
	if ch, ok := p.relinquishing[ev.key]; ok {
		select {
		case <-ch:
			delete(p.relinquishing, ev.key) // the newest relinquish of key has ended
		default:
		}
	}
}

// tookOver publishes a takeover's outcome: serving (and watched from then on), fenced by a
// newer epoch, or failed.
func (p *Partitions) tookOver(ev partitionEvent) {
	o := p.current(ev)
	if o == nil {
		return // released meanwhile: its relinquish reports on its own
	}
	p.cfg.Metrics.underTakeover(-1)
	next := *o.cur
	switch {
	case ev.err == nil:
		next.phase = phaseServing
		p.cfg.Metrics.takeover("served", ev.took)
		p.cfg.Metrics.partitionsLed(1)
		p.log.Info("Took over partition", "topic", next.topic, "partition", ev.key.index, "epoch", next.epoch, "took", ev.took.String())
		p.workers.Add(1)
		go p.watch(ev.key, ev.log)
	case errors.Is(ev.err, storage.ErrFenced):
		next.phase, next.err = phaseFenced, ev.err
		p.cfg.Metrics.takeover("fenced", ev.took)
		p.log.Info("Takeover refused: the partition is claimed at a newer epoch", "topic", next.topic, "partition", ev.key.index, "epoch", next.epoch, "reason", ev.err.Error())
	default:
		next.phase, next.err = phaseFailed, ev.err
		p.cfg.Metrics.takeover("failed", ev.took)
		p.log.Error(ev.err, "Takeover failed; the partition is offline on this broker", "topic", next.topic, "partition", ev.key.index, "epoch", next.epoch)
		p.storageFailed(ev.err)
	}
	o.cur = &next
	p.publish(ev.key, o.cur)
	if next.phase == phaseFailed {
		p.failed(ev.key, next.epoch)
	}
}

// stopped publishes a serving log that stopped on its own: fenced by a newer leader, or
// failed with a storage error.
func (p *Partitions) stopped(ev partitionEvent) {
	o := p.current(ev)
	if o == nil || o.cur.phase != phaseServing {
		return
	}
	p.cfg.Metrics.partitionsLed(-1)
	next := *o.cur
	next.err = ev.log.Err()
	if errors.Is(next.err, storage.ErrStorage) {
		next.phase = phaseFailed
		p.log.Error(next.err, "Partition failed; it is offline on this broker", "topic", next.topic, "partition", ev.key.index, "epoch", next.epoch)
		p.storageFailed(next.err)
	} else {
		next.phase = phaseFenced
	}
	o.cur = &next
	p.publish(ev.key, o.cur)
	if next.phase == phaseFailed {
		p.failed(ev.key, next.epoch)
	}
}

// failed remembers that key failed here at epoch: Failed announces it.
func (p *Partitions) failed(key partitionKey, epoch int32) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, fs := range p.failures { // forget what is older than the memory, so it stays bounded
		if fs = recentFailures(fs, now); len(fs) == 0 {
			delete(p.failures, k)
		} else {
			p.failures[k] = fs
		}
	}
	fs := append(p.failures[key], failureAt{epoch: epoch, at: now})
	p.failures[key] = fs[max(0, len(fs)-failuresKept):]
	p.cfg.Metrics.partitionFailed()
}

// recentFailures is the tail of fs (oldest first) within failureMemory of now.
func recentFailures(fs []failureAt, now time.Time) []failureAt {
	i := 0
	for i < len(fs) && now.Sub(fs[i].at) >= failureMemory {
		i++
	}
	return fs[i:]
}

// Failed lists the partitions whose storage failed here recently, for the heartbeat to
// announce (v1alpha1.AnnotationFailed): every partition held failed now, with the failures
// within failureMemory (at least this one, however old), and every partition that failed
// here at least twice within it, held or not. One failure is taken over again here at the
// next epoch; more move the partition away and keep it away while they are remembered.
// Nil on a nil Partitions.
func (p *Partitions) Failed() []v1alpha1.PartitionFailure {
	if p == nil {
		return nil
	}
	now := p.now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []v1alpha1.PartitionFailure
	for key, fs := range p.failures {
		recent := recentFailures(fs, now)
		f := v1alpha1.PartitionFailure{TopicID: v1alpha1.KafkaUUID(key.topicID).String(), Partition: key.index,
			Epoch: fs[len(fs)-1].epoch, Failures: int32(len(recent))}
		if l := p.led[key]; l != nil && l.phase == phaseFailed {
			f.Epoch, f.Failures = l.epoch, max(f.Failures, 1)
		} else if f.Failures < 2 {
			continue
		}
		out = append(out, f)
	}
	return out
}

// Uncleanable lists the compacted partitions served here whose last cleaning pass failed,
// for the heartbeat to announce (v1alpha1.AnnotationUncleanable; docs/compaction.md, "When a
// partition cannot be cleaned"). A partition leaves the list when a pass succeeds or when it
// stops being served here. Nil on a nil Partitions.
func (p *Partitions) Uncleanable() []v1alpha1.UncleanablePartition {
	if p == nil {
		return nil
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	var out []v1alpha1.UncleanablePartition
	for key, l := range p.led {
		if l.phase != phaseServing || l.log == nil {
			continue
		}
		if err := p.cleaner.Uncleanable(l.log); err != nil {
			out = append(out, v1alpha1.UncleanablePartition{TopicID: v1alpha1.KafkaUUID(key.topicID).String(),
				Partition: key.index, Cause: uncleanableCause(err)})
		}
	}
	return out
}

// uncleanableCause names a failed pass's error for the operator.
func uncleanableCause(err error) v1alpha1.UncleanableCause {
	switch {
	case errors.Is(err, storage.ErrOffsetMapTooSmall):
		return v1alpha1.CauseOffsetMapTooSmall
	case errors.Is(err, storage.ErrCorruptLog):
		return v1alpha1.CauseCorruptBatch
	}
	return v1alpha1.CauseFailed
}

// ioTimeout is the bound of one file-system call: the logs' (PartitionsConfig.IOTimeout), or
// storage's default.
func (p *Partitions) ioTimeout() time.Duration {
	if p.cfg.IOTimeout > 0 {
		return p.cfg.IOTimeout
	}
	return storage.DefaultIOTimeout
}

func (p *Partitions) now() time.Time {
	if p.cfg.Now != nil {
		return p.cfg.Now()
	}
	return time.Now()
}

// current is the owned partition ev is about, if ev is about its current log.
func (p *Partitions) current(ev partitionEvent) *ownedPartition {
	o, ok := p.owned[ev.key]
	if !ok || o.cur.log != ev.log {
		return nil
	}
	return o
}

// watch reports a serving log that stops on its own: fenced by a newer leader, or failed.
func (p *Partitions) watch(key partitionKey, l *storage.Log) {
	defer p.workers.Done()
	<-l.Done()
	p.events <- partitionEvent{key: key, log: l, kind: eventStopped}
}

func (p *Partitions) publish(key partitionKey, l *leader) {
	p.mu.Lock()
	p.led[key] = l
	p.mu.Unlock()
}

func (p *Partitions) unpublish(key partitionKey) {
	p.mu.Lock()
	delete(p.led, key)
	p.mu.Unlock()
}

// refresh recomputes TakeoverDone and wakes Changed waiters.
func (p *Partitions) refresh() {
	done := true
	for key := range p.wanted {
		o, ok := p.owned[key]
		if !ok || o.cur.phase == phaseTakingOver || o.cur.phase == phaseFenced {
			done = false
			break
		}
	}
	p.takeoverDone.Store(done)
	p.changed.Notify()
}

// storageFailed starts probing the volume after a storage error, unless that error is the
// partition's own (a log corrupt before its tail is a problem of that partition, not of the
// broker: another broker would find it corrupt too).
func (p *Partitions) storageFailed(err error) {
	if !errors.Is(err, storage.ErrStorage) || errors.Is(err, storage.ErrCorruptLog) {
		return
	}
	if !p.probing.CompareAndSwap(false, true) {
		return
	}
	p.workers.Add(1)
	go func() {
		defer p.workers.Done()
		defer p.probing.Store(false)
		for {
			err := p.probe()
			p.storageOK.Store(err == nil)
			if err == nil {
				return
			}
			p.log.Error(err, "Data volume probe failed; reporting the broker unhealthy", "retryIn", storageProbeInterval)
			select {
			case <-time.After(storageProbeInterval):
			case <-p.quit:
				return
			}
		}
	}()
}

// probe writes, syncs and removes a small file at the top of the data directory: whether the
// volume takes writes at all. Every call is bounded by the I/O timeout, as the logs' are: a
// volume that hangs (a hard-mounted NFS whose server is gone) fails the probe and turns the
// broker unhealthy instead of holding the probe forever.
func (p *Partitions) probe() error {
	fsys := storage.WatchdogFS(p.cfg.FS, p.ioTimeout())
	name := filepath.Join(p.cfg.DataDir, ".paddock-probe-"+strconv.Itoa(int(p.cfg.Self)))
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("probe %s: %w", name, err)
	}
	_, werr := f.WriteAt([]byte("paddock\n"), 0)
	serr := f.Sync()
	cerr := f.Close()
	rerr := fsys.Remove(name)
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		return fmt.Errorf("probe %s: %w", name, err)
	}
	return nil
}
