package txn

import (
	"flag"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

var interleaveSeed = flag.Int64("txn.seed", 0, "seed of TestTwoCoordinatorsInterleaved (0: from the time)")

// Two coordinators over the same files, the second claiming at a higher epoch while the
// first is busy: every answer of the first for an id, to a call that started after the
// second was seen holding that id's claim, is NOT_COORDINATOR; and a third coordinator loads
// exactly the second's state, so none of the first's late writes leaked.
func TestTwoCoordinatorsInterleaved(t *testing.T) {
	seed := *interleaveSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (rerun with -txn.seed=%d)", seed, seed)
	rng := rand.New(rand.NewSource(seed))
	h := newHarness(t)
	c1 := h.coordinator(t, 1)
	c2 := h.coordinator(t, 2)
	ids := []string{"x", "y", "z"}

	var seq atomic.Int64
	var claimedMu sync.Mutex
	claimed := map[string]int64{} // id → seq when c2 was first seen holding its claim
	type violation struct{ msg string }
	var violations []violation
	var vmu sync.Mutex

	run := func(c *Coordinator, r *rand.Rand, n int, second bool) {
		view := map[string]Producer{}
		for i := 0; i < n; i++ {
			id := ids[r.Intn(len(ids))]
			start := seq.Add(1)
			var code int16
			switch op := r.Intn(5); op {
			case 0:
				pid, epoch, c := c.InitProducerID(id, InitInput{TimeoutMs: 60000, ProducerID: NoProducerID, ProducerEpoch: NoEpoch, Version: 4})
				code = c
				if c == 0 {
					view[id] = Producer{ProducerID: pid, ProducerEpoch: epoch, Version: 3}
				}
			case 1, 2:
				code = c.AddPartitions(id, view[id], []TopicPartition{{"t", int32(r.Intn(4))}})
			case 3:
				code = c.EndTxn(id, view[id], r.Intn(2) == 0)
			case 4:
				_, code = c.Describe(id)
			}
			end := seq.Add(1)
			claimedMu.Lock()
			if second && holds(c, id) {
				if _, ok := claimed[id]; !ok {
					claimed[id] = end
				}
			}
			at, ok := claimed[id]
			claimedMu.Unlock()
			if !second && ok && start > at && code != kerr.NotCoordinator.Code {
				vmu.Lock()
				violations = append(violations, violation{fmt.Sprintf("deposed coordinator answered %v for %s", kerr.ErrorForCode(code), id)})
				vmu.Unlock()
			}
		}
	}
	r1 := rand.New(rand.NewSource(rng.Int63()))
	r2 := rand.New(rand.NewSource(rng.Int63()))
	delay := rng.Intn(30)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); run(c1, r1, 60, false) }()
	go func() {
		defer wg.Done()
		for seq.Load() < int64(2*delay) {
			time.Sleep(50 * time.Microsecond)
		}
		run(c2, r2, 60, true)
	}()
	wg.Wait()
	for _, v := range violations {
		t.Error(v.msg)
	}
	c1.Close()
	c2.Close()

	// The truth: c2's state for the ids it claimed; c1's for the others.
	want := map[string]Txn{}
	for _, c := range []*Coordinator{c1, c2} {
		for id, e := range c.entries() {
			e.mu.Lock()
			if !e.gone && e.found {
				want[id] = e.t
			}
			e.mu.Unlock()
		}
	}
	h.markers.setAnswer(nil)
	c3 := h.coordinator(t, 3)
	for _, id := range ids {
		got, code := c3.Describe(id)
		w, ok := want[id]
		if !ok || w.State == Dead {
			if code != kerr.TransactionalIDNotFound.Code {
				t.Errorf("%s: the third coordinator found %+v, want none", id, got)
			}
			continue
		}
		if code != 0 || !reflect.DeepEqual(got, w) {
			t.Errorf("%s: the third coordinator loaded %+v (%v), want %+v", id, got, kerr.ErrorForCode(code), w)
		}
	}
}

// holds reports whether c has claimed id (an answer about an id with no files claims nothing).
func holds(c *Coordinator, id string) bool {
	c.mu.Lock()
	e, ok := c.ids[id]
	c.mu.Unlock()
	if !ok {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return !e.gone && e.s != nil
}
