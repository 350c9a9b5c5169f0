package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"strconv"
)

// TombstoneEpoch is the epoch a deleted topic's partitions are claimed at: the largest, which
// no leader is ever given. Once claimed, every takeover at any epoch is refused.
const TombstoneEpoch int32 = math.MaxInt32

// RemoveTopicData removes a deleted topic's data and leaves a tombstone every takeover
// honours (docs/topics.md "Deleting a topic", docs/storage.md "Deleting a topic"). For each partition —
// [0, partitions) by name, and any other partition directory the listing shows — it claims
// the fence at TombstoneEpoch, so a straggling leader acknowledges nothing more and a lagging
// one that starts its takeover later is refused; then it removes every file of the partition
// but its fence. The fence directories stay: they are the tombstone (a takeover that finds
// the directory gone would otherwise create a fresh fence and serve a topic that no longer
// exists). The topic id is part of the directory name, so a topic re-created under the same
// name never meets them.
//
// Every step may be repeated: a fence already at the tombstone and files already gone are
// success, so two brokers removing at once do no harm, and an interrupted removal is finished
// by the next. A partition whose fence cannot be claimed keeps its files (the error says
// which).
func RemoveTopicData(fsys FS, dataDir, clusterID, topic string, topicID [16]byte, partitions int32) error {
	dir := filepath.Dir(PartitionDir(dataDir, clusterID, topic, topicID, 0))
	parts := map[int32]bool{}
	for p := range max(partitions, 0) {
		parts[p] = true
	}
	names, err := fsys.ReadDirNames(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove topic %s: %w", topic, err)
	}
	for _, n := range names {
		if p, err := strconv.ParseInt(n, 10, 32); err == nil && p >= 0 && strconv.FormatInt(p, 10) == n {
			parts[int32(p)] = true
		}
	}
	var errs []error
	for p := range parts {
		pdir := filepath.Join(dir, strconv.FormatInt(int64(p), 10))
		if err := tombstonePartition(fsys, pdir); err != nil {
			errs = append(errs, fmt.Errorf("remove topic %s partition %d: %w", topic, p, err))
		}
	}
	return errors.Join(errs...)
}

// tombstonePartition claims a partition's fence at TombstoneEpoch, then removes its files but
// the fence.
func tombstonePartition(fsys FS, pdir string) error {
	f, err := OpenFence(fsys, filepath.Join(pdir, fenceDirName))
	if err != nil {
		return err
	}
	if err := f.Claim(TombstoneEpoch); err != nil {
		var fenced *FencedError
		if !errors.As(err, &fenced) || fenced.Fence != TombstoneEpoch {
			return err
		}
	}
	names, err := fsys.ReadDirNames(pdir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if n == fenceDirName {
			continue
		}
		if err := fsys.Remove(filepath.Join(pdir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return fsys.SyncDir(pdir)
}
