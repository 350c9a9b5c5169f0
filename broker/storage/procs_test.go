package storage

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func init() {
	childRoles["claim"] = childClaim
	childRoles["pids"] = childProducerIDs
}

// childClaim claims random epochs of the fence in $DIR and prints what it won and which of
// its checks passed, with CLOCK_MONOTONIC times.
func childClaim() error {
	f, err := OpenFence(OSFS{}, os.Getenv("DIR"))
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseUint(os.Getenv("SEED"), 10, 64)
	rng := rand.New(rand.NewPCG(seed, 1))
	w := bufio.NewWriter(os.Stdout)
	defer func() { _ = w.Flush() }()
	for range 40 {
		e := int32(rng.IntN(100))
		if err := f.Claim(e); err != nil {
			if !isErr(err, ErrFenced) {
				return err
			}
			continue
		}
		fmt.Fprintf(w, "won %d %d\n", e, monotonicNow())
		for range 3 {
			start := monotonicNow()
			if f.Check(e) == nil {
				fmt.Fprintf(w, "check %d %d\n", e, start)
			}
		}
	}
	return nil
}

// childProducerIDs allocates $N producer ids from $DIR and prints them.
func childProducerIDs() error {
	p, err := OpenProducerIDs(OSFS{}, os.Getenv("DIR"), 7)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(os.Getenv("N"))
	w := bufio.NewWriter(os.Stdout)
	defer func() { _ = w.Flush() }()
	for range n {
		id, err := p.Next()
		if err != nil {
			return err
		}
		fmt.Fprintln(w, id)
	}
	return nil
}

// runChildren runs n copies of the test binary in role, concurrently, and returns each one's
// stdout lines.
func runChildren(t *testing.T, role string, n int, env func(i int) []string) [][]string {
	t.Helper()
	out := make([][]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(append(os.Environ(), childEnv+"="+role), env(i)...)
			cmd.Stderr = os.Stderr
			b, err := cmd.Output()
			if err != nil {
				t.Errorf("child %d: %v", i, err)
				return
			}
			out[i] = strings.Split(strings.TrimSpace(string(b)), "\n")
		})
	}
	wg.Wait()
	return out
}

func TestFenceConcurrentClaimsFromProcessesNeverLowerItOrLeaveTwoHolders(t *testing.T) {
	for iter := range 3 {
		dir := t.TempDir()
		outs := runChildren(t, "claim", 4, func(i int) []string {
			return []string{"DIR=" + dir, "SEED=" + strconv.Itoa(iter*10+i)}
		})
		var events []claimEvent
		for _, lines := range outs {
			for _, line := range lines {
				if line == "" {
					continue
				}
				var e claimEvent
				if _, err := fmt.Sscanf(line, "%s %d %d", &e.kind, &e.epoch, &e.t); err != nil {
					t.Fatalf("child line %q: %v", line, err)
				}
				events = append(events, e)
			}
		}
		f, _ := OpenFence(OSFS{}, dir)
		final, _ := f.Epoch()
		verifyClaims(t, events, final)
	}
}

func TestProducerIDsAreNeverHandedOutTwiceByConcurrentAllocators(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	var mu sync.Mutex
	add := func(id int64) {
		mu.Lock()
		defer mu.Unlock()
		if seen[id] {
			t.Errorf("producer id %d handed out twice", id)
		}
		seen[id] = true
	}
	var wg sync.WaitGroup
	for range 4 { // allocators in this process (each its own ProducerIDs, as separate brokers)
		wg.Go(func() {
			p, err := OpenProducerIDs(OSFS{}, dir, 7)
			if err != nil {
				t.Error(err)
				return
			}
			for range 100 {
				id, err := p.Next()
				if err != nil {
					t.Error(err)
					return
				}
				add(id)
			}
		})
	}
	var outs [][]string
	wg.Go(func() {
		outs = runChildren(t, "pids", 3, func(int) []string { return []string{"DIR=" + dir, "N=100"} })
	})
	wg.Wait()
	for _, lines := range outs {
		for _, line := range lines {
			id, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				t.Fatalf("child line %q", line)
			}
			add(id)
		}
	}
	if len(seen) != 700 {
		t.Fatalf("%d distinct ids, want 700", len(seen))
	}
	// A restarted allocator continues past every block claimed so far.
	p, _ := OpenProducerIDs(OSFS{}, dir, 7)
	id, _ := p.Next()
	for old := range seen {
		if old >= id {
			t.Fatalf("after a restart id %d was handed out again (or below an old one, %d)", id, old)
		}
	}
}

// TestAStrayProducerIDEntryWithAHugeNumberIsJunk: a block entry no allocator wrote (an empty
// file, or a number whose block would overflow the id space) is junk: logged, ignored, and
// InitProducerId keeps working (before the fix an entry at the top of int64 made every claim
// fail).
func TestAStrayProducerIDEntryWithAHugeNumberIsJunk(t *testing.T) {
	for _, name := range []string{"9223372036854775807", "9223372036854775", "4000000000000"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			p, _ := OpenProducerIDs(OSFS{}, dir, 1000)
			first, err := p.Next()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			p2, _ := OpenProducerIDs(OSFS{}, dir, 1000)
			id, err := p2.Next()
			if err != nil {
				t.Fatalf("allocating after a stray entry %s: %v", name, err)
			}
			if id <= first || id > 1<<40 {
				t.Fatalf("allocated %d after %d: the stray entry %s was taken for a block", id, first, name)
			}
		})
	}
}
