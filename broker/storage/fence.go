package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// claimDir is a grow-only set of numbered entries in one directory; its value is the largest
// entry. It is the only primitive the fence and the producer-id allocator need, and it works
// between processes (and brokers on a shared volume) with no lock service:
//
//   - an entry is created with O_CREATE|O_EXCL, so at most one claimer creates entry n while
//     it exists;
//   - the entry is fsynced and then its directory, so a claim that was acted on survives a crash;
//   - after creating n the claimer lists the directory again. For the fence it has won only if
//     n is still the largest entry: anyone who creates a larger entry later makes every later
//     read of the value larger than n, so the value never goes down and at most one claimer at
//     a time sees "the value is mine".
//
// Pruning deletes all but the keep largest entries below the value; it never changes the
// value. It could let a claimer working from an old listing re-create a pruned entry k — but
// pruning k needed keep+1 entries above k, and the largest keep+1 entries are never pruned,
// so from then on at least keep+1 entries above k exist forever. A claimer that finds at most
// keep entries above its new entry therefore knows the entry was never pruned, hence never
// created before: it is the only one ever to hold it. That is the producer-id allocator's
// (weaker) win condition; the fence's (n is the largest) implies it.
type claimDir struct {
	fs   FS
	dir  string
	keep int // entries kept below the value when pruning
}

// fenceKeep is how many entries below the fence's value pruning leaves, for people reading
// the directory to see the recent history of claims.
const fenceKeep = 3

// entries lists the numbered entries, ascending. Names that are not a non-negative decimal
// number (temporary files, editors' litter) are ignored.
func (c claimDir) entries() ([]int64, error) {
	names, err := c.fs.ReadDirNames(c.dir)
	if err != nil {
		return nil, err
	}
	out := make([]int64, 0, len(names))
	for _, name := range names {
		if n, ok := parseDecimal(name); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// value is the largest entry, or -1 when there is none.
func (c claimDir) value() (int64, error) {
	es, err := c.entries()
	if err != nil {
		return 0, err
	}
	if len(es) == 0 {
		return -1, nil
	}
	return es[len(es)-1], nil
}

// claim tries to create entry n. It returns won=false, with the value it saw, when the value
// was already ≥ n (nothing is written then), when another claimer created n, or when after
// creating n more than `above` entries lie above it (0 for the fence: n must be the value;
// at most c.keep for the allocator, see claimDir). A write error after the entry was created
// leaves the entry behind, but the caller must not act on it.
func (c claimDir) claim(n int64, above int) (won bool, value int64, err error) {
	if n < 0 {
		return false, -1, fmt.Errorf("claim %d: must not be negative", n)
	}
	cur, err := c.value()
	if err != nil {
		return false, 0, err
	}
	if cur >= n {
		return false, cur, nil
	}
	path := filepath.Join(c.dir, strconv.FormatInt(n, 10))
	f, err := c.fs.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		cur, err := c.value()
		return false, cur, err
	}
	if err != nil {
		return false, 0, err
	}
	host, _ := os.Hostname()
	note := fmt.Sprintf("%d claimed by %s pid %d\n", n, host, os.Getpid())
	if _, err := f.WriteAt([]byte(note), 0); err != nil {
		_ = f.Close()
		return false, 0, err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return false, 0, err
	}
	if err := f.Close(); err != nil {
		return false, 0, err
	}
	if err := c.fs.SyncDir(c.dir); err != nil {
		return false, 0, err
	}
	es, err := c.entries()
	if err != nil {
		return false, 0, err
	}
	top := es[len(es)-1] // n is in the listing, so it is not empty
	if i, found := slices.BinarySearch(es, n); !found || len(es)-1-i > above {
		// Claimers went higher while we were creating: we lost. Our entry is below the
		// value, so removing it changes nothing.
		_ = c.fs.Remove(path)
		return false, top, nil
	}
	c.prune(es)
	return true, n, nil
}

// prune removes all but the largest keep+1 entries. Failures are harmless (the entries only
// cost a name in a directory listing).
func (c claimDir) prune(ascending []int64) {
	if len(ascending) <= c.keep+1 {
		return
	}
	for _, n := range ascending[:len(ascending)-c.keep-1] {
		_ = c.fs.Remove(filepath.Join(c.dir, strconv.FormatInt(n, 10)))
	}
}

// parseDecimal accepts only canonical non-negative decimals ("0", "17"; not "017", "+1").
func parseDecimal(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// Fence is the monotonic epoch that says who may write a partition (or, for the group
// coordinator, a group): the highest epoch that has claimed it. It lives in a directory of
// exclusively created entries, one per claimed epoch, and its value is the largest entry (see
// docs/storage.md, "The fence"). A writer at epoch E claims E once, and before acknowledging
// anything it has made durable calls Check(E): if another writer has claimed a higher epoch,
// Check fails and the writer must stop. The value never goes down.
//
// A Fence holds no open files and no state besides its directory; it is safe for concurrent
// use, and several processes may use the same directory at once.
type Fence struct {
	c claimDir
}

// OpenFence opens (creating if needed) the fence kept in dir.
func OpenFence(fsys FS, dir string) (*Fence, error) {
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, storageErr("open fence", err)
	}
	return &Fence{c: claimDir{fs: fsys, dir: dir, keep: fenceKeep}}, nil
}

// Epoch reads the fence: the highest epoch claimed so far, or -1 if none was.
func (f *Fence) Epoch() (int32, error) {
	v, err := f.c.value()
	if err != nil {
		return 0, storageErr("read fence", err)
	}
	return clampEpoch(v), nil
}

// Claim makes epoch the fence's value. It fails with a *FencedError (errors.Is ErrFenced)
// when the fence already holds epoch or more — then it writes nothing — or when a concurrent
// claimer won. An epoch is claimed at most once: claiming the epoch the fence already holds
// is refused too.
func (f *Fence) Claim(epoch int32) error {
	if epoch < 0 {
		return fmt.Errorf("claim epoch %d: epochs are non-negative", epoch)
	}
	won, v, err := f.c.claim(int64(epoch), 0)
	if err != nil {
		return storageErr("claim fence", err)
	}
	if !won {
		return &FencedError{Epoch: epoch, Fence: clampEpoch(v)}
	}
	return nil
}

// Check re-reads the fence and returns nil only if it still holds exactly epoch: no other
// writer has claimed since. Call it after making data durable and before acknowledging it.
func (f *Fence) Check(epoch int32) error {
	v, err := f.Epoch()
	if err != nil {
		return err
	}
	if v != epoch {
		return &FencedError{Epoch: epoch, Fence: v}
	}
	return nil
}

// clampEpoch maps an entry beyond int32 (never written by us) to the largest epoch, which
// fences every writer: the safe direction.
func clampEpoch(v int64) int32 {
	if v > math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(v)
}
