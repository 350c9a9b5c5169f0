package storage

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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

func TestFenceValueFollowsEveryClaimAndIgnoresOldFormatStragglers(t *testing.T) {
	dir := t.TempDir()
	f, _ := OpenFence(OSFS{}, dir)
	for e := int32(1); e <= 20; e += 1 + e%3 { // epochs with gaps: 1, 3, 4, 6, 7, ..., 19
		if err := f.Claim(e); err != nil {
			t.Fatal(err)
		}
		if got, _ := f.Epoch(); got != e {
			t.Fatalf("after claiming %d the fence holds %d", e, got)
		}
	}
	if err := f.Claim(20); err != nil {
		t.Fatal(err)
	}
	// An entry of the earlier format appearing now counts for nothing: the chain decides.
	if err := os.WriteFile(filepath.Join(dir, "3"), []byte("3 claimed by someone pid 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, _ := OpenFence(OSFS{}, dir)
	if v, _ := other.Epoch(); v != 20 {
		t.Fatalf("value %d after an old-format entry appeared, want 20", v)
	}
}

func TestAFenceOfTheEarlierFormatSeedsTheChain(t *testing.T) {
	dir := t.TempDir()
	for _, e := range []string{"4", "5", "6"} {
		if err := os.WriteFile(filepath.Join(dir, e), []byte(e+" claimed by old pid 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, _ := OpenFence(OSFS{}, dir)
	if v, _ := f.Epoch(); v != 6 {
		t.Fatalf("a fence of the earlier format at 6 reads %d", v)
	}
	if err := f.Claim(6); !errors.Is(err, ErrFenced) {
		t.Fatalf("claim 6 over an old-format fence at 6: %v, want ErrFenced", err)
	}
	if err := f.Claim(7); err != nil {
		t.Fatal(err)
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
	if final < maxWon {
		// (a claim that failed after it was published may end the fence above every won one)
		t.Fatalf("fence ends at %d, below the largest epoch won, %d", final, maxWon)
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
		raceClaims(t, iter, f, func(int) *Fence { return f })
	}
}

// TestFenceClaimsFailingAtRandomStepsNeverLeaveTwoHolders: the same race, each claimer on a
// file system of its own that fails one chain call in twelve with EIO — a claim may fail at any
// step, published or not, superseding some claims below it or none. However they fail, no
// check passes after a higher epoch was won, and the fence never goes down.
func TestFenceClaimsFailingAtRandomStepsNeverLeaveTwoHolders(t *testing.T) {
	for iter := range 20 {
		dir := t.TempDir()
		f, _ := OpenFence(OSFS{}, dir)
		raceClaims(t, iter, f, func(g int) *Fence {
			var mu sync.Mutex
			var armed atomic.Bool
			rng := rand.New(rand.NewPCG(uint64(iter), uint64(100+g)))
			claimer, err := OpenFence(FaultFS{FS: OSFS{}, Fault: func(_ Op, path string) error {
				if _, legacy := parseDecimal(filepath.Base(path)); legacy {
					// (an earlier-format entry whose write fails is removed again, and the
					// fence's value of a chain without claims, read meanwhile, goes down
					// with it: the chain is what this test is about)
					return nil
				}
				mu.Lock()
				defer mu.Unlock()
				if armed.Load() && rng.IntN(12) == 0 {
					return syscall.EIO
				}
				return nil
			}}, dir)
			if err != nil {
				t.Fatal(err)
			}
			armed.Store(true)
			return claimer
		})
	}
}

// raceClaims runs 8 goroutines claiming random epochs on the fences fenceFor gives them and
// checking every one they won after each attempt, while the fence is read through f, and
// verifies the history.
func raceClaims(t *testing.T, iter int, f *Fence, fenceFor func(g int) *Fence) {
	t.Helper()
	var (
		mu     sync.Mutex
		events []claimEvent
		wg     sync.WaitGroup
		last   int32 = -1
	)
	for g := range 8 {
		claimer := fenceFor(g)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(iter), uint64(g)))
			var held []int32 // every epoch this goroutine won: each is checked again later
			for range 30 {
				if e := int32(rng.IntN(60)); claimer.Claim(e) == nil {
					mu.Lock()
					events = append(events, claimEvent{"won", e, monotonicNow()})
					mu.Unlock()
					held = append(held, e)
				}
				for _, e := range held {
					start := monotonicNow()
					if claimer.Check(e) == nil {
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

// TestAClaimerWithAStaleListingNeverWinsBelowTheNewestClaim: the listing only tells a
// claimer where to start walking the chain; a listing from long ago makes it walk further,
// never publish below the newest claim or win over a higher epoch.
func TestAClaimerWithAStaleListingNeverWinsBelowTheNewestClaim(t *testing.T) {
	dir := t.TempDir()
	f, _ := OpenFence(OSFS{}, dir)
	for e := int32(1); e <= 10; e++ {
		if err := f.Claim(e); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := OSFS{}.ReadDirNames(dir)
	for e := int32(11); e <= 30; e++ {
		if err := f.Claim(e); err != nil {
			t.Fatal(err)
		}
	}
	keep := slices.DeleteFunc(slices.Clone(old), func(n string) bool { c, ok := parseClaimName(n); return ok && c > 4 })
	for _, tc := range []struct {
		epoch int32
		won   bool
	}{{25, false}, {30, false}, {31, true}} {
		stale, _ := OpenFence(&staleListing{FS: OSFS{}, names: keep}, dir)
		err := stale.Claim(tc.epoch)
		if tc.won != (err == nil) {
			t.Fatalf("claim %d from a listing that shows claims up to 4: %v", tc.epoch, err)
		}
	}
	if err := f.Check(30); !errors.Is(err, ErrFenced) {
		t.Fatalf("the holder of 30 after 31 claimed: %v, want ErrFenced", err)
	}
	if v, _ := f.Epoch(); v != 31 {
		t.Fatalf("fence at %d, want 31", v)
	}
}

// TestClaimsReachesEveryClaimByNameWhateverTheListingShows: Claims lists every epoch claimed,
// newest first, from a listing that shows only the first few claims (or none), skipping junk,
// and ends with the largest entry of the earlier format the chain was seeded from when the
// listing shows it; a visit that returns false stops it.
func TestClaimsReachesEveryClaimByNameWhateverTheListingShows(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "3"), []byte("3 claimed by old pid 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, _ := OpenFence(OSFS{}, dir)
	var want []int32
	for e := int32(4); e <= 40; e += 3 {
		if err := f.Claim(e); err != nil {
			t.Fatal(err)
		}
		want = append([]int32{e}, want...)
	}
	if err := os.WriteFile(filepath.Join(dir, claimName(13)), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Claim(43); err != nil { // claim 14, above the junk
		t.Fatal(err)
	}
	want = append([]int32{43}, want...)
	all, _ := OSFS{}.ReadDirNames(dir)
	firstFew := slices.DeleteFunc(slices.Clone(all), func(n string) bool { c, ok := parseClaimName(n); return ok && c > 2 })
	for _, listed := range [][]string{all, firstFew, nil} {
		g, _ := OpenFence(&staleListing{FS: OSFS{}, names: listed}, dir)
		var got []int32
		if err := g.Claims(func(e int32) bool { got = append(got, e); return true }); err != nil {
			t.Fatal(err)
		}
		w := want
		if slices.Contains(listed, "3") { // the earlier format is known only to a listing
			w = append(slices.Clone(want), 3)
		}
		if !slices.Equal(got, w) {
			t.Fatalf("claims from a listing of %d names: %v, want %v", len(listed), got, w)
		}
	}
	var got []int32
	_ = f.Claims(func(e int32) bool { got = append(got, e); return len(got) < 2 })
	if !slices.Equal(got, want[:2]) {
		t.Fatalf("a visit that stops after two: %v", got)
	}
}

// staleListing answers every listing with the same old names, as a client whose directory
// cache never refreshes; opens by name are real.
type staleListing struct {
	FS
	names []string
}

func (s *staleListing) ReadDirNames(string) ([]string, error) { return slices.Clone(s.names), nil }

// TestAClaimerThatDiedBeforeSupersedingLeavesNoSecondHolder: a claimer that published its claim
// and died before writing the notice of the claim below it leaves that holder holding; the next
// claimer must supersede both — every claim below it that still holds — or the old holder and
// the new one would both pass their checks.
func TestAClaimerThatDiedBeforeSupersedingLeavesNoSecondHolder(t *testing.T) {
	dir := t.TempDir()
	holder, _ := OpenFence(OSFS{}, dir)
	if err := holder.Claim(5); err != nil {
		t.Fatal(err)
	}
	var published atomic.Bool
	dying, _ := OpenFence(FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op == OpLink && strings.HasSuffix(path, claimSuffix) {
			published.Store(true)
		}
		if published.Load() && op == OpOpen && strings.HasSuffix(path, noticeSuffix) {
			return syscall.EIO // dies reading the holder's notice: published, superseded nothing
		}
		return nil
	}}, dir)
	if err := dying.Claim(6); err == nil {
		t.Fatal("a claimer that could not supersede the holder won")
	}
	if err := holder.Check(5); err != nil {
		t.Fatalf("the holder after a claimer died half-way: %v, want it still holding", err)
	}
	claimOf7Supersedes5(t, dir, holder, "a claimer of 6 that died half-way")
}

// claimOf7Supersedes5 claims 7 on dir and requires that holder's claim of 5 no longer holds
// and the claim of 7 does; after says what happened to the claim of 6 between them.
func claimOf7Supersedes5(t *testing.T, dir string, holder *Fence, after string) {
	t.Helper()
	next, _ := OpenFence(OSFS{}, dir)
	if err := next.Claim(7); err != nil {
		t.Fatal(err)
	}
	if err := holder.Check(5); !errors.Is(err, ErrFenced) {
		t.Fatalf("the holder of 5 after %s and a won claim of 7: %v, want ErrFenced", after, err)
	}
	if err := next.Check(7); err != nil {
		t.Fatal(err)
	}
}

// TestAClaimerThatFailedAfterPublishingLeavesNoSecondHolder: a claimer's link lands but the
// directory sync after it fails (EIO), so its Claim fails with its claim published and nothing
// superseded. The next claimer must still supersede the holder below it. Before, the failed
// claimer removed its own notice as if it had never published; the next claimer read the
// missing notice as "superseded", stopped its walk there, and left the holder below passing
// its checks beside it — two holders, and a deposed leader acknowledging appends its
// successor never scanned (found by TestADeposedLeadersCleanerRacingTwoTakeovers).
func TestAClaimerThatFailedAfterPublishingLeavesNoSecondHolder(t *testing.T) {
	dir := t.TempDir()
	holder, _ := OpenFence(OSFS{}, dir)
	if err := holder.Claim(5); err != nil {
		t.Fatal(err)
	}
	var linked atomic.Bool
	failing, _ := OpenFence(FaultFS{FS: OSFS{}, Fault: func(op Op, path string) error {
		if op == OpLink && strings.HasSuffix(path, claimSuffix) {
			linked.Store(true)
			return nil
		}
		if linked.Load() && op == OpSyncDir {
			return syscall.EIO
		}
		return nil
	}}, dir)
	if err := failing.Claim(6); err == nil {
		t.Fatal("a claim whose directory sync failed won")
	}
	if notices, _ := filepath.Glob(filepath.Join(dir, "*"+noticeSuffix)); len(notices) != 2 {
		t.Fatalf("notices after the failed claim of 6: %v, want the holder's and the published claim's", notices)
	}
	claimOf7Supersedes5(t, dir, holder, "a claim of 6 that failed after publishing")
}

// TestASupersedeWalkGoesOnPastAMissingNotice: a claim whose notice cannot be found (removed,
// or hidden by a network file system's cached "no such file") is not known to be superseded,
// so the supersede walk does not stop there: it gives that claim a notice and goes on down to
// the holder. Only a notice that says "superseded" proves the claims below it are.
func TestASupersedeWalkGoesOnPastAMissingNotice(t *testing.T) {
	dir := t.TempDir()
	holder, _ := OpenFence(OSFS{}, dir)
	if err := holder.Claim(5); err != nil {
		t.Fatal(err)
	}
	middle, _ := OpenFence(OSFS{}, dir)
	if err := middle.Claim(6); err != nil {
		t.Fatal(err)
	}
	ref, _, _ := middle.claimPath(6)
	// Claim 6 superseded 5 as it won; make 5 hold again and hide 6's notice, as a claimer
	// that published and then failed before superseding anything leaves them.
	if err := os.Truncate(filepath.Join(dir, holder.held[5].id+noticeSuffix), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, ref.id+noticeSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := holder.Check(5); err != nil {
		t.Fatalf("setup: the holder of 5 does not hold again: %v", err)
	}
	claimOf7Supersedes5(t, dir, holder, "a claim of 6 whose notice is missing")
	if err := middle.Check(6); !errors.Is(err, ErrFenced) {
		t.Fatalf("claim 6 after claim 7: %v, want ErrFenced", err)
	}
}
