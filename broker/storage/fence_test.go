package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

func dirListing(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b := []byte(nil)
		if !info.IsDir() {
			if b, err = os.ReadFile(p); err != nil {
				return err
			}
		}
		out = append(out, p+" "+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFenceClaimAtOrBelowTheFenceIsRefusedAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	f, err := OpenFence(OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, _ := f.Epoch(); e != -1 {
		t.Fatalf("a new fence holds %d, want -1", e)
	}
	if err := f.Claim(5); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)
	for _, e := range []int32{0, 4, 5} {
		err := f.Claim(e)
		var fe *FencedError
		if !errors.As(err, &fe) || fe.Fence != 5 || fe.Epoch != e {
			t.Fatalf("claim %d over fence 5: %v, want a FencedError", e, err)
		}
	}
	if after := dirListing(t, dir); !slices.Equal(before, after) {
		t.Fatalf("a refused claim changed the fence directory:\nbefore %v\nafter  %v", before, after)
	}
	if err := f.Check(5); err != nil {
		t.Fatalf("the holder's check: %v", err)
	}
	if err := f.Claim(6); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(5); !errors.Is(err, ErrFenced) {
		t.Fatalf("check of 5 after 6 claimed: %v, want ErrFenced", err)
	}
}

func TestFencePruningNeverChangesTheValue(t *testing.T) {
	dir := t.TempDir()
	f, _ := OpenFence(OSFS{}, dir)
	for e := int32(1); e <= 20; e++ {
		if err := f.Claim(e); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.Epoch(); got != e {
			t.Fatalf("after claiming %d the fence holds %d", e, got)
		}
	}
	names, _ := OSFS{}.ReadDirNames(dir)
	if len(names) != fenceKeep+1 {
		t.Fatalf("%d entries left after pruning, want %d: %v", len(names), fenceKeep+1, names)
	}
	// A claimer working from an old listing re-creates a pruned entry: it must lose.
	c := claimDir{fs: OSFS{}, dir: dir, keep: fenceKeep}
	if err := os.WriteFile(filepath.Join(dir, "3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if v, _ := c.value(); v != 20 {
		t.Fatalf("value %d after a stale entry appeared, want 20", v)
	}
}

// claimEvent is one outcome in a concurrent claim run, with monotonic clock readings.
type claimEvent struct {
	kind  string // "won" (claim returned success at t) or "check" (a Check of epoch began at t and passed)
	epoch int32
	t     int64
}

// verifyClaims checks the fence's two promises over a set of concurrent claimers: no epoch
// is won twice, the fence ends at the largest epoch won, and no check of an epoch passed if it
// began after a larger epoch had been won (two writers never both able to acknowledge).
func verifyClaims(t *testing.T, events []claimEvent, final int32) {
	t.Helper()
	won := map[int32]int64{}
	maxWon := int32(-1)
	for _, e := range events {
		if e.kind != "won" {
			continue
		}
		if _, dup := won[e.epoch]; dup {
			t.Fatalf("epoch %d was won twice", e.epoch)
		}
		won[e.epoch] = e.t
		maxWon = max(maxWon, e.epoch)
	}
	if final != maxWon {
		t.Fatalf("fence ends at %d, the largest epoch won is %d", final, maxWon)
	}
	for _, c := range events {
		if c.kind != "check" {
			continue
		}
		for e, at := range won {
			if e > c.epoch && at < c.t {
				t.Fatalf("a check of epoch %d began after epoch %d was won and still passed", c.epoch, e)
			}
		}
	}
}

func TestFenceConcurrentClaimsFromGoroutinesNeverLowerItOrLeaveTwoHolders(t *testing.T) {
	for iter := range 20 {
		dir := t.TempDir()
		f, _ := OpenFence(OSFS{}, dir)
		var (
			mu     sync.Mutex
			events []claimEvent
			wg     sync.WaitGroup
			last   int32 = -1
		)
		for g := range 8 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(iter), uint64(g)))
				for range 30 {
					e := int32(rng.IntN(60))
					if f.Claim(e) != nil {
						continue
					}
					mu.Lock()
					events = append(events, claimEvent{"won", e, monotonicNow()})
					mu.Unlock()
					for range 3 {
						start := monotonicNow()
						if f.Check(e) == nil {
							mu.Lock()
							events = append(events, claimEvent{"check", e, start})
							mu.Unlock()
						}
					}
				}
			})
		}
		wg.Go(func() { // the fence, read at any time, never goes down
			for range 500 {
				v, err := f.Epoch()
				if err != nil {
					t.Error(err)
					return
				}
				if v < last {
					t.Errorf("fence went down from %d to %d", last, v)
					return
				}
				last = v
			}
		})
		wg.Wait()
		final, _ := f.Epoch()
		verifyClaims(t, events, final)
	}
}

func TestClaimOfAPrunedEntryIsNeverWon(t *testing.T) {
	dir := t.TempDir()
	c := claimDir{fs: OSFS{}, dir: dir, keep: producerIDsKeep}
	for n := int64(0); n < 100; n++ {
		if won, _, err := c.claim(n, producerIDsKeep); !won || err != nil {
			t.Fatalf("claim %d: %v %v", n, won, err)
		}
	}
	// Block 5 was handed out and then pruned; an allocator working from a listing taken
	// before block 6 existed tries to create it now.
	if _, err := os.Stat(filepath.Join(dir, "5")); !os.IsNotExist(err) {
		t.Fatalf("block 5 should have been pruned: %v", err)
	}
	stale := claimDir{fs: &staleListing{FS: OSFS{}, first: []string{"0", "1", "2", "3", "4"}}, dir: dir, keep: producerIDsKeep}
	if won, _, _ := stale.claim(5, producerIDsKeep); won {
		t.Fatal("a pruned block was won a second time")
	}
}

// staleListing answers the first listing with an old one, as a slow claimer's view; later
// listings are real.
type staleListing struct {
	FS
	first []string
}

func (s *staleListing) ReadDirNames(dir string) ([]string, error) {
	if first := s.first; first != nil {
		s.first = nil
		return first, nil
	}
	return s.FS.ReadDirNames(dir)
}

// TestAStrayFenceEntryWithAHugeNumberIsJunk: an entry in a fence directory that no claim
// wrote — a number beyond any epoch, or an empty file someone created — is junk: it is logged
// and ignored, and does not wedge the partition (before the fix 99999999999 read as the
// largest epoch and refused every takeover for good).
func TestAStrayFenceEntryWithAHugeNumberIsJunk(t *testing.T) {
	for _, name := range []string{"99999999999", "2147483646", "99999999999999999999"} {
		t.Run(name, func(t *testing.T) {
			dir := partitionDir(t)
			l1 := openLog(t, dir, 1, testConfig(), Options{})
			mustAppend(t, l1, makeBatch(plain(2, 1)), AcksAll)
			relinquish(t, l1)
			if err := os.WriteFile(filepath.Join(dir, fenceDirName, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			l2 := openLog(t, dir, 2, testConfig(), Options{})
			if off, _ := l2.Offsets(); off.LogEnd != 2 {
				t.Fatalf("after a stray fence entry the log ends at %d, want 2", off.LogEnd)
			}
			mustAppend(t, l2, makeBatch(plain(1, 2)), AcksAll)
		})
	}
}
