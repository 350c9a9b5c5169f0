package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
	"syscall"
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
//  1. claims every partition's fence at tombstoneEpoch, above any leader epoch: from then
//     on a straggling old leader's fence check fails, so it acknowledges nothing more, and
//     no takeover at any epoch can claim the partition;
//  2. removes the topic's directory <data>/<clusterID>/topics/<name>-<id>/;
//  3. removes the data finalizer, which lets the KafkaTopic go.
//
// Every step may be repeated: a fence already at the tombstone, a directory already gone and a
// finalizer already removed are success, so two brokers that briefly both think they are the
// lowest do no harm, and a broker that crashes half-way is followed by the next.

// tombstoneEpoch is the fence epoch a deleted topic's partitions are claimed at: the largest
// epoch, which no leader is ever given (balance refuses an epoch it could not bump).
const tombstoneEpoch = math.MaxInt32

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

// remove runs the three steps for one topic. A topic without an id, or a cluster without one,
// never had a data directory (the path needs both), so only the finalizer goes.
func (d *dataRemover) remove(ctx context.Context, clusterID string, t cluster.DeletingTopic) error {
	if clusterID != "" && t.ID != ([16]byte{}) {
		dir := topicDir(d.dataDir, clusterID, t.Name, t.ID)
		exists, err := fenceTopic(d.fs, dir)
		if err != nil {
			return fmt.Errorf("fence deleted topic %s: %w", t.Name, err)
		}
		if exists {
			if err := removeTree(d.fs, dir); err != nil {
				return fmt.Errorf("remove data of deleted topic %s: %w", t.Name, err)
			}
			d.log.Info("Removed a deleted topic's data", "topic", t.Name, "dir", dir)
		}
	}
	if err := d.admin.DropDataFinalizer(ctx, t.Object, t.UID); err != nil {
		return fmt.Errorf("release deleted topic %s: %w", t.Name, err)
	}
	return nil
}

// topicDir is a topic's directory: the parent of its partition directories (storage layout).
func topicDir(dataDir, clusterID, name string, id [16]byte) string {
	return filepath.Dir(storage.PartitionDir(dataDir, clusterID, name, id, 0))
}

// partitionFenceDir is where broker/storage keeps a partition's fence: "fence" inside the
// partition directory (storage's layout.go, docs/storage.md). broker/storage does not export
// it; TestRemovalFencesOutAStragglingLeader pins that this is the fence its Logs check.
func partitionFenceDir(partitionDir string) string { return filepath.Join(partitionDir, "fence") }

// fenceTopic claims the fence of every partition directory under dir at tombstoneEpoch and
// says whether dir exists. A missing dir (no data, or removed already) is nothing to fence.
func fenceTopic(fsys storage.FS, dir string) (exists bool, err error) {
	names, err := fsys.ReadDirNames(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, name := range names {
		if _, err := strconv.ParseUint(name, 10, 31); err != nil {
			continue // not a partition directory
		}
		f, err := storage.OpenFence(fsys, partitionFenceDir(filepath.Join(dir, name)))
		if err != nil {
			return true, err
		}
		err = f.Claim(tombstoneEpoch)
		var fenced *storage.FencedError
		if errors.As(err, &fenced) && fenced.Fence == tombstoneEpoch {
			err = nil // claimed by an earlier attempt, or by another broker
		}
		if err != nil {
			return true, fmt.Errorf("partition %s: %w", name, err)
		}
	}
	return true, nil
}

// removeTree removes dir and everything below it through fsys; a dir that is already gone is
// success. fsys has no RemoveAll: a name that does not list as a directory is removed as a
// file.
func removeTree(fsys storage.FS, dir string) error {
	names, err := fsys.ReadDirNames(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, syscall.ENOTDIR):
		return ignoreNotExist(fsys.Remove(dir))
	case err != nil:
		return err
	}
	for _, name := range names {
		if err := removeTree(fsys, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return ignoreNotExist(fsys.Remove(dir))
}

func ignoreNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
