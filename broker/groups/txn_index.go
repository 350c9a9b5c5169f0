package groups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// The transaction index of a __consumer_offsets partition (docs/groups.md "Transactional
// offsets"): for each producer id, the groups of the partition that may hold its pending
// offsets, so a marker completes every one of them without listing a directory (a listing on
// a network file system may be stale, and a group it missed would keep its pending offsets
// while the marker answered NONE).
//
//	<Dir>/txn/p-<partition>/fence/                 the partition's storage.Fence
//	<Dir>/txn/p-<partition>/<pid>-<epoch:010>.groups  frames: group id, producer epoch
//
// The rules:
//   - a coordinator at epoch K claims the partition's fence at K before it reads or writes
//     the index (fence >= K: NOT_COORDINATOR until the view moves); only the coordinator
//     that claimed K writes file <pid>-K;
//   - a TxnOffsetCommit records its group in the producer's file K — appended, fsynced, and
//     the partition fence checked — before the group writes the pending offsets, so every
//     pending offset a coordinator acknowledged is listed in a file that was durable before
//     any newer claim of the partition;
//   - a marker (CompleteTransaction) at K reads the producer's files of every epoch claimed
//     on the fence (reached by name through storage.Fence.Claims, never by a listing),
//     completes each listed group durably — loading it, and claiming it even when it has no
//     files, so a deposed coordinator creating it late is fenced — and only then removes the
//     producer's files. A crash in between leaves them, and a resent marker completes again
//     (a group without pending offsets of the producer is a no-op).
//
// The index over-approximates (a group listed whose pending write failed, or whose offsets
// were completed already): that costs a load, never a wrong answer.
//
// One partition's transactional calls are serialized by its lock (sem), held across the
// index write and the group's call; group goroutines never take it, so holding it while
// waiting for a group cannot deadlock.
type txnPartition struct {
	p   int32
	dir string
	sem chan struct{} // 1-slot: held by the one transactional call of this partition

	// guarded by sem
	fence     *storage.Fence
	epoch     int32 // the epoch claimed by this process; -1 none
	fencedAt  int32 // the view epoch at which the claim was refused; -1 none
	producers map[int64]*txnProducer
}

// txnProducer is one producer's index as this coordinator knows it at its claim.
type txnProducer struct {
	groups map[string]int16 // group → the highest producer epoch recorded for it
	f      storage.File     // file <pid>-<epoch>, once written at this claim
	end    int64
	valid  int64 // own file's valid bytes when it was found at load (-1: none)
}

const txnDirName = "txn"

func (c *Coordinator) txnPartitionDir(p int32) string {
	return filepath.Join(c.cfg.Dir, txnDirName, "p-"+strconv.Itoa(int(p)))
}

func txnIndexName(pid int64, epoch int32) string { return fmt.Sprintf("%d-%010d.groups", pid, epoch) }

// probeGroup is a group id of partition p: whoever the view makes its coordinator
// coordinates the partition (every group of a partition has the same coordinator).
func (c *Coordinator) probeGroup(p int32) string {
	for i := 0; ; i++ {
		id := "__paddock_txn_probe_" + strconv.Itoa(i)
		if coordinator.Partition(id, c.cfg.OffsetsPartitions) == p {
			return id
		}
	}
}

// lockTxnPartition takes partition p's lock and makes sure this coordinator holds p's fence
// at the view's epoch (claiming it if needed), as the coordinator of group (a group of p).
// It returns the partition, a release function and 0, or a status code: the group's
// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR), NOT_COORDINATOR when the fence holds the
// view's epoch or more, or the storage error. ctx ending first is its error.
func (c *Coordinator) lockTxnPartition(ctx context.Context, p int32, group string) (*txnPartition, func(), int16, error) {
	c.mu.Lock()
	if code := c.statusLocked(group); code != 0 {
		c.mu.Unlock()
		return nil, nil, code, nil
	}
	epoch := c.epoch
	if c.txnParts == nil {
		c.txnParts = map[int32]*txnPartition{}
	}
	tp := c.txnParts[p]
	if tp == nil {
		tp = &txnPartition{p: p, dir: c.txnPartitionDir(p), sem: make(chan struct{}, 1), epoch: -1, fencedAt: -1}
		c.txnParts[p] = tp
	}
	c.mu.Unlock()
	select {
	case tp.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, 0, ctx.Err()
	case <-c.quit:
		return nil, nil, kerr.CoordinatorNotAvailable.Code, nil
	}
	release := func() { <-tp.sem }
	if code := c.claimTxnPartition(tp, epoch); code != 0 {
		release()
		return nil, nil, code, nil
	}
	return tp, release, 0, nil
}

// claimTxnPartition (holding tp's lock) claims tp's fence at epoch unless this process holds
// it there already. A claim at an older epoch is replaced: the cached index is dropped and
// read again at the new claim.
func (c *Coordinator) claimTxnPartition(tp *txnPartition, epoch int32) int16 {
	if tp.epoch == epoch {
		return 0
	}
	if tp.fencedAt == epoch || tp.epoch > epoch {
		return kerr.NotCoordinator.Code
	}
	if tp.fence == nil {
		if err := c.fs.MkdirAll(filepath.Join(tp.dir, fenceDirName)); err != nil {
			c.storageFailed(storageErr("create transaction index", err))
			return kerr.NotCoordinator.Code
		}
		for _, d := range []string{c.cfg.Dir, filepath.Join(c.cfg.Dir, txnDirName), tp.dir} {
			if err := c.fs.SyncDir(d); err != nil {
				c.storageFailed(storageErr("create transaction index", err))
				return kerr.NotCoordinator.Code
			}
		}
		f, err := storage.OpenFence(c.fs, filepath.Join(tp.dir, fenceDirName))
		if err != nil {
			c.storageFailed(err)
			return kerr.NotCoordinator.Code
		}
		tp.fence = f
	}
	tp.dropProducers()
	if err := tp.fence.Claim(epoch); err != nil {
		if errors.Is(err, storage.ErrFenced) {
			tp.fencedAt = epoch
			c.log.V(1).Info("Transaction index fence holds a newer epoch", "partition", tp.p, "epoch", epoch, "err", err.Error())
		} else {
			c.storageFailed(err)
			c.log.Error(err, "Cannot claim a transaction index", "partition", tp.p, "epoch", epoch)
		}
		return kerr.NotCoordinator.Code
	}
	tp.epoch = epoch
	return 0
}

func (tp *txnPartition) dropProducers() {
	for _, pr := range tp.producers {
		if pr.f != nil {
			_ = pr.f.Close()
		}
	}
	tp.producers = map[int64]*txnProducer{}
}

// producer returns pid's index at tp's claim, reading the files of every claimed epoch the
// first time (holding tp's lock).
func (c *Coordinator) producer(tp *txnPartition, pid int64) (*txnProducer, error) {
	if pr := tp.producers[pid]; pr != nil {
		return pr, nil
	}
	pr := &txnProducer{groups: map[string]int16{}, valid: -1}
	var readErr error
	err := tp.fence.Claims(func(e int32) bool {
		if e > tp.epoch {
			return true
		}
		valid, err := c.readTxnIndex(filepath.Join(tp.dir, txnIndexName(pid, e)), pr.groups)
		if err != nil {
			readErr = err
			return false
		}
		if e == tp.epoch {
			pr.valid = valid
		}
		return true
	})
	if err = errors.Join(err, readErr); err != nil {
		return nil, err
	}
	tp.producers[pid] = pr
	return pr, nil
}

// readTxnIndex adds the groups file path lists to groups and returns its valid length (-1
// when there is no such file). A torn tail ends the file (nothing after it was
// acknowledged); a frame that checks but does not decode is corruption.
func (c *Coordinator) readTxnIndex(path string, groups map[string]int16) (int64, error) {
	f, err := c.fs.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil
	}
	if err != nil {
		return 0, storageErr("open transaction index", err)
	}
	defer func() { _ = f.Close() }() // read only
	size, err := f.Size()
	if err != nil {
		return 0, storageErr("read transaction index", err)
	}
	fr := &frameReader{src: f, size: size}
	for {
		payload, err := fr.next()
		if errors.Is(err, errEnd) {
			return fr.off, nil
		}
		if err != nil {
			return 0, storageErr("read transaction index "+path, err)
		}
		r := reader{b: payload}
		g := r.str()
		epoch := r.int16()
		if err := r.done(); err != nil {
			return 0, storageErr("read transaction index "+path, fmt.Errorf("%w: %w", errCorrupt, err))
		}
		if old, ok := groups[g]; !ok || epoch > old {
			groups[g] = epoch
		}
	}
}

// record makes "group may hold pid's pending offsets at producer epoch" durable in file
// <pid>-<claim> and checks the partition fence; nil only when both hold (holding tp's lock).
func (c *Coordinator) record(tp *txnPartition, pid int64, pr *txnProducer, group string, epoch int16) error {
	if old, ok := pr.groups[group]; ok && old >= epoch {
		return nil // durable and fenced-in when it was written
	}
	path := filepath.Join(tp.dir, txnIndexName(pid, tp.epoch))
	fail := func(err error) error {
		// What reached the file is unknown: forget the producer (read again next time) and
		// its file.
		if pr.f != nil {
			_ = pr.f.Close()
		}
		delete(tp.producers, pid)
		return err
	}
	created := false
	if pr.f == nil {
		f, err := c.fs.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return fail(storageErr("create transaction index", err))
		}
		pr.f, pr.end, created = f, max(pr.valid, 0), pr.valid < 0
		if err := f.Truncate(pr.end); err != nil { // a torn tail (or bytes never acknowledged)
			return fail(storageErr("create transaction index", err))
		}
	}
	b := appendStr(nil, group)
	b = binary.AppendVarint(b, int64(epoch))
	fr := frame(b)
	if _, err := pr.f.WriteAt(fr, pr.end); err != nil {
		return fail(storageErr("append transaction index", err))
	}
	if err := pr.f.Sync(); err != nil {
		return fail(storageErr("fsync transaction index", err))
	}
	if created {
		if err := c.fs.SyncDir(tp.dir); err != nil {
			return fail(storageErr("fsync transaction index", err))
		}
	}
	if err := tp.fence.Check(tp.epoch); err != nil {
		if errors.Is(err, storage.ErrFenced) {
			tp.fencedAt, tp.epoch = tp.epoch, -1
		}
		return fail(err)
	}
	pr.end += int64(len(fr))
	pr.groups[group] = epoch
	return nil
}

// forget removes pid's files of every claimed epoch, once each listed group has completed
// the producer's transaction durably (holding tp's lock). A file left behind (a failure) only
// makes the next marker of the producer visit groups that have nothing of it.
func (c *Coordinator) forget(tp *txnPartition, pid int64) {
	if pr := tp.producers[pid]; pr != nil && pr.f != nil {
		_ = pr.f.Close()
	}
	delete(tp.producers, pid)
	var errs []error
	err := tp.fence.Claims(func(e int32) bool {
		if e <= tp.epoch {
			if err := c.fs.Remove(filepath.Join(tp.dir, txnIndexName(pid, e))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		return true
	})
	if err = errors.Join(append(errs, err, c.fs.SyncDir(tp.dir))...); err != nil {
		c.log.Error(err, "Cannot remove a completed transaction's index", "partition", tp.p, "producerID", pid)
	}
}

// sortedGroups lists pr's groups in order (a deterministic visiting order).
func (pr *txnProducer) sortedGroups() []string {
	out := make([]string, 0, len(pr.groups))
	for g := range pr.groups {
		out = append(out, g)
	}
	slices.Sort(out)
	return out
}

func (pr *txnProducer) maxEpoch() int16 {
	m := int16(-1)
	for _, e := range pr.groups {
		m = max(m, e)
	}
	return m
}
