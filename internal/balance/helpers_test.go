package balance

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Test notation: brokers are alive at incarnation 1 unless a case says otherwise, and a
// topic written tp("a", 1, 2, -1) has partition i led by the i-th id (-1 = none) at epoch 5,
// confirmed at incarnation 1.
const (
	epoch0       = 5
	incarnation0 = 1
)

func alive(ids ...int32) []Broker {
	out := make([]Broker, len(ids))
	for i, id := range ids {
		out[i] = Broker{ID: id, Incarnation: incarnation0}
	}
	return out
}

func tp(key string, leaders ...int32) Topic {
	t := Topic{Key: key, Partitions: int32(len(leaders))}
	for i, l := range leaders {
		t.Current = append(t.Current, Partition{Index: int32(i), Leader: l, Epoch: epoch0, Incarnation: incarnation0})
	}
	return t
}

// fresh is a topic that has just been created: count partitions, none assigned.
func fresh(key string, count int32) Topic { return Topic{Key: key, Partitions: count} }

func mustAssign(t testing.TB, in Input) Result {
	t.Helper()
	res, err := Assign(in)
	if err != nil {
		t.Fatalf("Assign: %v", err)
	}
	return res
}

// leadersOf is the decided leader of every partition of topic key.
func leadersOf(t testing.TB, res Result, key string) []int32 {
	t.Helper()
	a, ok := res.Topic(key)
	if !ok {
		t.Fatalf("topic %q missing from the result", key)
	}
	out := make([]int32, len(a.Partitions))
	for i, p := range a.Partitions {
		out[i] = p.Leader
	}
	return out
}

// next is the input of the following decision: the same topics at the decided assignment.
func next(res Result, alive []Broker) Input {
	in := Input{Alive: alive}
	for _, a := range res.Topics {
		in.Topics = append(in.Topics, Topic{Key: a.Key, Partitions: int32(len(a.Partitions)), Current: slices.Clone(a.Partitions)})
	}
	return in
}

// build runs Assign over topics created one call at a time, as a cluster that saw them
// created in that order would hold them.
func build(t testing.TB, brokers []Broker, topics ...Topic) Input {
	t.Helper()
	in := Input{Alive: brokers}
	for _, tc := range topics {
		in.Topics = append(in.Topics, tc)
		in = next(mustAssign(t, in), brokers)
	}
	return in
}

// leaderChanges counts the moves that changed the leader (a restart keeps it).
func leaderChanges(res Result) int {
	n := 0
	for _, m := range res.Moves {
		if m.From != m.To {
			n++
		}
	}
	return n
}

// normalized is in's current assignment as Assign reads it: every partition listed, a missing
// one as leader -1 at epoch 0.
func normalized(in Input) map[string][]Partition {
	out := map[string][]Partition{}
	for _, t := range in.Topics {
		parts := make([]Partition, t.Partitions)
		for i := range parts {
			parts[i] = Partition{Index: int32(i), Leader: -1}
		}
		for _, c := range t.Current {
			parts[c.Index] = c
		}
		out[t.Key] = parts
	}
	return out
}

// checkRules fails t for every rule res breaks as the decision for in; it re-derives each rule
// from in without the package's own helpers.
func checkRules(t testing.TB, in Input, res Result) {
	t.Helper()
	errs := ruleViolations(in, res)
	if len(errs) > 0 {
		t.Fatalf("rules broken:\n  %s\ninput: %+v\nresult: %+v", strings.Join(errs, "\n  "), in, res)
	}
}

func ruleViolations(in Input, res Result) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }

	inc := map[int32]int64{}
	for _, b := range in.Alive {
		inc[b.ID] = b.Incarnation
	}
	cur := normalized(in)
	if len(res.Topics) != len(in.Topics) {
		bad("%d topics out for %d in", len(res.Topics), len(in.Topics))
	}
	if !slices.IsSortedFunc(res.Topics, func(a, b Assignment) int { return strings.Compare(a.Key, b.Key) }) {
		bad("topics are not sorted by key")
	}
	var want []Move
	total := map[int32]int{}
	for _, a := range res.Topics {
		old, ok := cur[a.Key]
		if !ok {
			bad("topic %q was not in the input", a.Key)
			continue
		}
		if len(a.Partitions) != len(old) {
			bad("topic %q: %d partitions out for %d", a.Key, len(a.Partitions), len(old))
			continue
		}
		count := map[int32]int{}
		for i, p := range a.Partitions {
			o := old[i]
			if p.Index != int32(i) {
				bad("topic %q: entry %d has index %d", a.Key, i, p.Index)
			}
			if len(in.Alive) == 0 { // rule: no broker alive → no change at all
				if p != o {
					bad("topic %q partition %d changed with nothing alive: %+v → %+v", a.Key, i, o, p)
				}
				continue
			}
			pinc, isAlive := inc[p.Leader]
			if !isAlive {
				bad("topic %q partition %d: leader %d is not alive", a.Key, i, p.Leader)
				continue
			}
			if p.Incarnation != pinc {
				bad("topic %q partition %d: incarnation %d, leader's is %d", a.Key, i, p.Incarnation, pinc)
			}
			count[p.Leader]++
			total[p.Leader]++
			_, oldAlive := inc[o.Leader]
			if oldAlive && p.Leader == o.Leader && o.Incarnation == pinc { // rule: kept → same epoch
				if p.Epoch != o.Epoch {
					bad("topic %q partition %d kept leader %d but epoch %d → %d", a.Key, i, p.Leader, o.Epoch, p.Epoch)
				}
				continue
			}
			if p.Epoch != o.Epoch+1 { // rule: a change bumps the epoch by exactly one
				bad("topic %q partition %d: epoch %d → %d on a change", a.Key, i, o.Epoch, p.Epoch)
			}
			var why Reason
			switch {
			case o.Leader == -1:
				why = ReasonUnassigned
			case !oldAlive:
				why = ReasonLeaderNotAlive
			case o.Leader != p.Leader:
				why = ReasonRebalanced
			default:
				why = ReasonRestarted
			}
			want = append(want, Move{Topic: a.Key, Partition: int32(i), From: o.Leader, To: p.Leader, Epoch: p.Epoch, Reason: why})
		}
		if len(in.Alive) > 0 {
			if s := spreadOver(in.Alive, count); s > 1 {
				bad("topic %q: spread %d over the alive brokers (%v)", a.Key, s, count)
			}
		}
	}
	if len(in.Alive) > 0 {
		if s := spreadOver(in.Alive, total); s > 1 {
			bad("cluster spread %d over the alive brokers (%v)", s, total)
		}
	}
	if !reflect.DeepEqual(res.Moves, want) {
		bad("moves\n    %+v\n  want\n    %+v", res.Moves, want)
	}

	// rule: the decision is a fixed point.
	again, err := Assign(next(res, in.Alive))
	if err != nil {
		bad("re-running on the result: %v", err)
	} else if len(again.Moves) > 0 || !reflect.DeepEqual(again.Topics, res.Topics) {
		bad("re-running on the result moves %+v", again.Moves)
	}
	return errs
}

func spreadOver(brokers []Broker, count map[int32]int) int {
	lo, hi := -1, -1
	for _, b := range brokers {
		c := count[b.ID]
		if lo < 0 || c < lo {
			lo = c
		}
		if c > hi {
			hi = c
		}
	}
	return hi - lo
}
