package groups

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
)

// jitterFS delays every file operation by a random few microseconds, so the two coordinators'
// writes, fsyncs, claims and reads interleave differently on every run.
func jitterFS() storage.FS {
	return storage.FaultFS{FS: storage.OSFS{}, Fault: func(storage.Op, string) error {
		if d := rand.IntN(300); d > 150 {
			time.Sleep(time.Duration(d-150) * time.Microsecond)
		}
		return nil
	}}
}

type attempt struct {
	group      string
	part       int32
	value      int64
	start, end time.Time
	acked      bool
}

// simpleCommit commits one offset with generation -1 and reports whether it was acknowledged.
func simpleCommit(ctx context.Context, c *Coordinator, group string, part int32, value int64) (bool, error) {
	return commitWithMetadata(ctx, c, group, part, value, "")
}

func commitWithMetadata(ctx context.Context, c *Coordinator, group string, part int32, value int64, meta string) (bool, error) {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version, r.Group, r.Generation = 8, group, -1
	r.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "big", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: part, Offset: value, Metadata: &meta}}}}
	resp, err := c.OffsetCommit(ctx, r)
	if err != nil {
		return false, err
	}
	return resp.Topics[0].Partitions[0].ErrorCode == 0, nil
}

// committedOffsets is every offset of topic "big" group has, as c answers (code != 0: not
// served).
func committedOffsets(ctx context.Context, c *Coordinator, group string) (map[int32]int64, int16, error) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: group}}
	resp, err := c.OffsetFetch(ctx, r)
	if err != nil {
		return nil, 0, err
	}
	g := resp.Groups[0]
	out := map[int32]int64{}
	for _, t := range g.Topics {
		for _, p := range t.Partitions {
			if t.Topic == "big" {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, g.ErrorCode, nil
}

// The randomized takeover test: coordinator A (epoch 1) commits a stream of increasing
// offsets to three groups while coordinator B (epoch 2) takes the groups over on the same
// directory. Whatever the interleaving:
//   - no commit A acknowledged is missing after B loads (per partition, B's offset is at
//     least A's last acknowledged one — offsets only grow in the stream);
//   - nothing A attempts after B's takeover is acknowledged or ever visible, to B or to a
//     third coordinator C (epoch 3) that takes over from B;
//   - B's own acknowledged commits survive into C.
//
// Half of the runs compact the offsets file every few dozen commits, so A (deposed without
// knowing it) may be compacting its file while B claims and reads it, and B while C does.
func TestTwoCoordinatorsAtAdjacentEpochsUnderInterleavings(t *testing.T) {
	for i := range 8 {
		seed := rand.Uint64()
		compacting := i%2 == 1
		t.Run(fmt.Sprintf("%d/compacting=%v", seed, compacting), func(t *testing.T) { runTwoCoordinators(t, seed, compacting) })
	}
}

func runTwoCoordinators(t *testing.T, seed uint64, compacting bool) {
	rng := rand.New(rand.NewPCG(seed, 7))
	ctx := ctxT(t)
	cfg := DefaultConfig()
	cfg.Dir, cfg.Topics, cfg.FS, cfg.LoadWait = t.TempDir(), newTestTopics(), jitterFS(), 10*time.Second
	cfg.Metrics = NewMetrics()
	if compacting {
		cfg.compactMin = 256
	}
	open := func(epoch int32) *Coordinator {
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		c.SetView(epoch, allGroups)
		return c
	}
	groups := []string{"g0", "g1", "g2"}
	a := open(1)

	var mu sync.Mutex
	var attempts []attempt
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for gi, g := range groups {
		wg.Add(1)
		parts := int32(1 + gi*3) // 1, 4 and 7 partitions
		go func() {
			defer wg.Done()
			for v := int64(1); ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				at := attempt{group: g, part: int32(v) % parts, value: v, start: time.Now()}
				ok, err := simpleCommit(ctx, a, g, at.part, v)
				if err != nil {
					t.Error(err)
					return
				}
				at.end, at.acked = time.Now(), ok
				mu.Lock()
				attempts = append(attempts, at)
				mu.Unlock()
			}
		}()
	}
	// B takes over once every group exists on the volume (a read-only request to a group
	// without files claims nothing: it answers "no offsets", which is true at that instant).
	// When compacting, A first commits enough for its files to be compacted now and then.
	need := 1
	if compacting {
		need = 40
	}
	for created := false; !created; time.Sleep(time.Millisecond) {
		mu.Lock()
		acks := map[string]int{}
		for _, at := range attempts {
			if at.acked {
				acks[at.group]++
			}
		}
		mu.Unlock()
		created = len(acks) == len(groups)
		for _, n := range acks {
			created = created && n >= need
		}
	}
	time.Sleep(time.Duration(rng.IntN(30_000)) * time.Microsecond)
	b := open(2)
	for _, g := range groups {
		if _, code, err := committedOffsets(ctx, b, g); err != nil || code != 0 {
			t.Fatalf("B's takeover of %s: %v %s", g, err, codeName(code))
		}
	}
	tookOver := time.Now()
	time.Sleep(time.Duration(rng.IntN(10_000)) * time.Microsecond)
	close(stop)
	wg.Wait()

	seenB := map[string]map[int32]int64{}
	for _, g := range groups {
		got, code, err := committedOffsets(ctx, b, g)
		if err != nil || code != 0 {
			t.Fatalf("B fetch %s: %v %s", g, err, codeName(code))
		}
		seenB[g] = got
	}
	lastAcked := map[string]map[int32]int64{}
	byValue := map[string]map[int64]attempt{}
	for _, g := range groups {
		lastAcked[g], byValue[g] = map[int32]int64{}, map[int64]attempt{}
	}
	lateAcks := 0
	for _, at := range attempts {
		byValue[at.group][at.value] = at
		if !at.acked {
			continue
		}
		if at.start.After(tookOver) {
			lateAcks++
		}
		lastAcked[at.group][at.part] = max(lastAcked[at.group][at.part], at.value)
	}
	if lateAcks > 0 {
		t.Fatalf("A acknowledged %d commits it started after B took over", lateAcks)
	}
	for _, g := range groups {
		for p, v := range lastAcked[g] {
			if seenB[g][p] < v {
				t.Fatalf("%s[%d]: B has %d, A acknowledged %d: an acknowledged commit was lost", g, p, seenB[g][p], v)
			}
		}
		for p, v := range seenB[g] {
			at, ok := byValue[g][v]
			if !ok || at.part != p {
				t.Fatalf("%s[%d]: B has %d, which A never committed there", g, p, v)
			}
			if at.start.After(tookOver) {
				t.Fatalf("%s[%d]: B shows %d, which A attempted only after B took over", g, p, v)
			}
		}
	}
	// B commits on; C takes over from B and must see exactly B's state.
	for _, g := range groups {
		for p := range int32(3) {
			if ok, err := simpleCommit(ctx, b, g, p, 1_000_000+int64(p)); err != nil || !ok {
				t.Fatalf("B commit: %v %v", ok, err)
			}
			seenB[g][p] = 1_000_000 + int64(p)
		}
	}
	c := open(3)
	for _, g := range groups {
		got, code, err := committedOffsets(ctx, c, g)
		if err != nil || code != 0 {
			t.Fatalf("C fetch %s: %v %s", g, err, codeName(code))
		}
		if fmt.Sprint(got) != fmt.Sprint(seenB[g]) {
			t.Fatalf("%s: C has %v, B had %v", g, got, seenB[g])
		}
	}
	// A keeps trying: still refused, still invisible.
	if ok, _ := simpleCommit(ctx, a, "g0", 0, 42); ok {
		t.Fatal("A, two epochs behind, had a commit acknowledged")
	}
	if got, _, _ := committedOffsets(ctx, c, "g0"); got[0] == 42 {
		t.Fatal("A's late commit is visible")
	}
	if n := value(t, cfg.Metrics.compactions); compacting && n == 0 {
		t.Fatal("no compaction happened: the run does not exercise them")
	} else {
		t.Logf("%d commits attempted by A, %v compactions", len(attempts), n)
	}
}
