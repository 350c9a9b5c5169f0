package groups

import (
	"bytes"
	"cmp"
	"slices"
)

// The consumer protocol's server-side assignors (docs/groups.md "Assignors"): pure functions
// from the members' subscriptions and their current target assignment to the next one. They
// know nothing of epochs or revocation: the group hands a partition to its new member only once
// the previous one has released it (consumer.go), whatever the assignor decides.

// tpid is one partition of a topic named by its id, as the consumer protocol names them.
type tpid struct {
	id [16]byte
	p  int32
}

func compareTPID(a, b tpid) int {
	return cmp.Or(bytes.Compare(a.id[:], b.id[:]), cmp.Compare(a.p, b.p))
}

// pset is a set of partitions.
type pset map[tpid]struct{}

func (s pset) has(p tpid) bool { _, ok := s[p]; return ok }

func (s pset) sorted() []tpid {
	out := make([]tpid, 0, len(s))
	for p := range s {
		out = append(out, p)
	}
	slices.SortFunc(out, compareTPID)
	return out
}

func (s pset) equal(o pset) bool {
	if len(s) != len(o) {
		return false
	}
	for p := range s {
		if !o.has(p) {
			return false
		}
	}
	return true
}

// minus is s without o's partitions.
func (s pset) minus(o pset) pset {
	out := pset{}
	for p := range s {
		if !o.has(p) {
			out[p] = struct{}{}
		}
	}
	return out
}

// and is s's partitions that o has too.
func (s pset) and(o pset) pset {
	out := pset{}
	for p := range s {
		if o.has(p) {
			out[p] = struct{}{}
		}
	}
	return out
}

// assignTopic is a subscribed topic as an assignor sees it.
type assignTopic struct {
	id         [16]byte
	name       string
	partitions int32
}

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id string
	// key orders members where the order decides something (range): the instance id of a
	// static member, else the member id, so a static member restarting under a new member id
	// keeps its place.
	key        string
	subscribed map[[16]byte]bool // topic ids it subscribes to (that exist)
	current    pset              // its target assignment so far
}

// assignor computes a target assignment: every partition of a subscribed topic to exactly
// one member subscribed to it (none if nobody is), keyed by member id.
type assignor struct {
	name   string
	assign func(members []assignMember, topics []assignTopic) map[string]pset
}

var assignors = []assignor{
	{name: "uniform", assign: assignUniform},
	{name: "range", assign: assignRange},
}

func assignorByName(name string) *assignor {
	for i := range assignors {
		if assignors[i].name == name {
			return &assignors[i]
		}
	}
	return nil
}

// assignUniform is Apache's UniformAssignor in intent: balanced and sticky. Members keep the
// partitions of their current assignment that they still subscribe to; unowned partitions go,
// topics with the fewest subscribers first, each to the eligible member holding the fewest;
// then partitions move one at a time from the member holding the most to one holding at least
// two fewer that subscribes to the partition's topic, until no such move exists. With
// identical subscriptions the result is balanced to ±1 and moves only the partitions the
// balance needs. Racks are not considered.
func assignUniform(members []assignMember, topics []assignTopic) map[string]pset {
	out := make(map[string]pset, len(members))
	lists := make(map[string][]tpid, len(members))
	owned := pset{}
	exists := map[[16]byte]int32{}
	for _, t := range topics {
		exists[t.id] = t.partitions
	}
	for _, m := range members {
		out[m.id] = pset{}
		for _, p := range m.current.sorted() {
			if n, ok := exists[p.id]; ok && p.p < n && m.subscribed[p.id] && !owned.has(p) {
				owned[p] = struct{}{}
				lists[m.id] = append(lists[m.id], p)
			}
		}
	}
	// Unowned partitions, topics with the fewest subscribers first (they have the fewest
	// places to go), each to the least loaded eligible member.
	subscribers := func(id [16]byte) int {
		n := 0
		for _, m := range members {
			if m.subscribed[id] {
				n++
			}
		}
		return n
	}
	order := slices.Clone(topics)
	counts := map[[16]byte]int{}
	for _, t := range order {
		counts[t.id] = subscribers(t.id)
	}
	slices.SortStableFunc(order, func(a, b assignTopic) int { return cmp.Compare(counts[a.id], counts[b.id]) })
	for _, t := range order {
		if counts[t.id] == 0 {
			continue
		}
		for p := range t.partitions {
			tp := tpid{t.id, p}
			if owned.has(tp) {
				continue
			}
			best := -1
			for i, m := range members {
				if m.subscribed[t.id] && (best < 0 || len(lists[m.id]) < len(lists[members[best].id])) {
					best = i
				}
			}
			lists[members[best].id] = append(lists[members[best].id], tp)
			owned[tp] = struct{}{}
		}
	}
	balanceUniform(members, lists)
	for id, l := range lists {
		for _, p := range l {
			out[id][p] = struct{}{}
		}
	}
	return out
}

// balanceUniform moves partitions from the most loaded members to members holding at least two
// fewer that subscribe to them, the most recently added partition first (so what a member held
// longest stays), until no move helps. Each move lowers the sum of squared loads, so it ends;
// the bound is a guard.
func balanceUniform(members []assignMember, lists map[string][]tpid) {
	byLoad := make([]int, len(members))
	for i := range byLoad {
		byLoad[i] = i
	}
	for range 1 << 20 {
		slices.SortStableFunc(byLoad, func(a, b int) int {
			return cmp.Compare(len(lists[members[b].id]), len(lists[members[a].id]))
		})
		moved := false
	search:
		for _, hi := range byLoad {
			from := members[hi].id
			for j := len(byLoad) - 1; j >= 0; j-- {
				to := members[byLoad[j]]
				if len(lists[from]) <= len(lists[to.id])+1 {
					break
				}
				l := lists[from]
				for k := len(l) - 1; k >= 0; k-- {
					if to.subscribed[l[k].id] {
						lists[to.id] = append(lists[to.id], l[k])
						lists[from] = append(l[:k:k], l[k+1:]...)
						moved = true
						break search
					}
				}
			}
		}
		if !moved {
			return
		}
	}
}

// assignRange is Apache's RangeAssignor in intent: per topic, the members subscribed to it in
// the order of their keys (instance id, else member id) each get a contiguous range — the
// first partitions%members one partition more — so members subscribing to co-partitioned
// topics get the same partition numbers of each. It is not sticky beyond that order: a member
// joining shifts the ranges after it.
func assignRange(members []assignMember, topics []assignTopic) map[string]pset {
	out := make(map[string]pset, len(members))
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b assignMember) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.id, b.id)) })
	for _, m := range sorted {
		out[m.id] = pset{}
	}
	for _, t := range topics {
		var subs []string
		for _, m := range sorted {
			if m.subscribed[t.id] {
				subs = append(subs, m.id)
			}
		}
		if len(subs) == 0 {
			continue
		}
		per, extra := int(t.partitions)/len(subs), int(t.partitions)%len(subs)
		next := int32(0)
		for i, id := range subs {
			n := per
			if i < extra {
				n++
			}
			for range n {
				out[id][tpid{t.id, next}] = struct{}{}
				next++
			}
		}
	}
	return out
}
