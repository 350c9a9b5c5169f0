package balance

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Input is everything one balancing decision looks at.
type Input struct {
	// Topics are the topics to place, in any order; their keys are unique.
	Topics []Topic
	// Alive are the brokers that may lead (docs/registry.md, "The alive set": registered and
	// Alive, not Draining or Dead), in any order; their ids are unique. Empty means keep
	// everything.
	Alive []Broker
	// Failed are partitions whose storage failed on a broker, as the brokers announce them,
	// in any order (docs/assignment.md, "The rules", rule 8).
	Failed []Failure
}

// Broker is one alive broker.
type Broker struct {
	// ID is the broker id (≥ 0).
	ID int32
	// Incarnation is the broker's current process incarnation: its heartbeat Lease epoch
	// (leaseTransitions, the registry row's epoch), which grows with every process start.
	// Pass 0 for every broker to turn restart detection off.
	Incarnation int64
}

// Topic is one topic and its current assignment.
type Topic struct {
	// Key identifies the topic, unique within one Input and stable across calls; output and
	// tie-breaks are ordered by it. The KafkaTopic object name is a good key.
	Key string
	// Partitions is the partition count (≥ 0). Partitions 0..Partitions-1 are placed.
	Partitions int32
	// Current is the current assignment, in any order. A partition it does not list has no
	// leader yet (a new topic, or one that grew) and is placed as if its leader were -1 at
	// epoch 0, so the first leader of a partition gets epoch 1.
	Current []Partition
}

// Partition is one partition's leadership.
type Partition struct {
	// Index is the partition number, 0 ≤ Index < Topic.Partitions.
	Index int32
	// Leader is the leading broker id, or -1 for none.
	Leader int32
	// Epoch is the leader epoch (≥ 0). It grows by one with every change and never goes down.
	Epoch int32
	// Incarnation is the Leader's Broker.Incarnation when it was given (or last confirmed in)
	// this leadership at Epoch. The caller stores it with the assignment and passes it back:
	// a leader that is alive under another incarnation has restarted, and keeps the partition
	// at Epoch+1 (docs/assignment.md, "Restarts: an input, level-triggered"). 0 when unknown.
	Incarnation int64
}

// Result is the assignment Assign decided.
type Result struct {
	// Topics has one entry per input topic, sorted by Key.
	Topics []Assignment
	// Moves lists every partition whose leader or epoch changed, sorted by topic key and
	// partition. Empty when nothing changed.
	Moves []Move
	// Offline lists the partitions whose storage failed on their leader and on every other
	// alive broker: they are kept where they are, at their epoch, sorted by topic key and
	// partition.
	Offline []PartitionRef
}

// Assignment is one topic's decided leaders.
type Assignment struct {
	// Key is the Topic's key.
	Key string
	// Partitions holds every partition of the topic, Partitions[i].Index == i. A partition
	// keeps Leader -1 only when no broker is alive.
	Partitions []Partition
}

// Move is one partition whose leader or leader epoch changed; it is what an Event reports.
type Move struct {
	Topic     string // the topic's Key
	Partition int32
	From      int32 // the previous leader, -1 for none; equal to To for ReasonRestarted
	To        int32
	Epoch     int32 // the new leader epoch: the previous one + 1
	Reason    Reason
}

// Reason says why a partition's leadership changed.
type Reason string

const (
	// ReasonUnassigned: the partition had no leader (a new topic or partition, or leader -1).
	ReasonUnassigned Reason = "Unassigned"
	// ReasonLeaderNotAlive: the previous leader is not in the alive set (dead, draining or
	// gone).
	ReasonLeaderNotAlive Reason = "LeaderNotAlive"
	// ReasonRebalanced: the previous leader is alive; the partition moved to even out the
	// cluster or its topic.
	ReasonRebalanced Reason = "Rebalanced"
	// ReasonRestarted: the leader is the same broker under a new incarnation; the partition
	// stays with it at the next epoch so two incarnations never write at one epoch.
	ReasonRestarted Reason = "Restarted"
)

// Topic returns the assignment of the topic with the given key.
func (r Result) Topic(key string) (Assignment, bool) {
	i, ok := slices.BinarySearchFunc(r.Topics, key, func(a Assignment, k string) int { return strings.Compare(a.Key, k) })
	if !ok {
		return Assignment{}, false
	}
	return r.Topics[i], true
}

// ErrInvalidInput is wrapped by every error Assign returns: the input breaks a documented
// precondition and nothing was decided.
var ErrInvalidInput = errors.New("invalid balance input")

// Assign decides the leader and leader epoch of every partition of in.Topics over in.Alive
// (the rules are in docs/assignment.md; each is a test):
//
//   - With no broker alive nothing changes: Result repeats the current assignment and has no
//     Moves (the caller reports the cluster Degraded and writes nothing).
//   - Otherwise every partition ends on an alive broker; every topic's partition counts per
//     broker differ by at most one, and so do the brokers' totals over all topics.
//   - Among the assignments that meet both, Assign picks one that changes the fewest leaders.
//     So a partition on an alive leader stays put unless the spreads need it moved, stable
//     inputs are a fixed point, and creating a topic moves no other partition.
//   - A changed leader gets the previous epoch + 1; so does a leader that restarted (its
//     incarnation differs from the partition's), which keeps the partition.
//
// The result depends only on the content of in, never on the order of its slices. Assign does
// not modify in. A malformed input returns an error wrapping ErrInvalidInput.
func Assign(in Input) (Result, error) {
	p, err := newProblem(in)
	if err != nil {
		return Result{}, err
	}
	failed := failedRules{}
	if len(p.brokers) > 0 {
		failed = p.failedRules(in.Failed)
		p.pinFailed(failed)
	}
	if len(p.brokers) > 0 && !p.even() {
		if err := p.rebalance(); err != nil {
			return Result{}, err
		}
	}
	offline := p.offline(failed)
	res := p.result(failed, offline)
	res.Offline = offline
	return res, nil
}

// problem is one normalized Input and the decision being made about it.
type problem struct {
	brokers     []int32 // alive ids, sorted; a broker's position here is its index
	incarnation []int64 // by broker index
	topics      []topic // sorted by key
}

type topic struct {
	key     string
	current []Partition // len = partition count; current[i].Index == i
	owner   []int32     // decided leader per partition as a broker index; -1 = not placed
	// pinned marks the partitions placed by the failure rule (pinFailed): the spreads and the
	// search leave them where they are and do not count them. Nil when none is.
	pinned []bool
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}

// newProblem validates and normalizes in, and starts the decision with every partition whose
// leader is alive kept where it is.
func newProblem(in Input) (*problem, error) {
	alive := slices.SortedFunc(slices.Values(in.Alive), func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	p := &problem{brokers: make([]int32, len(alive)), incarnation: make([]int64, len(alive))}
	for i, b := range alive {
		if b.ID < 0 {
			return nil, invalid("alive broker id %d is negative", b.ID)
		}
		if i > 0 && alive[i-1].ID == b.ID {
			return nil, invalid("alive broker %d is listed twice", b.ID)
		}
		p.brokers[i], p.incarnation[i] = b.ID, b.Incarnation
	}

	topics := slices.SortedFunc(slices.Values(in.Topics), func(a, b Topic) int { return strings.Compare(a.Key, b.Key) })
	p.topics = make([]topic, len(topics))
	for ti, t := range topics {
		if t.Key == "" {
			return nil, invalid("a topic has an empty key")
		}
		if ti > 0 && topics[ti-1].Key == t.Key {
			return nil, invalid("topic %q is listed twice", t.Key)
		}
		if t.Partitions < 0 {
			return nil, invalid("topic %q: partition count %d is negative", t.Key, t.Partitions)
		}
		cur := make([]Partition, t.Partitions)
		seen := make([]bool, t.Partitions)
		for i := range cur {
			cur[i] = Partition{Index: int32(i), Leader: -1}
		}
		for _, c := range t.Current {
			switch {
			case c.Index < 0 || c.Index >= t.Partitions:
				return nil, invalid("topic %q: partition %d is outside 0..%d", t.Key, c.Index, t.Partitions-1)
			case seen[c.Index]:
				return nil, invalid("topic %q: partition %d is listed twice", t.Key, c.Index)
			case c.Leader < -1:
				return nil, invalid("topic %q partition %d: leader %d is neither a broker id nor -1", t.Key, c.Index, c.Leader)
			case c.Epoch < 0 || c.Epoch == math.MaxInt32:
				return nil, invalid("topic %q partition %d: leader epoch %d is negative or cannot grow", t.Key, c.Index, c.Epoch)
			}
			seen[c.Index] = true
			cur[c.Index] = c
		}
		owner := make([]int32, t.Partitions)
		for i, c := range cur {
			owner[i] = p.index(c.Leader)
		}
		p.topics[ti] = topic{key: t.Key, current: cur, owner: owner}
	}
	return p, nil
}

// index is the broker index of id, or -1 when id is not alive.
func (p *problem) index(id int32) int32 {
	if id < 0 {
		return -1
	}
	if i, ok := slices.BinarySearch(p.brokers, id); ok {
		return int32(i)
	}
	return -1
}

// even reports whether the decision so far already meets the spread rules: every partition
// placed, each topic's counts per broker within one, and the brokers' totals within one.
// Then it is the unique fewest-moves answer (it moves nothing) and Assign keeps it.
func (p *problem) even() bool {
	n := len(p.brokers)
	count := make([]int32, n)
	total := make([]int32, n)
	for _, t := range p.topics {
		clear(count)
		for i, o := range t.owner {
			if t.isPinned(i) {
				continue
			}
			if o < 0 {
				return false
			}
			count[o]++
			total[o]++
		}
		if spread(count) > 1 {
			return false
		}
	}
	return spread(total) <= 1
}

// isPinned reports whether partition i was placed by the failure rule.
func (t *topic) isPinned(i int) bool { return t.pinned != nil && t.pinned[i] }

// free is the number of partitions the spreads count: those not pinned.
func (t *topic) free() int {
	n := len(t.owner)
	for i := range t.pinned {
		if t.pinned[i] {
			n--
		}
	}
	return n
}

func spread(counts []int32) int32 {
	if len(counts) == 0 {
		return 0
	}
	return slices.Max(counts) - slices.Min(counts)
}

// result turns the decided owners into leaders, epochs and moves. A partition whose leader
// announced a failure at its epoch gets the next epoch wherever it goes, unless it is offline.
func (p *problem) result(failed failedRules, offline []PartitionRef) Result {
	res := Result{Topics: make([]Assignment, len(p.topics))}
	for ti, t := range p.topics {
		parts := make([]Partition, len(t.current))
		for i, cur := range t.current {
			o := t.owner[i]
			if o < 0 { // nothing is alive: keep the current assignment
				parts[i] = cur
				continue
			}
			next := Partition{Index: cur.Index, Leader: p.brokers[o], Epoch: cur.Epoch, Incarnation: p.incarnation[o]}
			why := p.change(cur, next)
			key := [2]int32{int32(ti), int32(i)}
			failedHere := failed.here[key] || why == ReasonRebalanced && slices.Contains(failed.avoid[key], p.index(cur.Leader))
			if failedHere && (why == "" || why == ReasonRebalanced) &&
				!slices.Contains(offline, PartitionRef{Topic: t.key, Partition: int32(i)}) {
				why = ReasonStorageFailed
			}
			if why != "" {
				next.Epoch++
				res.Moves = append(res.Moves, Move{Topic: t.key, Partition: cur.Index, From: cur.Leader, To: next.Leader, Epoch: next.Epoch, Reason: why})
			}
			parts[i] = next
		}
		res.Topics[ti] = Assignment{Key: t.key, Partitions: parts}
	}
	return res
}

// change names why a partition led by cur is now led as next, or returns "" when its
// leadership is unchanged and keeps its epoch. The first check that holds wins.
func (p *problem) change(cur, next Partition) Reason {
	switch {
	case cur.Leader == -1:
		return ReasonUnassigned
	case p.index(cur.Leader) < 0:
		return ReasonLeaderNotAlive
	case cur.Leader != next.Leader:
		return ReasonRebalanced
	case cur.Incarnation != next.Incarnation:
		return ReasonRestarted
	}
	return ""
}
