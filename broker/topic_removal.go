package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
)

// The broker's step of a topic deletion (docs/topics.md, "Deleting a topic"). The operator
// does not mount the data volume, so the brokers remove a deleted topic's data: once the
// assignment reconciler has unassigned the topic and dropped its finalizer, the lowest-id
// Alive broker in its view
//
//  1. removes the topic's data with storage.RemoveTopicData, which claims every partition's
//     fence at storage.TombstoneEpoch, above any leader epoch — from then on a straggling
//     old leader's fence check fails, so it acknowledges nothing more, and no takeover at any
//     epoch can claim the partition — and then removes every file of the partition but its
//     fence, which stays as the tombstone (docs/storage.md "Deleting a topic");
//  2. removes the data finalizer, which lets the KafkaTopic go.
//
// Every step may be repeated: a fence already at the tombstone, files already gone and a
// finalizer already removed are success, so two brokers that briefly both think they are the
// lowest do no harm, and a broker that crashes half-way is followed by the next.

// removalRetry is how long a failed removal waits before it is tried again.
const removalRetry = 5 * time.Second

// dataRemover runs the broker's step for every deleted topic its view shows.
type dataRemover struct {
	view    cluster.View
	admin   *cluster.Admin
	self    int32
	dataDir string
	fs      storage.FS
	log     logr.Logger
}

// run removes what is due at every view change, and retries failures every removalRetry,
// until ctx ends.
func (d *dataRemover) run(ctx context.Context) {
	for {
		updated := d.view.Updated()
		var retry <-chan time.Time
		if err := d.removeDue(ctx, d.view.Snapshot()); err != nil && ctx.Err() == nil {
			d.log.Error(err, "Removing deleted topics' data failed; retrying", "retryIn", removalRetry)
			retry = time.After(removalRetry)
		}
		select {
		case <-ctx.Done():
			return
		case <-updated:
		case <-retry:
		}
	}
}

// removeDue removes the data of every topic of s that awaits it, when this broker is the one
// to do it.
func (d *dataRemover) removeDue(ctx context.Context, s *cluster.Snapshot) error {
	if !s.Synced || !lowestAlive(s, d.self) {
		return nil
	}
	var errs []error
	for _, t := range s.Deleting {
		if t.AwaitsDataRemoval {
			errs = append(errs, d.remove(ctx, s.ClusterID, t))
		}
	}
	return errors.Join(errs...)
}

// lowestAlive is true when self is the lowest-id broker whose row is Alive.
func lowestAlive(s *cluster.Snapshot, self int32) bool {
	for _, row := range s.Brokers { // sorted by id
		if row.Health == v1alpha1.BrokerAlive {
			return row.ID == self
		}
	}
	return false
}

// remove runs the two steps for one topic.
func (d *dataRemover) remove(ctx context.Context, clusterID string, t cluster.DeletingTopic) error {
	if err := d.removeData(clusterID, t); err != nil {
		return err
	}
	if err := d.admin.DropDataFinalizer(ctx, t.Object, t.UID); err != nil {
		return fmt.Errorf("release deleted topic %s: %w", t.Name, err)
	}
	return nil
}

// removeData tombstones the topic's partitions and removes their files. A topic without an
// id, or a cluster without one, never had a data directory (the path needs both): nothing to
// do.
func (d *dataRemover) removeData(clusterID string, t cluster.DeletingTopic) error {
	if clusterID == "" || t.ID == ([16]byte{}) {
		return nil
	}
	if err := storage.RemoveTopicData(d.fs, d.dataDir, clusterID, t.Name, t.ID, t.Partitions); err != nil {
		return fmt.Errorf("remove data of deleted topic %s: %w", t.Name, err)
	}
	d.log.Info("Removed a deleted topic's data; its partitions' fences stay as the tombstone", "topic", t.Name,
		"dir", filepath.Dir(storage.PartitionDir(d.dataDir, clusterID, t.Name, t.ID, 0)))
	return nil
}
