package balance

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func epochOf(t testing.TB, res Result, key string, i int32) int32 {
	t.Helper()
	a, ok := res.Topic(key)
	if !ok {
		t.Fatalf("topic %q missing from the result", key)
	}
	return a.Partitions[i].Epoch
}

// again feeds a result back as the next input's current assignment.
func again(in Input, res Result) Input {
	next := in
	next.Topics = nil
	for _, a := range res.Topics {
		next.Topics = append(next.Topics, Topic{Key: a.Key, Partitions: int32(len(a.Partitions)), Current: a.Partitions})
	}
	return next
}

func TestAPartitionThatFailedOnceIsTakenOverAgainOnTheSameBrokerAtTheNextEpoch(t *testing.T) {
	in := Input{Alive: alive(0, 1, 2), Topics: []Topic{tp("a", 0, 1, 2)},
		Failed: []Failure{{Topic: "a", Index: 1, Broker: 1, Epoch: epoch0, Failures: 1}}}
	res := mustAssign(t, in)
	if got := leadersOf(t, res, "a"); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("leaders = %v, want every partition where it was", got)
	}
	if e := epochOf(t, res, "a", 1); e != epoch0+1 {
		t.Fatalf("the failed partition's epoch = %d, want %d", e, epoch0+1)
	}
	if len(res.Moves) != 1 || res.Moves[0].Reason != ReasonStorageFailed || res.Moves[0].From != 1 || res.Moves[0].To != 1 {
		t.Fatalf("moves = %+v, want one StorageFailed 1→1", res.Moves)
	}
	// The broker still announces the failure at the old epoch until its view moves: nothing
	// more happens.
	if res2 := mustAssign(t, again(in, res)); len(res2.Moves) > 0 {
		t.Fatalf("a failure at an older epoch moved %+v", res2.Moves)
	}
}

func TestAPartitionThatFailedTwiceMovesAloneAndNothingElseMoves(t *testing.T) {
	in := Input{Alive: alive(0, 1, 2), Topics: []Topic{tp("a", 0, 1, 2, 0, 1, 2), tp("b", 2, 1, 0)},
		Failed: []Failure{{Topic: "a", Index: 1, Broker: 1, Epoch: epoch0, Failures: 2}}}
	res := mustAssign(t, in)
	got := leadersOf(t, res, "a")
	if got[1] == 1 {
		t.Fatalf("leaders = %v: the partition stayed on the broker it failed on twice", got)
	}
	if len(res.Moves) != 1 || res.Moves[0].Partition != 1 || res.Moves[0].Reason != ReasonStorageFailed || res.Moves[0].Epoch != epoch0+1 {
		t.Fatalf("moves = %+v, want only partition a/1 moved, for StorageFailed, at epoch %d", res.Moves, epoch0+1)
	}
	// While broker 1 remembers, the result is a fixed point: nothing moves back, nothing is
	// evened out around the pinned partition.
	if res2 := mustAssign(t, again(in, res)); len(res2.Moves) > 0 {
		t.Fatalf("the next decision moved %+v", res2.Moves)
	}
	// Once broker 1 forgets, the cluster is evened out again.
	in2 := again(in, res)
	in2.Failed = nil
	if res3 := mustAssign(t, in2); len(res3.Moves) != 1 || res3.Moves[0].Reason != ReasonRebalanced {
		t.Fatalf("after the failure is forgotten: moves %+v, want one Rebalanced move", res3.Moves)
	}
}

func TestAOnePartitionTopicThatFailedTwiceMovesAlone(t *testing.T) {
	in := Input{Alive: alive(0, 1), Topics: []Topic{tp("a", 0), tp("b", 1)},
		Failed: []Failure{{Topic: "a", Index: 0, Broker: 0, Epoch: epoch0, Failures: 2}}}
	res := mustAssign(t, in)
	if got := leadersOf(t, res, "a"); got[0] != 1 {
		t.Fatalf("topic a leaders = %v, want [1]", got)
	}
	if res2 := mustAssign(t, again(in, res)); slices.ContainsFunc(res2.Moves, func(m Move) bool { return m.Topic == "a" }) {
		t.Fatalf("the next decision moved topic a back: %+v", res2.Moves)
	}
}

func TestAPartitionFailedOnEveryAliveBrokerStaysOfflineAtItsEpoch(t *testing.T) {
	in := Input{Alive: alive(0, 1), Topics: []Topic{tp("a", 0, 1)},
		Failed: []Failure{
			{Topic: "a", Index: 0, Broker: 0, Epoch: epoch0, Failures: 2},
			{Topic: "a", Index: 0, Broker: 1, Epoch: epoch0 - 2, Failures: 3},
		}}
	res := mustAssign(t, in)
	if got := leadersOf(t, res, "a"); !slices.Equal(got, []int32{0, 1}) || epochOf(t, res, "a", 0) != epoch0 {
		t.Fatalf("leaders = %v epoch %d, want it kept where it is at its epoch", got, epochOf(t, res, "a", 0))
	}
	if len(res.Moves) > 0 || !slices.Equal(res.Offline, []PartitionRef{{Topic: "a", Partition: 0}}) {
		t.Fatalf("moves %+v offline %+v, want none and a/0 offline", res.Moves, res.Offline)
	}
	// A broker joins: the partition goes there.
	in.Alive = alive(0, 1, 2)
	res = mustAssign(t, in)
	if got := leadersOf(t, res, "a"); got[0] != 2 || len(res.Offline) > 0 {
		t.Fatalf("with broker 2 alive: leaders = %v offline %+v, want a/0 on 2", got, res.Offline)
	}
}

func TestFailuresOfBrokersNotAliveOrOfUnknownPartitionsAreIgnored(t *testing.T) {
	in := Input{Alive: alive(0, 1), Topics: []Topic{tp("a", 0, 1)},
		Failed: []Failure{
			{Topic: "a", Index: 1, Broker: 7, Epoch: epoch0, Failures: 2},
			{Topic: "a", Index: 9, Broker: 0, Epoch: epoch0, Failures: 1},
			{Topic: "zz", Index: 0, Broker: 0, Epoch: epoch0, Failures: 1},
		}}
	if res := mustAssign(t, in); len(res.Moves) > 0 || len(res.Offline) > 0 {
		t.Fatalf("moves %+v offline %+v, want nothing", res.Moves, res.Offline)
	}
}

// TestFailuresNeverLeaveAPartitionOnABrokerItAvoids is the property over random clusters: every
// partition ends on an alive broker; none on a broker it failed on twice unless every alive
// broker did (then it is offline where it was, or tried on a broker if it had no alive
// leader); and fed back, the decision is a fixed point.
func TestFailuresNeverLeaveAPartitionOnABrokerItAvoids(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 5))
	for iter := range 3000 {
		n := 1 + rng.IntN(5)
		var ids []int32
		for b := range n {
			ids = append(ids, int32(b))
		}
		in := Input{Alive: alive(ids...)}
		for ti := range 1 + rng.IntN(4) {
			key := string(rune('a' + ti))
			leaders := make([]int32, 1+rng.IntN(7))
			for i := range leaders {
				leaders[i] = int32(rng.IntN(n+1)) - 1
			}
			in.Topics = append(in.Topics, tp(key, leaders...))
			for i := range leaders {
				for b := range n {
					if rng.IntN(4) == 0 {
						in.Failed = append(in.Failed, Failure{Topic: key, Index: int32(i), Broker: int32(b),
							Epoch: epoch0 - int32(rng.IntN(2)), Failures: 1 + int32(rng.IntN(3))})
					}
				}
			}
		}
		res := mustAssign(t, in)
		avoid := map[PartitionRef][]int32{}
		for _, f := range in.Failed {
			if f.Failures >= 2 {
				r := PartitionRef{f.Topic, f.Index}
				avoid[r] = append(avoid[r], f.Broker)
			}
		}
		for _, a := range res.Topics {
			for _, p := range a.Partitions {
				r := PartitionRef{a.Key, p.Index}
				if p.Leader < 0 || int(p.Leader) >= n {
					t.Fatalf("iteration %d: %s/%d led by %d, not alive (input %+v)", iter, a.Key, p.Index, p.Leader, in)
				}
				everywhere := len(avoid[r]) > 0 && !slices.ContainsFunc(ids, func(b int32) bool { return !slices.Contains(avoid[r], b) })
				if slices.Contains(avoid[r], p.Leader) && !slices.Contains(res.Offline, r) && !everywhere {
					t.Fatalf("iteration %d: %s/%d left on broker %d it failed on twice (input %+v)", iter, a.Key, p.Index, p.Leader, in)
				}
			}
		}
		// The retried partitions failed once at the old epoch: fed back, nothing moves.
		if res2 := mustAssign(t, again(in, res)); len(res2.Moves) > 0 {
			t.Fatalf("iteration %d: not a fixed point: %+v moved again (input %+v)", iter, res2.Moves, in)
		}
	}
}
