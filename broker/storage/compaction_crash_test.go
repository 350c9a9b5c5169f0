package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func init() { childRoles["compact"] = childCompact }

func compactCrashConfig() Config {
	cfg := compactConfig()
	cfg.SegmentBytes = 8 << 10
	cfg.DeleteRetentionMs = 0 // tombstones go at the second pass: dropping them is killed too
	return cfg
}

// compactCrashKeys is the key space of the crash test: small, so most records are superseded
// and every pass removes many.
const compactCrashKeys = 40

// compactCrashValue is the value the child at epoch writes as its seq-th record of producer
// p: the parent rebuilds nothing, it compares what the child reported.
func compactCrashValue(epoch int32, p, seq int) []byte {
	if seq%11 == 10 {
		return nil // a tombstone now and then
	}
	return []byte(fmt.Sprintf("e%d-p%d-s%d", epoch, p, seq))
}

// childCompact takes over $DIR at $EPOCH, appends keyed records with acks=all from two
// producers, and cleans the log in a loop (every pass forced), until it is killed. It prints
// "ack <offset> <key> <value|-> " for every acknowledged record.
func childCompact() error {
	epoch, _ := strconv.Atoi(os.Getenv("EPOCH"))
	l, err := Open(os.Getenv("DIR"), compactCrashConfig(), Options{Cleaner: NewCleaner(CleanerConfig{DedupeBufferBytes: 24 * 64})})
	if err != nil {
		return err
	}
	if err := l.Takeover(context.Background(), int32(epoch)); err != nil {
		return err
	}
	var mu sync.Mutex
	errs := make(chan error, 3)
	for p := range 2 {
		go func() {
			rng := rand.New(rand.NewPCG(uint64(epoch), uint64(p)))
			for seq := 0; ; seq++ {
				key := []byte(fmt.Sprint("key-", rng.IntN(compactCrashKeys)))
				val := compactCrashValue(int32(epoch), p, seq)
				b := keyedBatch(nil, []kv{{key, val}}, -1, -1, -1, false, seq%5, time.Now().UnixMilli())
				res, err := l.Append(context.Background(), b, AcksAll)
				if err != nil {
					errs <- err
					return
				}
				shown := "-"
				if val != nil {
					shown = string(val)
				}
				line := fmt.Sprintf("ack %d %s %s\n", res.BaseOffset, key, shown)
				mu.Lock()
				_, err = os.Stdout.WriteString(line)
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	go func() {
		for {
			if _, err := l.Clean(context.Background()); err != nil {
				errs <- err
				return
			}
		}
	}()
	return <-errs
}

// TestAKilledCleanerLosesNoKeysLatestValue re-executes the test binary as a process that
// appends keyed records and cleans continuously, SIGKILLs it at random moments — mid-map,
// mid-copy, between the copies and their journal record, mid-swap — many times, with
// recoveries in between; after each recovery every key's latest acknowledged record is
// there with its value (or, for a tombstone, no older value of the key is).
func TestAKilledCleanerLosesNoKeysLatestValue(t *testing.T) {
	iterations := 16
	if testing.Short() {
		iterations = 5
	}
	if s := os.Getenv("STORAGE_CRASH_ITERATIONS"); s != "" {
		iterations, _ = strconv.Atoi(s)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := partitionDir(t)
	type ack struct {
		offset int64
		value  string // "-" for a tombstone
	}
	latest := map[string]ack{} // by key: the acknowledged record with the largest offset
	epoch := int32(1)
	verify := func() {
		l := openLog(t, dir, epoch, compactCrashConfig(), Options{})
		epoch++
		got, _ := readRecords(t, l)
		byKey := map[string]storedRecord{}
		for _, r := range got {
			if cur, ok := byKey[string(r.key)]; !ok || r.offset > cur.offset {
				byKey[string(r.key)] = r
			}
		}
		for key, a := range latest {
			r, ok := byKey[key]
			// A record after the last one the child reported may be there: it was durable
			// when the kill came, before its acknowledgement was printed.
			switch {
			case ok && r.offset > a.offset:
			case a.value == "-" && ok && r.value != nil:
				t.Fatalf("key %s: its tombstone at %d is gone and an older value (offset %d) reads again (seed %d)", key, a.offset, r.offset, seed)
			case a.value == "-":
			case !ok || r.offset != a.offset || string(r.value) != a.value:
				t.Fatalf("key %s: latest acknowledged record at %d (%s) is missing or different after recovery: %+v (seed %d)", key, a.offset, a.value, r, seed)
			}
		}
		relinquish(t, l)
	}
	kills := 0
	for i := range iterations {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=compact", "DIR="+dir, "EPOCH="+strconv.Itoa(int(epoch)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan int)
		go func() {
			n := 0
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var a ack
				var key string
				if k, _ := fmt.Sscanf(sc.Text(), "ack %d %s %s", &a.offset, &key, &a.value); k == 3 {
					n++
					if cur, ok := latest[key]; !ok || a.offset > cur.offset {
						latest[key] = a // read only after this goroutine ends
					}
				}
			}
			done <- n
		}()
		time.Sleep(time.Duration(200_000+rng.IntN(400_000)) * time.Microsecond)
		_ = cmd.Process.Kill() // SIGKILL
		n := <-done
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
			t.Fatalf("child %d ended by itself (%v) instead of being killed: %s", i, err, stderr.String())
		}
		kills++
		t.Logf("child at epoch %d killed after %d acknowledgements", epoch, n)
		epoch++
		if i == iterations-1 || rng.IntN(2) == 0 {
			verify()
		}
	}
	copies, _ := filepath.Glob(filepath.Join(dir, "*.c*.log"))
	if len(copies) == 0 {
		t.Fatal("no cleaned copy on the volume: the children never cleaned, the test checked nothing of the cleaner")
	}
	if len(latest) < compactCrashKeys/2 {
		t.Fatalf("only %d keys acknowledged: the test checked too little", len(latest))
	}
	t.Logf("%d kills, %d keys verified", kills, len(latest))
}
