package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"
)

func init() { childRoles["append"] = childAppend }

func crashConfig() Config {
	cfg := testConfig()
	cfg.SegmentBytes = 32 << 10 // rolls happen, and get killed too
	cfg.IndexIntervalBytes = 512
	return cfg
}

// crashBatch is the batch producer p of the child at epoch sends as its seq-th; the parent
// rebuilds it to check the exact bytes.
func crashBatch(epoch int32, p, seq int) []byte {
	return makeBatch(batchSpec{
		records: 1 + seq%5, valueSize: 100 + seq*37%900, seed: byte(int(epoch)*7 + p*13 + seq),
		baseTs: 1_700_000_000_000 + int64(seq), tsStep: 1,
		pid: int64(epoch)*100 + int64(p), pepoch: 0, seq: firstSequence(seq),
	})
}

// firstSequence is the producer sequence of the seq-th batch: batch k holds 1 + k%5 records.
func firstSequence(seq int) int32 {
	r := seq % 5
	return int32(seq/5*15 + r*(r+1)/2)
}

// childAppend takes over $DIR at $EPOCH and appends with acks=all from four producers until
// it is killed, printing "ack <offset> <epoch> <producer> <seq>" for every acknowledgement.
func childAppend() error {
	epoch, _ := strconv.Atoi(os.Getenv("EPOCH"))
	l, err := Open(os.Getenv("DIR"), crashConfig(), Options{})
	if err != nil {
		return err
	}
	if err := l.Takeover(context.Background(), int32(epoch)); err != nil {
		return err
	}
	var mu sync.Mutex
	errs := make(chan error, 4)
	for p := range 4 {
		go func() {
			for seq := 0; ; seq++ {
				res, err := l.Append(context.Background(), crashBatch(int32(epoch), p, seq), AcksAll)
				if err != nil {
					errs <- err
					return
				}
				line := fmt.Sprintf("ack %d %d %d %d\n", res.BaseOffset, epoch, p, seq)
				mu.Lock()
				_, err = os.Stdout.WriteString(line) // one write(2) per line: never torn in the pipe
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	return <-errs
}

type crashAck struct {
	epoch  int32
	p, seq int
}

// TestAcknowledgedAppendsSurviveSIGKILL re-executes the test binary as a producer process,
// SIGKILLs it at a random moment (during its takeover, mid-append, mid-roll), many times over,
// with recoveries in between; every offset any child reported acknowledged must be present
// with its exact bytes.
func TestAcknowledgedAppendsSurviveSIGKILL(t *testing.T) {
	iterations := 20
	if testing.Short() {
		iterations = 6
	}
	if s := os.Getenv("STORAGE_CRASH_ITERATIONS"); s != "" {
		iterations, _ = strconv.Atoi(s)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := partitionDir(t)
	acked := map[int64]crashAck{}
	epoch := int32(1)
	verify := func(stopHow int) {
		l := openLog(t, dir, epoch, crashConfig(), Options{})
		epoch++
		got := batchesByOffset(t, readAll(t, l))
		for off, a := range acked {
			want := stored(crashBatch(a.epoch, a.p, a.seq), off, a.epoch)
			if !bytes.Equal(got[off], want) {
				t.Fatalf("offset %d, acknowledged by the child at epoch %d, is missing or different after recovery (seed %d)", off, a.epoch, seed)
			}
		}
		if stopHow == 0 {
			relinquish(t, l)
		} else {
			crash(t, l)
		}
	}
	kills := 0
	for i := range iterations {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=append", "DIR="+dir, "EPOCH="+strconv.Itoa(int(epoch)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan []crashAck)
		go func() {
			var got []crashAck
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var off int64
				var a crashAck
				if n, _ := fmt.Sscanf(sc.Text(), "ack %d %d %d %d", &off, &a.epoch, &a.p, &a.seq); n == 4 {
					got = append(got, a)
					if old, dup := acked[off]; dup && old != a {
						t.Errorf("offset %d acknowledged twice: %+v, then %+v", off, old, a)
					}
					acked[off] = a // read only after this goroutine ends
				}
			}
			lines <- got
		}()
		time.Sleep(time.Duration(rng.IntN(150_000)) * time.Microsecond)
		_ = cmd.Process.Kill() // SIGKILL
		n := len(<-lines)
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
			t.Fatalf("child %d ended by itself (%v) instead of being killed: %s", i, err, stderr.String())
		}
		kills++
		t.Logf("child at epoch %d killed after %d acknowledgements", epoch, n)
		epoch++
		if i == iterations-1 || rng.IntN(3) == 0 {
			verify(rng.IntN(2))
		}
	}
	if len(acked) == 0 {
		t.Fatal("no child acknowledged anything: the test checked nothing")
	}
	t.Logf("%d kills, %d acknowledged batches verified", kills, len(acked))
}
