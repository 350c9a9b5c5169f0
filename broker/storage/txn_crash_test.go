package storage

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

func init() { childRoles["txn"] = childTxn }

// childTxn takes over $DIR at $EPOCH and runs transactions from four producers (one to four
// transactional batches, then a COMMIT or ABORT marker, acks=all) until it is killed,
// printing "mark <offset>" for every acknowledged marker. Markers carry the current time: an
// old timestamp would let producer.id.expiration.ms forget the producer (and its coordinator
// epoch) at the next roll or takeover, as Apache does.
func childTxn() error {
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
			pid := int64(epoch)*100 + int64(p)
			seq := int32(0)
			for n := 0; ; n++ {
				for range 1 + n%4 {
					b := makeBatch(txnal(pid, 0, seq, 1+n%3))
					seq += int32(1 + n%3)
					if _, err := l.Append(context.Background(), b, AcksAll); err != nil {
						errs <- err
						return
					}
				}
				res, err := l.AppendMarker(context.Background(), Marker{ProducerID: pid, Commit: n%2 == 0, CoordinatorEpoch: int32(n), TimestampMs: time.Now().UnixMilli()}, AcksAll)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				_, err = fmt.Fprintf(os.Stdout, "mark %d\n", res.BaseOffset)
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

// TestOpenTransactionsSurviveSIGKILL SIGKILLs a process running transactions at random
// moments (mid-append, mid-marker, mid-roll and its snapshot) many times; after every
// recovery the producer state's open transactions and coordinator epochs, the LSO and the
// aborted-transaction index must be exactly what the recovered log itself says (a full walk
// of its batches), and every acknowledged marker must be in it.
func TestOpenTransactionsSurviveSIGKILL(t *testing.T) {
	iterations := 12
	if testing.Short() {
		iterations = 4
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	dir := partitionDir(t)
	var acked []int64
	epoch := int32(1)
	checked, aborts := 0, 0
	for i := range iterations {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=txn", "DIR="+dir, "EPOCH="+strconv.Itoa(int(epoch)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan []int64)
		go func() {
			var got []int64
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var off int64
				if n, _ := fmt.Sscanf(sc.Text(), "mark %d", &off); n == 1 {
					got = append(got, off)
				}
			}
			done <- got
		}()
		time.Sleep(time.Duration(20_000+rng.IntN(150_000)) * time.Microsecond)
		_ = cmd.Process.Kill()
		acked = append(acked, <-done...)
		err = cmd.Wait()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
			t.Fatalf("child %d ended by itself (%v) instead of being killed: %s", i, err, stderr.String())
		}
		epoch++

		l := openLog(t, dir, epoch, crashConfig(), Options{})
		epoch++
		got := batchesByOffset(t, readAll(t, l))
		offs := slices.Sorted(func(yield func(int64) bool) {
			for o := range got {
				if !yield(o) {
					return
				}
			}
		})
		open, coord := map[int64]int64{}, map[int64]int32{}
		walk := newProducerState() // the index a full scan of the recovered log builds
		for _, o := range offs {
			h := parseHeader(got[o])
			if h.Attributes&attrControl != 0 {
				if err := parseControl(&h, got[o][batchHeaderSize:]); err != nil {
					t.Fatal(err)
				}
			}
			if h.idempotent() {
				walk.apply(h)
			}
			switch {
			case h.Attributes&attrControl != 0:
				if err := parseControl(&h, got[o][batchHeaderSize:]); err != nil {
					t.Fatal(err)
				}
				delete(open, h.ProducerID)
				coord[h.ProducerID] = h.ctl.coordEpoch
			case h.Attributes&attrTransactional != 0:
				if _, ok := open[h.ProducerID]; !ok {
					open[h.ProducerID] = o
				}
			}
		}
		for _, m := range acked {
			if b, ok := got[m]; !ok || parseHeader(b).Attributes&attrControl == 0 {
				t.Fatalf("acknowledged marker at %d is not in the recovered log (seed %d)", m, seed)
			}
		}
		l.mu.Lock()
		for pid, e := range l.producers.m {
			want, isOpen := open[pid]
			if !isOpen {
				want = -1
			}
			if e.txnFirst != want {
				t.Errorf("producer %d: recovered open transaction at %d, the log says %d (seed %d)", pid, e.txnFirst, want, seed)
			}
			if c, ok := coord[pid]; ok && e.coordEpoch != c {
				t.Errorf("producer %d: recovered coordinator epoch %d, the log says %d (seed %d)", pid, e.coordEpoch, c, seed)
			}
		}
		for pid := range open {
			if l.producers.m[pid] == nil {
				t.Errorf("producer %d with an open transaction was not recovered (seed %d)", pid, seed)
			}
		}
		if !slices.Equal(l.producers.aborted, walk.aborted) {
			t.Errorf("recovered aborted-transaction index\n%+v\nthe log says\n%+v (seed %d)", l.producers.aborted, walk.aborted, seed)
		}
		aborts += len(walk.aborted)
		l.mu.Unlock()
		o, _ := l.Offsets()
		wantLSO := o.HighWatermark
		for _, f := range open {
			wantLSO = min(wantLSO, f)
		}
		if got := lso(l); got != wantLSO {
			t.Fatalf("recovered LSO %d, the log says %d (seed %d)", got, wantLSO, seed)
		}
		checked += len(open)
		if rng.IntN(2) == 0 {
			relinquish(t, l)
		} else {
			crash(t, l)
		}
	}
	if len(acked) == 0 || checked == 0 || aborts == 0 {
		t.Fatalf("nothing checked: %d markers acknowledged, %d open transactions recovered, %d aborted-index entries compared", len(acked), checked, aborts)
	}
	t.Logf("%d markers acknowledged and found, %d open transactions recovered", len(acked), checked)
}
