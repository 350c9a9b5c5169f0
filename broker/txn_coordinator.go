package broker

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// Transactions is the broker's transaction coordinator (broker/txn, docs/transactions.md)
// wired to the cluster view, as Groups is the group coordinator: one txn.Coordinator per
// coordinator epoch of the view (status.coordinatorEpoch), owning the transactional ids the
// group rule gives this broker over the broker sets that epoch was set for
// (coordinatorView). A new epoch is a new Coordinator; the old one is closed (its marker
// drivers stop; the decisions they were finishing are durable, and the new one finishes
// them: LoadOwned claims every owned id at once). Its files live under
// TxnDir(data, clusterID).
type Transactions struct {
	Self    int32
	DataDir string
	View    cluster.View
	// FS is the coordinator's file system (storage.OSFS when nil).
	FS storage.FS
	// ProducerIDs allocates the transactional ids' producer ids (the idempotent producers'
	// allocator: ids are unique across both).
	ProducerIDs *ProducerIDSource
	// Markers gets the coordinator's markers written by each partition's leader.
	Markers txn.MarkerWriter
	// Metrics are the coordinators' series (they follow the current one).
	Metrics *txn.Metrics
	// Configure, when set, adjusts each coordinator's configuration before it is created:
	// tests shorten the abort scan.
	Configure func(*txn.Config)
	Log       logr.Logger

	mu    sync.Mutex
	cur   *txn.Coordinator     // guarded by mu; nil before the first coordinator epoch
	epoch int32                // guarded by mu: cur's epoch
	owns  func(id string) bool // guarded by mu: the rule at epoch
	stop  func()               // guarded by mu: ends cur's Run and loadOwned, and waits for loadOwned
}

// reloadInterval is how often a coordinator lists the ids on the volume again to claim the
// ones the rule gives it (loadOwned).
const reloadInterval = 30 * time.Second

// TxnDir is where a cluster's transactional ids live on the shared volume.
func TxnDir(dataDir, clusterID string) string {
	return filepath.Join(dataDir, clusterID, "txn")
}

// Coordinator returns the coordinator that serves id, or the code to answer instead:
// COORDINATOR_NOT_AVAILABLE before the first coordinator epoch (or without a data
// directory), NOT_COORDINATOR when the rule gives id to another broker.
func (t *Transactions) Coordinator(id string) (*txn.Coordinator, int16) {
	if t == nil {
		return nil, kerr.CoordinatorNotAvailable.Code
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.cur == nil:
		return nil, kerr.CoordinatorNotAvailable.Code
	case !t.owns(id):
		return nil, kerr.NotCoordinator.Code
	}
	return t.cur, 0
}

// Current is the running coordinator (nil before the first epoch): ListTransactions reads
// every id it holds.
func (t *Transactions) Current() *txn.Coordinator {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Run follows the view until ctx ends, then closes the coordinator. It returns when every
// coordinator it made is closed.
func (t *Transactions) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer func() {
		t.mu.Lock()
		c := t.cur
		t.cur = nil
		stop := t.stop
		t.mu.Unlock()
		t.Metrics.Follow(nil)
		if c != nil {
			stop()
			c.Close()
		}
		wg.Wait()
	}()
	for {
		updated := t.View.Updated() // taken before reading, so no change slips between
		s := t.View.Snapshot()
		if epoch, owns, ok := coordinatorView(s, t.Self); ok && s.ClusterID != "" {
			t.follow(ctx, &wg, s, epoch, owns)
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		}
	}
}

// follow makes a coordinator for epoch unless one runs at it already, and closes the one it
// replaces.
func (t *Transactions) follow(ctx context.Context, wg *sync.WaitGroup, s *cluster.Snapshot, epoch int32, owns func(string) bool) {
	t.mu.Lock()
	if t.cur != nil && t.epoch >= epoch {
		t.mu.Unlock()
		return
	}
	clusterID := s.ClusterID
	cfg := txn.Config{
		FS:          t.FS,
		Root:        TxnDir(t.DataDir, clusterID),
		Epoch:       epoch,
		ProducerIDs: producerIDsOf{t.ProducerIDs, clusterID},
		Markers:     t.Markers,
		Leader: func(topic string, partition int32) (int32, bool) {
			return markerLeader(t.View.Snapshot(), topic, partition)
		},
		Log:     t.Log.WithValues("coordinatorEpoch", epoch),
		Metrics: t.Metrics,

		OffsetsPartitions: s.Config.OffsetsTopicPartitions,
	}
	if t.Configure != nil {
		t.Configure(&cfg)
	}
	c := txn.New(cfg)
	cctx, cancel := context.WithCancel(ctx)
	loaded := make(chan struct{})
	// Close must not race a claim LoadOwned is making: stop waits for loadOwned first.
	stop := func() { cancel(); <-loaded }
	old, stopOld := t.cur, t.stop
	t.cur, t.epoch, t.owns, t.stop = c, epoch, owns, stop
	t.mu.Unlock()
	t.Metrics.Follow(c)
	if old != nil {
		stopOld()
		old.Close() // its drivers stop; what they were finishing is durable and c finishes it
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.Run(cctx)
	}()
	go func() {
		defer wg.Done()
		defer close(loaded)
		t.loadOwned(cctx, c, epoch, owns)
	}()
	t.Log.Info("Transaction coordinator started", "coordinatorEpoch", epoch, "dir", cfg.Root)
}

// loadOwned claims every id the rule gives this broker at the coordinator's start, so
// decisions an earlier coordinator left in Prepare* are finished without waiting for their
// producer and its Ongoing transactions time out here; then again every reloadInterval, for
// an id a stale directory listing (a network file system's) did not show the first time.
// Claiming an id already held costs nothing.
func (t *Transactions) loadOwned(ctx context.Context, c *txn.Coordinator, epoch int32, owns func(string) bool) {
	for {
		n, err := c.LoadOwned(owns)
		switch {
		case err != nil && ctx.Err() == nil:
			t.Log.Error(err, "Listing the transactional ids failed; they are claimed on their next request or the next listing", "coordinatorEpoch", epoch)
		case n > 0:
			t.Log.V(1).Info("Transaction coordinator holds its ids", "coordinatorEpoch", epoch, "ids", n)
		}
		timer := time.NewTimer(reloadInterval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// markerLeader is who writes a marker for topic/partition: the partition's leader as the
// view shows it; for a __consumer_offsets partition, the group coordinator of the groups
// hashing to it (the broker the coordinator rule picks over the broker sets of the
// coordinator epoch, as the group coordinator's own ownership is decided). A partition the
// view no longer has — its topic deleted (or being deleted), an index past its count — is
// txn.PartitionGone: its marker is dropped. One without a leader now waits (ok false).
func markerLeader(s *cluster.Snapshot, topic string, partition int32) (int32, bool) {
	if topic == txn.OffsetsTopic {
		if partition < 0 || partition >= s.Config.OffsetsTopicPartitions {
			return txn.PartitionGone, true
		}
		if s.CoordinatorBrokers == nil {
			return -1, false
		}
		return coordinator.PickPartition(partition, s.CoordinatorBrokers.Registered, s.CoordinatorBrokers.Alive)
	}
	t, ok := s.Topic(topic)
	switch {
	case !s.Synced:
		return -1, false
	case !ok || partition < 0 || int(partition) >= len(t.Partitions):
		return txn.PartitionGone, true
	case t.Partitions[partition].Leader < 0:
		return -1, false
	}
	return t.Partitions[partition].Leader, true
}

// producerIDsOf is the allocator of one cluster as txn.ProducerIDs.
type producerIDsOf struct {
	src       *ProducerIDSource
	clusterID string
}

func (p producerIDsOf) Next() (int64, error) { return p.src.next(p.clusterID) }
