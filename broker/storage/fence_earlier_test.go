package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// earlierVersion is the fence of the earlier version (paddock at 0f7cbc3, the 0.1.0 the
// upgrade scenarios start from) as it claims and checks: an entry "<E>" created exclusively,
// and a claim holds while its entry is the largest number in the directory's listing.
type earlierVersion struct {
	t   *testing.T
	dir string
}

func (e earlierVersion) value() int64 {
	names, err := OSFS{}.ReadDirNames(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	top := int64(-1)
	for _, name := range names {
		if n, ok := parseDecimal(name); ok && n > top {
			top = n
		}
	}
	return top
}

func (e earlierVersion) claim(epoch int64) bool {
	if e.value() >= epoch {
		return false
	}
	name := strconv.FormatInt(epoch, 10)
	if err := os.WriteFile(filepath.Join(e.dir, name), []byte(fmt.Sprintf("%s claimed by earlier pid 1\n", name)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return e.value() == epoch
}

func (e earlierVersion) holds(epoch int64) bool { return e.value() == epoch }

func fenceDir(t *testing.T) (string, *Fence) {
	dir := filepath.Join(t.TempDir(), "fence")
	f, err := OpenFence(OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, f
}

// TestAnEarlierVersionsWriterIsFencedByThisVersionsClaim: in a rolling upgrade a partition
// moves from a broker of the earlier version (epoch 1) to one of this version (epoch 2). The
// earlier writer checks its fence by listing for a larger number; before, this version's
// claim wrote only its chain claim, the earlier writer's checks kept passing and it
// acknowledged appends its successor had not scanned — lost (the upgrade scenario lost one).
func TestAnEarlierVersionsWriterIsFencedByThisVersionsClaim(t *testing.T) {
	dir, f := fenceDir(t)
	old := earlierVersion{t, dir}
	if !old.claim(1) {
		t.Fatal("the earlier version could not claim 1")
	}
	if err := f.Claim(2); err != nil {
		t.Fatal(err)
	}
	if old.holds(1) {
		t.Fatal("after this version claimed 2 the earlier version's writer at 1 still holds: it would acknowledge what epoch 2 never scanned")
	}
	if err := f.Check(2); err != nil {
		t.Fatalf("this version's check at 2: %v", err)
	}
}

// TestThisVersionsWriterIsFencedByAnEarlierVersionsClaim: the other direction of the same
// roll. The earlier version wrote this fence before; this version holds 2; a broker of the
// earlier version claims 3 the only way it can (an entry "3"). This version's check must fail,
// though no notice was written into its claim.
func TestThisVersionsWriterIsFencedByAnEarlierVersionsClaim(t *testing.T) {
	dir, f := fenceDir(t)
	old := earlierVersion{t, dir}
	if !old.claim(1) {
		t.Fatal("the earlier version could not claim 1")
	}
	if err := f.Claim(2); err != nil {
		t.Fatal(err)
	}
	if !old.claim(3) {
		t.Fatal("the earlier version could not claim 3 over this version's 2")
	}
	var fenced *FencedError
	if err := f.Check(2); !errors.As(err, &fenced) || fenced.Fence != 3 {
		t.Fatalf("this version's check at 2 after the earlier version claimed 3: %v, want fenced by 3", err)
	}
	// A Fence that did not make the claim (the group store opens its own) finds it the same.
	other, err := OpenFence(OSFS{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Check(2); !errors.As(err, &fenced) {
		t.Fatalf("another Fence's check at 2: %v, want fenced", err)
	}
}

// TestAnEarlierVersionsClaimAtOrAboveTheEpochRefusesTheClaim: this version's chain knows
// nothing of an earlier-version claim of 5; claiming 4 or 5 must be refused, not held beside it.
func TestAnEarlierVersionsClaimAtOrAboveTheEpochRefusesTheClaim(t *testing.T) {
	dir, f := fenceDir(t)
	old := earlierVersion{t, dir}
	if !old.claim(5) {
		t.Fatal("the earlier version could not claim 5")
	}
	for _, epoch := range []int32{4, 5} {
		if err := f.Claim(epoch); !errors.Is(err, ErrFenced) {
			t.Fatalf("claim %d under an earlier-version claim of 5: %v, want fenced", epoch, err)
		}
	}
	if err := f.Claim(6); err != nil {
		t.Fatalf("claim 6: %v", err)
	}
	if old.holds(5) {
		t.Fatal("the earlier version's 5 still holds after this version claimed 6")
	}
}

// TestAFenceTheEarlierVersionNeverWroteIsCheckedByNoticeAlone: with no earlier-version entry
// a check reads its notice and lists nothing (the entries this version writes for the earlier
// version are pruned to a few).
func TestAFenceTheEarlierVersionNeverWroteIsCheckedByNoticeAlone(t *testing.T) {
	dir, _ := fenceDir(t)
	fsys := &listingCounter{FS: OSFS{}}
	f, err := OpenFence(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	for epoch := int32(1); epoch <= 10; epoch++ {
		if err := f.Claim(epoch); err != nil {
			t.Fatal(err)
		}
	}
	before := fsys.listings
	for range 5 {
		if err := f.Check(10); err != nil {
			t.Fatal(err)
		}
	}
	if fsys.listings != before {
		t.Fatalf("5 checks listed the directory %d times, want none", fsys.listings-before)
	}
	n := 0
	names, _ := OSFS{}.ReadDirNames(dir)
	for _, name := range names {
		if _, ok := parseDecimal(name); ok {
			n++
		}
	}
	if n > earlierEntryKeep+1 {
		t.Fatalf("%d earlier-format entries after 10 claims, want at most %d", n, earlierEntryKeep+1)
	}
}

// listingCounter counts directory listings.
type listingCounter struct {
	FS
	listings int
}

func (c *listingCounter) ReadDirNames(dir string) ([]string, error) {
	c.listings++
	return c.FS.ReadDirNames(dir)
}
