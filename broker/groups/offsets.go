package groups

import (
	"cmp"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Committed offsets on the group's goroutine (docs/groups.md "State machine": OffsetCommit,
// OffsetFetch, OffsetDelete, DeleteGroups). Every change is appended to the group's file and
// acknowledged only when durable and still fenced-in (store.append); the in-memory offsets
// change only after that, so whatever OffsetFetch returns has been acknowledged.

type commitEntry struct {
	offsetEntry
	tooLarge bool // metadata over offset.metadata.max.bytes
}

type commitArgs struct {
	version    int16
	generation int32
	memberID   string
	instanceID *string
	entries    []commitEntry
}

// handleCommit answers one code per entry.
func (g *group) handleCommit(a commitArgs) []int16 {
	codes := make([]int16, len(a.entries))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	if !g.exists() {
		if a.generation >= 0 {
			// A commit from an older generation of a group that is gone, or a confused client.
			return all(kerr.IllegalGeneration.Code)
		}
		// A "simple" commit: the group uses Kafka only to store offsets.
		if code := g.ensureStore(); code != 0 {
			return all(code)
		}
		g.create()
	}
	if code := g.validateOffsetCommit(a); code != 0 {
		return all(code)
	}
	switch {
	case g.cg != nil:
	case g.state == StateEmpty:
	case g.state == StateStable || g.state == StatePreparingRebalance:
		// The commit counts as a heartbeat; during PreparingRebalance the member learns of the
		// rebalance from its next heartbeat.
		m := g.members[a.memberID]
		g.scheduleExpiry(m, m.sessionTimeout)
	default:
		// CompletingRebalance: the member has the new generation but not its assignment.
		return all(kerr.RebalanceInProgress.Code)
	}
	g.storeOffsets(a.entries, codes)
	return codes
}

func (g *group) validateOffsetCommit(a commitArgs) int16 {
	if g.cg != nil {
		return g.validateConsumerCommit(a.memberID, a.generation, a.version)
	}
	switch {
	case a.generation < 0 && g.state == StateEmpty:
		// An admin client or a consumer not using group management.
		return 0
	case a.generation >= 0 || a.memberID != "" || a.instanceID != nil:
		if code := g.validateCurrentMember(a.memberID, a.instanceID); code != 0 {
			return code
		}
		if a.generation != g.generation {
			return kerr.IllegalGeneration.Code
		}
		return 0
	case g.state != StateEmpty:
		// Only members commit to a group that has members.
		return kerr.UnknownMemberID.Code
	}
	return 0
}

func (g *group) storeOffsets(entries []commitEntry, codes []int16) {
	var store []offsetEntry
	var idx []int
	for i, e := range entries {
		if e.tooLarge {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		store = append(store, e.offsetEntry)
		idx = append(idx, i)
	}
	if len(store) == 0 {
		return
	}
	set := func(code int16) {
		for _, i := range idx {
			codes[i] = code
		}
	}
	if code := g.ensureStore(); code != 0 {
		set(code)
		return
	}
	payload := commitPayload(g.protocolType, store)
	if len(payload) > maxFrame {
		set(kerr.InvalidCommitOffsetSize.Code)
		return
	}
	start := g.c.clock.Now()
	err := g.st.append(payload)
	g.c.m.commit(g.c.clock.Since(start), err)
	if err != nil {
		g.fail(err)
		set(errorCode(err))
		return
	}
	keys := make([]tp, len(store))
	for i, e := range store {
		g.offsets[e.tp] = e.committed
		keys[i] = e.tp
	}
	markStale(g.txn, keys)
	g.publishOffsets(keys)
	set(0)
}

// errorCode is the Kafka error a failed load or append is answered with. Apache answers a
// lost partition and a storage error on __consumer_offsets both NOT_COORDINATOR: the client
// finds the coordinator again and retries.
func errorCode(err error) int16 {
	switch {
	case errors.Is(err, storage.ErrFenced), errors.Is(err, storage.ErrStorage), errors.Is(err, errUnloaded):
		return kerr.NotCoordinator.Code
	default:
		return kerr.CoordinatorNotAvailable.Code
	}
}

type fetchArgs struct {
	all   bool // Topics null (v2+): everything the group has committed
	parts []tp
	// memberID and memberEpoch are OffsetFetch v9's: a consumer-protocol member's fetch is
	// checked against its epoch (nil, -1: an admin client's).
	memberID    *string
	memberEpoch int32
	// requireStable (v7+): a partition with pending transactional offsets answers
	// UNSTABLE_OFFSET_COMMIT instead of its committed offset.
	requireStable bool
}

type fetchPart struct {
	tp
	offset      int64
	leaderEpoch int32
	metadata    string
	code        int16 // UNSTABLE_OFFSET_COMMIT, else 0
}

type fetchResult struct {
	code  int16
	parts []fetchPart
}

// handleFetch answers from memory, which holds exactly what this coordinator has acknowledged
// (and what it inherited), after checking that the fence still holds its epoch — so a
// coordinator that was deposed without noticing never serves offsets a newer one may have
// moved on. Plain commits are applied only once acknowledged, so the only unstable offsets
// are pending transactional ones: with require_stable such a partition answers
// UNSTABLE_OFFSET_COMMIT (offset -1), as Apache's getOffsets does; without it the last
// committed offset.
func (g *group) handleFetch(a fetchArgs) fetchResult {
	if code := g.fenceCheck(); code != 0 {
		return fetchResult{code: code}
	}
	if g.cg != nil {
		if code := g.validateConsumerFetch(a.memberID, a.memberEpoch); code != 0 {
			return fetchResult{code: code}
		}
	}
	var res fetchResult
	if a.all {
		for k := range g.offsets {
			if c, ok := g.visible(k); ok {
				res.parts = append(res.parts, g.stable(a, fetchPart{tp: k, offset: c.offset, leaderEpoch: c.leaderEpoch, metadata: c.metadata}))
			}
		}
		slices.SortFunc(res.parts, func(a, b fetchPart) int {
			return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
		return res
	}
	res.parts = make([]fetchPart, len(a.parts))
	for i, k := range a.parts {
		p := fetchPart{tp: k, offset: -1, leaderEpoch: -1}
		if c, ok := g.visible(k); ok {
			p.offset, p.leaderEpoch, p.metadata = c.offset, c.leaderEpoch, c.metadata
		}
		res.parts[i] = g.stable(a, p)
	}
	return res
}

// stable answers p UNSTABLE_OFFSET_COMMIT when the fetch requires stable offsets and a
// transaction has a pending offset of the partition.
func (g *group) stable(a fetchArgs, p fetchPart) fetchPart {
	if a.requireStable && hasPending(g.txn, p.tp) {
		return fetchPart{tp: p.tp, offset: -1, leaderEpoch: -1, code: kerr.UnstableOffsetCommit.Code}
	}
	return p
}

// visible: a committed offset is hidden when the broker's view knows the topic under another
// id — the topic was deleted and re-created, and the old incarnation's offsets must never
// resurface (docs/groups.md "Takeover, commit, deposition", deleted topics), even where the
// purge did not reach them.
func (g *group) visible(k tp) (committed, bool) {
	c, ok := g.offsets[k]
	if !ok {
		return c, false
	}
	if c.topicID != ([16]byte{}) {
		if id, _, known := g.c.cfg.Topics.Topic(k.topic); known && id != ([16]byte{}) && id != c.topicID {
			return c, false
		}
	}
	return c, true
}

// handleOffsetDelete is Apache's handleDeleteOffsets: an Empty group loses the offsets; an
// active consumer group loses those of topics nobody subscribes to (the others answer
// GROUP_SUBSCRIBED_TO_TOPIC); another active group is NON_EMPTY_GROUP.
func (g *group) handleOffsetDelete(parts []tp) (int16, []int16) {
	if !g.exists() {
		return kerr.GroupIDNotFound.Code, nil
	}
	codes := make([]int16, len(parts))
	var eligible []tp
	switch {
	case g.isEmpty():
		eligible = parts
	case g.protocolType == "consumer":
		for i, p := range parts {
			if g.isSubscribedToTopic(p.topic) {
				codes[i] = kerr.GroupSubscribedToTopic.Code
			} else {
				eligible = append(eligible, p)
			}
		}
	default:
		return kerr.NonEmptyGroup.Code, nil
	}
	var present []tp
	for _, p := range eligible {
		if _, ok := g.offsets[p]; ok || hasPending(g.txn, p) {
			present = append(present, p)
		}
	}
	if len(present) > 0 {
		if err := g.st.append(deletePayload(present)); err != nil {
			g.fail(err)
			return errorCode(err), nil
		}
		for _, p := range present {
			delete(g.offsets, p)
		}
		dropPending(g.txn, present)
		g.publishOffsets(present)
	}
	return 0, codes
}

// handleDeleteGroup: an Empty group is deleted with its offsets; one with members is
// NON_EMPTY_GROUP.
func (g *group) handleDeleteGroup() int16 {
	if !g.exists() {
		return kerr.GroupIDNotFound.Code
	}
	if !g.isEmpty() {
		return kerr.NonEmptyGroup.Code
	}
	if g.st != nil {
		if err := g.st.append(deleteGroupPayload()); err != nil {
			g.fail(err)
			return errorCode(err)
		}
	}
	clear(g.offsets)
	clear(g.txn) // Apache drops a deleted group's pending transactional offsets with it
	if g.cg != nil {
		g.dropConsumer()
	}
	g.publishAll()
	g.protocolType = ""
	g.created, g.gone = false, true
	clear(g.pending)
	g.transition(StateDead)
	return 0
}

// purgeTopic removes the offsets of a deleted topic's incarnation (Apache's
// handleDeletedPartitions).
func (g *group) purgeTopic(topic string, id [16]byte) error {
	probe := &durable{offsets: map[tp]committed{}, txn: cloneTxn(g.txn)}
	for k, c := range g.offsets {
		if k.topic == topic {
			probe.offsets[k] = c
		}
	}
	if probe.purge(topic, id) == 0 {
		return nil
	}
	if err := g.st.append(purgePayload(topic, id)); err != nil {
		g.fail(err)
		return err
	}
	d := &durable{offsets: g.offsets, txn: g.txn}
	d.purge(topic, id)
	g.publishAll()
	return nil
}
