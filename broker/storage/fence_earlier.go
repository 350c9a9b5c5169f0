package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The fence during an upgrade from the earlier format (docs/storage.md, "The fence across an
// upgrade"). A broker of the earlier version claims epoch E by creating the entry "<E>" and
// checks by listing the directory: it holds while its entry is the largest number there. It
// reads no chain claim and writes no notice. So while both versions run (a rolling upgrade
// from 0.1.0), each would miss the other's claims — a deposed writer of either version would
// go on acknowledging appends its successor never scanned, and those records would be lost.
// This version therefore also speaks the earlier format:
//
//   - Claim first creates the entry "<E>" too (marked as this version's), durable before the
//     chain claim and so before the takeover scans: an earlier-version writer's next check
//     lists it, finds a larger number than its own and stops. An earlier-version entry at E
//     or above refuses the claim.
//   - Where an earlier-version entry is in the directory when a claim is made (the partition
//     or group was written by the earlier version), Check lists the directory as well and
//     fails on any number above its epoch: an earlier-version broker that claims after this
//     one fences it the only way that version can.
//
// A directory the earlier version never wrote is checked by notice alone, as before.

// earlierMark ends the note of an earlier-format entry this version writes, telling it from
// one an earlier-version broker wrote ("<E> claimed by <host> pid <pid>").
const earlierMark = " (with a chain claim)"

// writtenForTheEarlierVersion reports whether an earlier-format entry's content is one this
// version wrote beside a chain claim.
func writtenForTheEarlierVersion(content []byte) bool {
	return strings.Contains(string(content), earlierMark)
}

// earlierEntryKeep is how many of its own earlier-format entries below the newest a claim
// keeps; older ones are removed (the earlier format's value is its largest entry, so removing
// smaller ones changes nothing, and the directory stays small).
const earlierEntryKeep = 3

// claimEarlierFormat is Claim's first step: it scans the earlier-format entries (refusing
// epoch when one of the earlier version is at epoch or above), creates "<epoch>", durable,
// and reports whether an earlier-version entry is in the directory.
func (f *Fence) claimEarlierFormat(epoch int32) (earlier bool, err error) {
	earlier, top, err := f.scanEarlierFormat()
	if err != nil {
		return false, storageErr("claim fence", err)
	}
	if top.n > int64(epoch) || top.n == int64(epoch) && !top.ours {
		return false, &FencedError{Epoch: epoch, Fence: clampEpoch(top.n)}
	}
	name := strconv.FormatInt(int64(epoch), 10)
	host, _ := os.Hostname()
	note := fmt.Sprintf("%s claimed by %s pid %d%s\n", name, host, os.Getpid(), earlierMark)
	switch err := writeNew(f.fs, filepath.Join(f.dir, name), []byte(note)); {
	case errors.Is(err, fs.ErrExist):
		b, rerr := readPrefix(f.fs, filepath.Join(f.dir, name), 256)
		if rerr != nil {
			return false, storageErr("claim fence", rerr)
		}
		if !strings.Contains(string(b), earlierMark) {
			return false, &FencedError{Epoch: epoch, Fence: epoch} // an earlier-version broker claimed this epoch
		}
	case err != nil:
		return false, storageErr("claim fence", err)
	}
	if err := f.fs.SyncDir(f.dir); err != nil {
		return false, storageErr("claim fence", err)
	}
	f.pruneEarlierFormat(epoch)
	return earlier, nil
}

// earlierEntry is one entry of the earlier format.
type earlierEntry struct {
	n    int64
	ours bool // written by this version (earlierMark)
}

// scanEarlierFormat lists the earlier-format entries: whether one an earlier-version broker
// wrote is there, and the largest (n -1 when there is none). Numbered names whose content no
// claim wrote are junk, as for legacyValue.
func (f *Fence) scanEarlierFormat() (earlier bool, top earlierEntry, err error) {
	top.n = -1
	names, err := f.fs.ReadDirNames(f.dir)
	if err != nil {
		return false, top, err
	}
	for _, name := range names {
		n, ok := parseDecimal(name)
		if !ok {
			continue
		}
		b, err := readPrefix(f.fs, filepath.Join(f.dir, name), 256)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile
		}
		if err != nil {
			return false, top, err
		}
		if !strings.HasPrefix(string(b), name+" claimed by ") {
			f.logJunk(name, "an entry no claim wrote")
			continue
		}
		ours := strings.Contains(string(b), earlierMark)
		earlier = earlier || !ours
		if n > top.n {
			top = earlierEntry{n: n, ours: ours}
		}
	}
	return earlier, top, nil
}

// pruneEarlierFormat removes this version's earlier-format entries more than earlierEntryKeep
// below epoch. Failures are harmless.
func (f *Fence) pruneEarlierFormat(epoch int32) {
	names, err := f.fs.ReadDirNames(f.dir)
	if err != nil {
		return
	}
	for _, name := range names {
		n, ok := parseDecimal(name)
		if !ok || n >= int64(epoch)-earlierEntryKeep {
			continue
		}
		if b, err := readPrefix(f.fs, filepath.Join(f.dir, name), 256); err == nil && strings.Contains(string(b), earlierMark) {
			_ = f.fs.Remove(filepath.Join(f.dir, name))
		}
	}
}

// checkEarlierFormat fails a holder of epoch when a number above it is in the directory: an
// earlier-version broker claimed after it. Only names are read (a numbered name above the
// epoch that no claim wrote fences too: the safe direction).
func (f *Fence) checkEarlierFormat(epoch int32) error {
	names, err := f.fs.ReadDirNames(f.dir)
	if err != nil {
		return storageErr("check fence", err)
	}
	for _, name := range names {
		if n, ok := parseDecimal(name); ok && n > int64(epoch) {
			return &FencedError{Epoch: epoch, Fence: clampEpoch(n)}
		}
	}
	return nil
}

// clampEpoch maps an entry beyond int32 (never written by a claim) to the largest epoch,
// which fences every writer: the safe direction.
func clampEpoch(v int64) int32 {
	return int32(min(v, math.MaxInt32))
}
