package balance

import (
	"cmp"
	"fmt"
	"slices"
)

// rebalance places every partition so that both spread rules hold with the fewest leader
// changes (docs/assignment.md "How the targets are found"):
//
//  1. Per topic, with P partitions over n alive brokers, spread ≤ 1 means every broker holds
//     ⌊P/n⌋ and exactly P mod n of them one "extra". The cluster spread is then the spread
//     of the brokers' numbers of extras, so both rules together are one choice: which
//     brokers carry each topic's extras, such that every broker carries ⌊E/n⌋ or ⌈E/n⌉ of
//     the E extras in all. extras makes that choice with the fewest moves.
//  2. A broker holding more than its target of a topic gives up the difference (its highest
//     partition numbers).
//  3. Every partition without a leader goes to a broker still below its target, preferring
//     the fewest partitions of the topic, then the fewest overall, then the topic's own
//     broker order (preference).
func (p *problem) rebalance() error {
	n := len(p.brokers)
	held := make([]int32, len(p.topics)*n) // held[t*n+b]: partitions of topic t kept on broker b
	total := make([]int32, n)              // partitions kept on broker b over all topics
	for ti, t := range p.topics {
		for i, o := range t.owner {
			if o >= 0 && !t.isPinned(i) {
				held[ti*n+int(o)]++
				total[o]++
			}
		}
	}
	extra, err := p.extras(held, total)
	if err != nil {
		return err
	}
	target := func(ti, b int) int32 {
		t := int32(p.topics[ti].free()) / int32(n)
		if extra[ti*n+b] {
			t++
		}
		return t
	}

	// Surplus first, over all topics, so that placement below sees the totals that remain.
	for ti, t := range p.topics {
		for b := range n {
			surplus := held[ti*n+b] - target(ti, b)
			for i := len(t.owner) - 1; i >= 0 && surplus > 0; i-- {
				if t.owner[i] == int32(b) && !t.isPinned(i) {
					t.owner[i] = -1
					held[ti*n+b]--
					total[b]--
					surplus--
				}
			}
		}
	}

	for ti, t := range p.topics {
		var order []int
		for i, o := range t.owner {
			if o >= 0 || t.isPinned(i) {
				continue
			}
			if order == nil {
				order = p.preference(ti)
			}
			best := -1
			for _, b := range order { // ties on both counts keep the earlier broker in order
				if held[ti*n+b] >= target(ti, b) {
					continue
				}
				if best < 0 || held[ti*n+b] < held[ti*n+best] ||
					(held[ti*n+b] == held[ti*n+best] && total[b] < total[best]) {
					best = b
				}
			}
			if best < 0 {
				return fmt.Errorf("balance: internal error: topic %q has no broker below its target for partition %d", t.key, i)
			}
			t.owner[i] = int32(best)
			held[ti*n+best]++
			total[best]++
		}
	}
	return nil
}

// extras decides which brokers carry each topic's extra partition (extra[t*n+b]), given the
// partitions currently held (held[t*n+b], total[b]).
//
// Keeping an extra where a broker already holds more than ⌊P/n⌋ of the topic saves exactly
// one move; anywhere else it saves none. So the fewest moves is the choice that keeps the
// most extras on such brokers, which is a min-cost flow:
//
//	source → topic t        capacity P_t mod n
//	topic t → broker b      capacity 1, cost 0 if b holds more than ⌊P_t/n⌋ of t, else 1
//	broker b → sink         capacity ⌊E/n⌋
//	broker b → bonus        capacity 1
//	bonus → sink            capacity E mod n
//
// A flow of value E is a choice that meets both spread rules (at most E mod n brokers get
// ⌈E/n⌉ extras, and the totals force the others to exactly ⌊E/n⌋), and its cost is the
// number of extras placed where they save nothing. One always exists (docs/assignment.md
// "Both spreads at once"), so a smaller flow is a bug.
//
// Ties between equally cheap choices follow the search order: topics by key, and from each
// topic the brokers with the fewest partitions overall first, then the topic's preference.
func (p *problem) extras(held, total []int32) ([]bool, error) {
	n := len(p.brokers)
	var e int
	nodes := 0
	for _, t := range p.topics {
		if r := t.free() % n; r > 0 {
			e += r
			nodes++
		}
	}
	extra := make([]bool, len(p.topics)*n)
	if e == 0 {
		return extra, nil
	}
	// Nodes: source, one per topic with extras, one per broker, bonus, sink.
	source, firstTopic := 0, 1
	firstBroker := firstTopic + nodes
	bonus := firstBroker + n
	sink := bonus + 1
	g := newNetwork(sink + 1)
	q, s := int32(e/n), int32(e%n)

	type choice struct{ topic, broker, edge int }
	choices := make([]choice, 0, nodes*n)
	node := firstTopic
	for ti, t := range p.topics {
		r := t.free() % n
		if r == 0 {
			continue
		}
		floor := int32(t.free() / n)
		g.addEdge(source, node, int32(r), 0)
		order := p.preference(ti)
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(total[a], total[b]) })
		for _, b := range order {
			var cost int32 = 1
			if held[ti*n+b] > floor {
				cost = 0
			}
			choices = append(choices, choice{ti, b, g.addEdge(node, firstBroker+b, 1, cost)})
		}
		node++
	}
	for b := range n {
		if q > 0 {
			g.addEdge(firstBroker+b, sink, q, 0)
		}
		if s > 0 {
			g.addEdge(firstBroker+b, bonus, 1, 0)
		}
	}
	if s > 0 {
		g.addEdge(bonus, sink, s, 0)
	}

	if got := g.minCostMaxFlow(source, sink); got != e {
		return nil, fmt.Errorf("balance: internal error: placed %d of %d extra partitions", got, e)
	}
	for _, c := range choices {
		if g.flowOn(c.edge) > 0 {
			extra[c.topic*n+c.broker] = true
		}
	}
	return extra, nil
}

// preference is topic ti's own order of the brokers (as indexes), the last tie-break of every
// placement: the brokers sorted by a hash of the topic key and the broker id, ties by id.
//
// A hash rather than the plain id order because ties are the common case (a new topic on an
// even cluster ties everywhere), and resolving every tie towards the same low ids stacks
// topics of the same size on the same brokers: with 10 brokers and 50 topics of 5
// partitions created one by one, id order puts every topic on brokers 0-4 or 5-9, and losing
// broker 0 then needs 10 moves beyond its own 25 partitions to even the cluster out again,
// because its orphans can only go to brokers 5-9. A per-topic order mixes the topics, so a
// lost broker's partitions fit on the survivors without disturbing anything else
// (docs/assignment.md "Tie-breaks").
func (p *problem) preference(ti int) []int {
	key := p.topics[ti].key
	h := make([]uint32, len(p.brokers))
	order := make([]int, len(p.brokers))
	for b, id := range p.brokers {
		h[b] = mix(key, id)
		order[b] = b
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(h[a], h[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order
}

// mix hashes a topic key and a broker id: FNV-1a 32 over the key's bytes and the id's four
// little-endian bytes, then the MurmurHash3 finalizer so that ids differing in one low bit
// land far apart. Any fixed function would do; this one must only never read anything but
// its arguments, so that the decision stays deterministic.
func mix(key string, id int32) uint32 {
	x := uint32(0x811c9dc5)
	for i := 0; i < len(key); i++ {
		x = (x ^ uint32(key[i])) * 0x01000193
	}
	for i := range 4 {
		x = (x ^ uint32(byte(uint32(id)>>(8*i)))) * 0x01000193
	}
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return x
}
