package groups

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func topicN(i int, partitions int32) assignTopic {
	return assignTopic{id: [16]byte{byte(i + 1), 0xaa}, name: fmt.Sprintf("topic-%02d", i), partitions: partitions}
}

// members subscribing to every topic, with current targets.
func homogeneous(ids []string, topics []assignTopic, current map[string]pset) []assignMember {
	out := make([]assignMember, len(ids))
	for i, id := range ids {
		sub := map[[16]byte]bool{}
		for _, t := range topics {
			sub[t.id] = true
		}
		out[i] = assignMember{id: id, key: id, subscribed: sub, current: current[id]}
	}
	return out
}

// checkAssignment fails unless every partition of a subscribed topic has exactly one owner,
// who subscribes to it.
func checkAssignment(t *testing.T, members []assignMember, topics []assignTopic, got map[string]pset) {
	t.Helper()
	owner := map[tpid]string{}
	for _, m := range members {
		for p := range got[m.id] {
			if !m.subscribed[p.id] {
				t.Fatalf("%s got %v of a topic it does not subscribe to", m.id, p)
			}
			if o, ok := owner[p]; ok {
				t.Fatalf("%v assigned to %s and %s", p, o, m.id)
			}
			owner[p] = m.id
		}
	}
	for _, tp := range topics {
		subscribed := false
		for _, m := range members {
			subscribed = subscribed || m.subscribed[tp.id]
		}
		for p := range tp.partitions {
			if _, ok := owner[tpid{tp.id, p}]; subscribed && !ok {
				t.Fatalf("%s-%d assigned to nobody", tp.name, p)
			}
		}
	}
}

func spread(members []assignMember, got map[string]pset) (lo, hi int) {
	lo = 1 << 30
	for _, m := range members {
		lo, hi = min(lo, len(got[m.id])), max(hi, len(got[m.id]))
	}
	return lo, hi
}

func TestTheUniformAssignorBalancesToWithinOne(t *testing.T) {
	for _, c := range []struct{ members, topics, partitions int }{{1, 1, 4}, {3, 1, 4}, {7, 3, 10}, {100, 1, 1000}, {13, 10, 7}, {5, 1, 3}} {
		var topics []assignTopic
		for i := range c.topics {
			topics = append(topics, topicN(i, int32(c.partitions)))
		}
		ms := homogeneous(memberIDs(c.members), topics, nil)
		got := assignUniform(ms, topics)
		checkAssignment(t, ms, topics, got)
		if lo, hi := spread(ms, got); hi-lo > 1 {
			t.Errorf("%+v: spread %d-%d", c, lo, hi)
		}
	}
}

func moved(before, after map[string]pset) int {
	n := 0
	for id, s := range after {
		n += len(s.minus(before[id]))
	}
	return n
}

// A member joining moves only what balance needs: about one share; the others keep the rest.
func TestTheUniformAssignorIsStickyWhenAMemberJoinsOrLeaves(t *testing.T) {
	topics := []assignTopic{topicN(0, 1000)}
	ids := memberIDs(100)
	first := assignUniform(homogeneous(ids[:99], topics, nil), topics)
	ms := homogeneous(ids, topics, first)
	second := assignUniform(ms, topics)
	checkAssignment(t, ms, topics, second)
	if lo, hi := spread(ms, second); hi-lo > 1 {
		t.Fatalf("after a join: spread %d-%d", lo, hi)
	}
	if n := moved(first, second); n != 10 {
		t.Fatalf("a join moved %d partitions, want 10 (the new member's share)", n)
	}
	// One leaves: only its partitions move.
	ms = homogeneous(append(ids[:40:40], ids[41:]...), topics, second)
	third := assignUniform(ms, topics)
	checkAssignment(t, ms, topics, third)
	if n := moved(second, third); n != len(second[ids[40]]) {
		t.Fatalf("a leave moved %d partitions, want the %d it held", n, len(second[ids[40]]))
	}
	// Nothing changes: nothing moves.
	if n := moved(third, assignUniform(homogeneous(append(ids[:40:40], ids[41:]...), topics, third), topics)); n != 0 {
		t.Fatalf("an unchanged group moved %d partitions", n)
	}
}

func TestTheUniformAssignorGivesEachTopicToItsSubscribersOnly(t *testing.T) {
	topics := []assignTopic{topicN(0, 6), topicN(1, 6), topicN(2, 1)}
	ms := []assignMember{
		{id: "a", subscribed: map[[16]byte]bool{topics[0].id: true}},
		{id: "b", subscribed: map[[16]byte]bool{topics[0].id: true, topics[1].id: true}},
		{id: "c", subscribed: map[[16]byte]bool{topics[1].id: true}},
		{id: "d", subscribed: map[[16]byte]bool{}},
	}
	got := assignUniform(ms, topics)
	checkAssignment(t, ms, topics, got)
	if len(got["a"]) != 4 || len(got["b"]) != 4 || len(got["c"]) != 4 || len(got["d"]) != 0 {
		t.Fatalf("counts a=%d b=%d c=%d d=%d, want 4/4/4/0", len(got["a"]), len(got["b"]), len(got["c"]), len(got["d"]))
	}
}

func TestTheRangeAssignorGivesContiguousCoPartitionedRanges(t *testing.T) {
	topics := []assignTopic{topicN(0, 5), topicN(1, 5)}
	ms := homogeneous([]string{"b", "a"}, topics, nil)
	got := assignRange(ms, topics)
	checkAssignment(t, ms, topics, got)
	for _, tp := range topics {
		for p := range int32(5) {
			want := "a"
			if p >= 3 {
				want = "b"
			}
			if !got[want].has(tpid{tp.id, p}) {
				t.Fatalf("%s-%d not with %s: %v", tp.name, p, want, got)
			}
		}
	}
}

// A random walk of joins, leaves and subscription changes: both assignors always give every
// subscribed partition to exactly one subscriber, and uniform stays within one for identical
// subscriptions.
func TestAssignorsOnRandomGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	topics := []assignTopic{topicN(0, 17), topicN(1, 3), topicN(2, 40)}
	for _, a := range assignors {
		current := map[string]pset{}
		var ids []string
		for step := range 300 {
			if len(ids) == 0 || rng.IntN(3) > 0 {
				ids = append(ids, fmt.Sprintf("m%d", step))
			} else {
				i := rng.IntN(len(ids))
				ids = append(ids[:i:i], ids[i+1:]...)
			}
			ms := homogeneous(ids, topics, current)
			got := a.assign(ms, topics)
			checkAssignment(t, ms, topics, got)
			if lo, hi := spread(ms, got); a.name == "uniform" && hi-lo > 1 {
				t.Fatalf("%s step %d: spread %d-%d", a.name, step, lo, hi)
			}
			current = got
		}
	}
}
