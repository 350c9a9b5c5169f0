package balance

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// randomShape bounds a random input: broker ids 0..brokers+1 of which a random subset of
// 0..brokers-1 is alive (so some leaders are dead), up to topics topics of up to partitions
// partitions each.
type randomShape struct{ brokers, topics, partitions int }

func randomInput(rng *rand.Rand, s randomShape) Input {
	var in Input
	for id := range s.brokers {
		if rng.IntN(4) > 0 {
			in.Alive = append(in.Alive, Broker{ID: int32(id), Incarnation: int64(1 + rng.IntN(3))})
		}
	}
	for ti := range rng.IntN(s.topics + 1) {
		t := Topic{Key: fmt.Sprintf("t%d", ti), Partitions: int32(rng.IntN(s.partitions + 1))}
		for i := range t.Partitions {
			if rng.IntN(7) == 0 {
				continue // never assigned
			}
			t.Current = append(t.Current, Partition{
				Index:       i,
				Leader:      int32(rng.IntN(s.brokers+3)) - 1, // -1, any alive or dead id, or one never seen
				Epoch:       int32(rng.IntN(20)),
				Incarnation: int64(rng.IntN(4)),
			})
		}
		in.Topics = append(in.Topics, t)
	}
	return in
}

func TestRandomInputsKeepEveryRule(t *testing.T) {
	shapes := []randomShape{
		{brokers: 1, topics: 3, partitions: 5},
		{brokers: 3, topics: 4, partitions: 8},
		{brokers: 5, topics: 6, partitions: 12},
		{brokers: 9, topics: 8, partitions: 30},
	}
	for si, shape := range shapes {
		rng := rand.New(rand.NewPCG(uint64(si), 1))
		for range 1500 {
			in := randomInput(rng, shape)
			checkRules(t, in, mustAssign(t, in))
		}
	}
}

// TestRandomInputsAreRebalancedWithTheFewestMoves compares the number of leader changes with
// two independent searches: every assignment of every partition (tiny inputs), and every
// choice of which brokers carry each topic's extra partitions (small inputs).
func TestRandomInputsAreRebalancedWithTheFewestMoves(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for range 1500 {
		in := randomInput(rng, randomShape{brokers: 4, topics: 3, partitions: 4})
		if len(in.Alive) == 0 {
			continue
		}
		got := leaderChanges(mustAssign(t, in))
		byTrying := fewestMovesByTrying(t, in)
		if byTrying < 0 {
			continue // too many assignments to try
		}
		if byEnum := fewestMovesByEnumeration(t, in); byEnum != byTrying {
			t.Fatalf("the two searches disagree (%d vs %d) on %+v", byEnum, byTrying, in)
		}
		if got != byTrying {
			t.Fatalf("%d leader changes, fewest possible %d, for %+v", got, byTrying, in)
		}
	}
	for range 1500 {
		in := randomInput(rng, randomShape{brokers: 6, topics: 5, partitions: 10})
		if len(in.Alive) == 0 {
			continue
		}
		if got, best := leaderChanges(mustAssign(t, in)), fewestMovesByEnumeration(t, in); got != best {
			t.Fatalf("%d leader changes, fewest possible %d, for %+v", got, best, in)
		}
	}
}

// TestRandomClusterHistoriesKeepEveryRule runs long histories of the changes a cluster sees —
// topics created, deleted and grown, brokers dying, draining, restarting and joining — from the
// balancer's own previous decision, checking every rule after each step and, for a topic
// creation, that no other partition moved.
func TestRandomClusterHistoriesKeepEveryRule(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 9))
		brokers := alive(0, 1, 2)
		in := Input{Alive: brokers}
		nextID, nextTopic := int32(3), 0
		for step := range 120 {
			var created string
			switch op := rng.IntN(10); {
			case op < 3 || len(in.Topics) == 0:
				created = fmt.Sprintf("topic-%03d", nextTopic)
				nextTopic++
				in.Topics = append(in.Topics, fresh(created, int32(1+rng.IntN(12))))
			case op == 3:
				i := rng.IntN(len(in.Topics))
				in.Topics = slices.Delete(in.Topics, i, i+1)
			case op == 4:
				i := rng.IntN(len(in.Topics))
				in.Topics[i].Partitions += int32(1 + rng.IntN(5))
			case op == 5 && len(in.Alive) > 1: // a broker dies or drains
				i := rng.IntN(len(in.Alive))
				in.Alive = slices.Delete(slices.Clone(in.Alive), i, i+1)
			case op == 6: // a broker restarts
				i := rng.IntN(len(in.Alive))
				in.Alive = slices.Clone(in.Alive)
				in.Alive[i].Incarnation++
			case op == 7 && len(in.Alive) < 8: // a broker joins
				in.Alive = append(slices.Clone(in.Alive), Broker{ID: nextID, Incarnation: 1})
				nextID++
			case op == 8: // every broker is gone for a moment
				saved := in.Alive
				in.Alive = nil
				res := mustAssign(t, in)
				checkRules(t, in, res)
				in = next(res, nil)
				in.Alive = saved
			}
			res := mustAssign(t, in)
			checkRules(t, in, res)
			if created != "" {
				for _, m := range res.Moves {
					if m.Topic != created && m.Reason != ReasonRestarted {
						t.Fatalf("seed %d step %d: creating %s moved %+v", seed, step, created, m)
					}
				}
			}
			in = next(res, in.Alive)
		}
	}
}

// TestAnEvenAssignmentIsItsOwnRebalance checks that the shortcut for inputs that already
// meet the spread rules agrees with the full search: forced through the search, such an input
// comes back unchanged.
func TestAnEvenAssignmentIsItsOwnRebalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	checked := 0
	for range 2000 {
		in := randomInput(rng, randomShape{brokers: 6, topics: 6, partitions: 14})
		if len(in.Alive) == 0 {
			continue
		}
		in = next(mustAssign(t, in), in.Alive) // an even assignment
		p, err := newProblem(in)
		if err != nil {
			t.Fatal(err)
		}
		if !p.even() {
			t.Fatalf("a decision is not even: %+v", in)
		}
		if err := p.rebalance(); err != nil {
			t.Fatal(err)
		}
		if res := p.result(failedRules{}, nil); len(res.Moves) > 0 {
			t.Fatalf("the search moves %+v on the even input %+v", res.Moves, in)
		}
		checked++
	}
	if checked < 1000 {
		t.Fatalf("only %d inputs checked", checked)
	}
}

// heldCounts is, per topic (in Topics order), the number of partitions each alive broker
// (in Alive order) leads now.
func heldCounts(in Input) [][]int {
	pos := map[int32]int{}
	for i, b := range in.Alive {
		pos[b.ID] = i
	}
	out := make([][]int, len(in.Topics))
	for ti, tc := range in.Topics {
		out[ti] = make([]int, len(in.Alive))
		for _, c := range tc.Current {
			if b, ok := pos[c.Leader]; ok {
				out[ti][b]++
			}
		}
	}
	return out
}

// fewestMovesByEnumeration is the fewest leader changes that meet both spread rules, found by
// trying every choice of the brokers that carry each topic's P mod n extra partitions. Given
// the choice, a broker holding more than its share of a topic must give up the difference,
// and every partition without an alive leader must be placed.
func fewestMovesByEnumeration(t testing.TB, in Input) int {
	t.Helper()
	n := len(in.Alive)
	held := heldCounts(in)
	extras := make([]int, n)
	combos, best := 1, -1
	for _, tc := range in.Topics {
		if r := int(tc.Partitions) % n; r > 0 {
			combos *= binomial(n, r)
		}
	}
	if combos > 2_000_000 {
		t.Fatalf("%d choices to enumerate: the case is too big", combos)
	}
	masks := make([]uint, len(in.Topics)) // the current choice per topic
	var try func(ti int)
	try = func(ti int) {
		if ti == len(in.Topics) {
			if slices.Max(extras)-slices.Min(extras) > 1 {
				return
			}
			moves := 0
			for tj, tc := range in.Topics {
				kept := 0
				floor := int(tc.Partitions) / n
				r := int(tc.Partitions) % n
				mask := masks[tj]
				for b := range n {
					share := floor
					if r > 0 && mask&(1<<b) != 0 {
						share++
					}
					kept += min(held[tj][b], share)
				}
				moves += int(tc.Partitions) - kept
			}
			if best < 0 || moves < best {
				best = moves
			}
			return
		}
		r := int(in.Topics[ti].Partitions) % n
		for mask := uint(0); mask < 1<<n; mask++ {
			if bits.OnesCount(mask) != r {
				continue
			}
			masks[ti] = mask
			for b := range n {
				if mask&(1<<b) != 0 {
					extras[b]++
				}
			}
			try(ti + 1)
			for b := range n {
				if mask&(1<<b) != 0 {
					extras[b]--
				}
			}
		}
	}
	try(0)
	return best
}

// fewestMovesByTrying is the fewest leader changes among all assignments of every partition
// to an alive broker that meet both spread rules, or -1 when there are too many to try.
func fewestMovesByTrying(t testing.TB, in Input) int {
	t.Helper()
	n := len(in.Alive)
	type slot struct {
		topic  int
		leader int32
	}
	var slots []slot
	cur := normalized(in)
	for ti, tc := range in.Topics {
		for _, p := range cur[tc.Key] {
			slots = append(slots, slot{ti, p.Leader})
		}
	}
	tries := 1
	for range slots {
		if tries *= n; tries > 300_000 {
			return -1
		}
	}
	count := make([][]int, len(in.Topics))
	for ti := range count {
		count[ti] = make([]int, n)
	}
	total := make([]int, n)
	best := -1
	var try func(i, moves int)
	try = func(i, moves int) {
		if best >= 0 && moves >= best {
			return
		}
		if i == len(slots) {
			for _, c := range count {
				if slices.Max(c)-slices.Min(c) > 1 {
					return
				}
			}
			if slices.Max(total)-slices.Min(total) > 1 {
				return
			}
			best = moves
			return
		}
		for b := range n {
			count[slots[i].topic][b]++
			total[b]++
			m := moves
			if in.Alive[b].ID != slots[i].leader {
				m++
			}
			try(i+1, m)
			count[slots[i].topic][b]--
			total[b]--
		}
	}
	if n == 0 || len(slots) == 0 {
		return 0
	}
	try(0, 0)
	return best
}

func binomial(n, k int) int {
	r := 1
	for i := range k {
		r = r * (n - i) / (i + 1)
	}
	return r
}
