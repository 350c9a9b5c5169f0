package balance

import "slices"

// Failure is one partition whose storage failed on a broker, as that broker announces it
// (docs/assignment.md, "The rules", rule 8).
type Failure struct {
	// Topic is the topic's Key, Index the partition.
	Topic string
	Index int32
	// Broker is where it failed; Epoch the leader epoch it last failed at there.
	Broker int32
	Epoch  int32
	// Failures is how many times it failed on Broker within the broker's memory (≥ 1).
	Failures int32
}

// ReasonStorageFailed: the partition's storage failed on its leader. It stays there at the
// next epoch when that was its first failure there (a new takeover, which retries the files),
// and moves to another broker when it failed there before.
const ReasonStorageFailed Reason = "StorageFailed"

// PartitionRef names one partition of a topic by its Key.
type PartitionRef struct {
	Topic     string
	Partition int32
}

// failedRules is what the failures of an Input mean for the decision, by topic index and
// partition.
type failedRules struct {
	// avoid[t][i] are the alive brokers (indexes) partition i of topic t must not be led by:
	// it failed there more than once.
	avoid map[[2]int32][]int32
	// here[t][i] is true when the current leader announced a failure at the current epoch:
	// the partition needs a new epoch wherever it ends up.
	here map[[2]int32]bool
}

// failedRules reads in.Failures over the normalized problem. Failures of brokers that are not
// alive, of unknown topics or partitions, or of partitions no longer led where they failed
// are ignored except for avoidance: a broker that failed a partition twice keeps it away
// while it remembers.
func (p *problem) failedRules(failures []Failure) failedRules {
	r := failedRules{avoid: map[[2]int32][]int32{}, here: map[[2]int32]bool{}}
	for _, f := range failures {
		ti, ok := slices.BinarySearchFunc(p.topics, f.Topic, func(t topic, k string) int {
			switch {
			case t.key < k:
				return -1
			case t.key > k:
				return 1
			}
			return 0
		})
		b := p.index(f.Broker)
		if !ok || b < 0 || f.Index < 0 || int(f.Index) >= len(p.topics[ti].current) {
			continue
		}
		key := [2]int32{int32(ti), f.Index}
		cur := p.topics[ti].current[f.Index]
		if cur.Leader == f.Broker && cur.Epoch == f.Epoch {
			r.here[key] = true
		}
		if f.Failures >= 2 && !slices.Contains(r.avoid[key], b) {
			r.avoid[key] = append(r.avoid[key], b)
		}
	}
	return r
}

// pinFailed places, before the search, every partition that must avoid a broker and may go to
// another: it stays where it is when its leader is alive and allowed, and otherwise goes to
// the allowed broker with the fewest partitions of its topic, then the fewest overall. Such a
// partition is pinned: the spreads and the search neither count nor move it, so keeping it off
// a failing broker moves no other partition — the rest of the cluster stays as it was
// (docs/assignment.md, rule 8) — and the decision is a fixed point while the failure is
// announced. A partition every alive broker must avoid is not pinned: it is placed as any
// other, and reported offline when it stays on its leader (offline).
func (p *problem) pinFailed(r failedRules) {
	for ti := range p.topics {
		t := &p.topics[ti]
		for i := range t.owner {
			avoid := r.avoid[[2]int32{int32(ti), int32(i)}]
			if len(avoid) == 0 || len(avoid) == len(p.brokers) {
				continue
			}
			if t.pinned == nil {
				t.pinned = make([]bool, len(t.owner))
			}
			t.pinned[i] = true
			if t.owner[i] < 0 || slices.Contains(avoid, t.owner[i]) {
				t.owner[i] = p.leastLoaded(ti, avoid)
			}
		}
	}
}

// offline lists the partitions that every alive broker must avoid and that stay on their
// leader: they are kept there at their epoch (result does not retry them), sorted by topic key
// and partition.
func (p *problem) offline(r failedRules) []PartitionRef {
	var out []PartitionRef
	for ti, t := range p.topics {
		for i := range t.owner {
			avoid := r.avoid[[2]int32{int32(ti), int32(i)}]
			if len(p.brokers) > 0 && len(avoid) == len(p.brokers) && t.owner[i] >= 0 && t.owner[i] == p.index(t.current[i].Leader) {
				out = append(out, PartitionRef{Topic: t.key, Partition: int32(i)})
			}
		}
	}
	return out
}

// leastLoaded is the broker not in avoid with the fewest partitions of topic ti, then the
// fewest overall, then first in the topic's preference.
func (p *problem) leastLoaded(ti int, avoid []int32) int32 {
	held := make([]int32, len(p.brokers))
	total := make([]int32, len(p.brokers))
	for tj, t := range p.topics {
		for _, o := range t.owner {
			if o >= 0 {
				total[o]++
				if tj == ti {
					held[o]++
				}
			}
		}
	}
	best := int32(-1)
	for _, b := range p.preference(ti) {
		if slices.Contains(avoid, int32(b)) {
			continue
		}
		if best < 0 || held[b] < held[best] || held[b] == held[best] && total[b] < total[best] {
			best = int32(b)
		}
	}
	return best
}
