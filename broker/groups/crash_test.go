package groups

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv selects a child-process role when the test binary re-executes itself. The child
// does its work and exits; it never runs the tests.
const childEnv = "PADDOCK_GROUPS_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "commit" {
		if err := childCommit(); err != nil {
			fmt.Fprintf(os.Stderr, "child: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if loadFixtureDir != "" {
		_ = os.RemoveAll(loadFixtureDir)
	}
	os.Exit(code)
}

// childCommit coordinates every group at $EPOCH on $DIR and commits increasing offsets to
// $GROUPS groups (one goroutine each) until it is killed, printing "ack group partition value"
// only after each commit was acknowledged. With $META set, each commit carries that many bytes
// of metadata and the offsets file is compacted once it passes 16 KiB, so the kill may land
// in a compaction.
func childCommit() error {
	epoch, _ := strconv.Atoi(os.Getenv("EPOCH"))
	base, _ := strconv.ParseInt(os.Getenv("BASE"), 10, 64)
	n, _ := strconv.Atoi(os.Getenv("GROUPS"))
	meta, _ := strconv.Atoi(os.Getenv("META"))
	cfg := DefaultConfig()
	cfg.Dir, cfg.Topics, cfg.LoadWait = os.Getenv("DIR"), newTestTopics(), time.Minute
	if meta > 0 {
		cfg.compactMin = 16 << 10
	}
	c, err := New(cfg)
	if err != nil {
		return err
	}
	c.SetView(int32(epoch), allGroups)
	var out sync.Mutex
	var wg sync.WaitGroup
	for gi := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := "crash-" + strconv.Itoa(gi)
			for v := base; ; v++ {
				part := int32(v % 5)
				ok, err := commitWithMetadata(context.Background(), c, g, part, v, strings.Repeat("m", meta))
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					return
				}
				if ok {
					out.Lock()
					// One write per line: a kill leaves at most a partial last line.
					fmt.Fprintf(os.Stdout, "ack %s %d %d\n", g, part, v)
					out.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

// TestKill9DuringCommitsLosesNoAcknowledgedCommit runs a child coordinator that commits as
// fast as it can, SIGKILLs it at a random moment (during its takeover, mid-commit, mid-fsync,
// and — every other round, whose commits are large — mid-compaction), then takes the groups
// over at the next epoch and checks that every commit the child reported acknowledged is
// there. Rounds follow each other on one directory, so each child also recovers from the
// previous one's torn tail.
func TestKill9DuringCommitsLosesNoAcknowledgedCommit(t *testing.T) {
	dir := t.TempDir()
	const groups = 3
	rounds := 6
	for round := range rounds {
		epoch := int32(2*round + 1)
		// Every third child dies early, most likely during its takeover; the others some time
		// after their first acknowledged commit.
		early := round%3 == 0
		meta := 0
		if round%2 == 1 {
			meta = 4000
		}
		acks, total := runKilledChild(t, dir, epoch, int64(round)*1_000_000, groups, early, meta)

		// Take over at the next epoch, as the operator's view would after a crash.
		cfg := DefaultConfig()
		cfg.Dir, cfg.Topics, cfg.LoadWait = dir, newTestTopics(), time.Minute
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.SetView(epoch+1, allGroups)
		ctx := ctxT(t)
		for gi := range groups {
			g := "crash-" + strconv.Itoa(gi)
			got, code, err := committedOffsets(ctx, c, g)
			if err != nil || code != 0 {
				t.Fatalf("round %d: fetch %s: %v %s", round, g, err, codeName(code))
			}
			for p, v := range acks[g] {
				if got[p] < v {
					t.Fatalf("round %d: %s[%d] = %d after kill -9, but %d was acknowledged", round, g, p, got[p], v)
				}
			}
		}
		_ = c.Close()
		t.Logf("round %d: child at epoch %d killed (early %v, metadata %d bytes) after %d acknowledged commits; all present", round, epoch, early, meta, total)
	}
}

// runKilledChild starts the child and SIGKILLs it — within 50 ms of its start when early,
// else 0-150 ms after its first acknowledged commit — and returns, per group and partition,
// the highest value it reported acknowledged, and how many acknowledgements it reported.
func runKilledChild(t *testing.T, dir string, epoch int32, base int64, groups int, early bool, meta int) (map[string]map[int32]int64, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=commit", "DIR="+dir, "EPOCH="+strconv.Itoa(int(epoch)),
		"BASE="+strconv.FormatInt(base, 10), "GROUPS="+strconv.Itoa(groups), "META="+strconv.Itoa(meta))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acks := map[string]map[int32]int64{}
	total := 0
	read := make(chan struct{})
	first := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var g string
			var p int32
			var v int64
			if n, _ := fmt.Sscanf(sc.Text(), "ack %s %d %d", &g, &p, &v); n != 3 {
				continue
			}
			if acks[g] == nil {
				acks[g] = map[int32]int64{}
			}
			acks[g][p] = max(acks[g][p], v)
			if total++; total == 1 {
				close(first)
			}
		}
	}()
	if early {
		time.Sleep(time.Duration(rand.IntN(50_000)) * time.Microsecond)
	} else {
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Fatalf("the child acknowledged nothing in 10 s\n%s", stderr.String())
		}
		time.Sleep(time.Duration(rand.IntN(150_000)) * time.Microsecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-read
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, stderr.String())
	}
	return acks, total
}
