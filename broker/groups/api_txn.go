package groups

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/coordinator"
)

// TxnOffsetCommit (key 28) v0–3: Apache 3.7's GroupCoordinator.handleTxnCommitOffsets. The
// offsets are stored as pending under the producer id and epoch — durable and fenced-in
// before the answer, like an OffsetCommit, and invisible to OffsetFetch — until the
// transaction's marker reaches CompleteTransaction (docs/groups.md "Transactional offsets").
//
//   - An empty group id is INVALID_GROUP_ID; unknown topics or partitions answer
//     UNKNOWN_TOPIC_OR_PARTITION before the group is asked; not ours, loading, unavailable as
//     for every group API.
//   - A missing group is created (Empty). v3's member fields: an instance id naming another
//     member's static place → FENCED_INSTANCE_ID; a member id the group does not have →
//     UNKNOWN_MEMBER_ID; a generation ≥ 0 other than the group's → ILLEGAL_GENERATION.
//     Generation −1 and no member id are accepted whatever the group's state (OffsetCommit
//     refuses them in a group with members). In a consumer-protocol group the member epoch
//     is the generation, checked as OffsetCommit checks it (UNKNOWN_MEMBER_ID,
//     STALE_MEMBER_EPOCH; no member and epoch −1 only while the group has no members).
//   - A producer epoch below one this partition recorded for the producer's pending offsets:
//     INVALID_PRODUCER_EPOCH (Apache's log refuses the transactional batch).
//   - Metadata over offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE for the partition;
//     a frame over 64 MiB: INVALID_COMMIT_OFFSET_SIZE.
func (c *Coordinator) TxnOffsetCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest) (*kmsg.TxnOffsetCommitResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	codes, slots, ids := c.knownPartitions(len(req.Topics),
		func(t int) (string, int) { return req.Topics[t].Topic, len(req.Topics[t].Partitions) },
		func(t, p int) int32 { return req.Topics[t].Partitions[p].Partition })
	now := c.clock.Now().UnixMilli()
	entries := make([]commitEntry, 0, len(slots))
	for _, sl := range slots {
		t := req.Topics[sl.t]
		p := t.Partitions[sl.p]
		e := commitEntry{offsetEntry: offsetEntry{
			tp:        tp{topic: t.Topic, partition: p.Partition},
			committed: committed{topicID: ids[t.Topic], offset: p.Offset, leaderEpoch: -1, commitMs: now},
		}}
		if p.Metadata != nil {
			e.metadata = *p.Metadata
		}
		if req.Version >= 2 {
			e.leaderEpoch = p.LeaderEpoch
		}
		e.tooLarge = javaLength(e.metadata) > c.cfg.MaxMetadataSize
		entries = append(entries, e)
	}
	if len(entries) > 0 {
		a := txnCommitArgs{pid: req.ProducerID, epoch: req.ProducerEpoch, generation: -1, entries: entries}
		if req.Version >= 3 {
			a.generation, a.memberID = req.Generation, req.MemberID
			if req.InstanceID != nil {
				a.instanceID = strp(*req.InstanceID)
			}
		}
		var results []int16
		if req.Group == "" {
			results = fill(len(entries), kerr.InvalidGroupID.Code)
		} else {
			var err error
			if results, err = c.txnCommit(ctx, req.Group, a); err != nil {
				return nil, err
			}
		}
		for i, s := range slots {
			codes[s.t][s.p] = results[i]
		}
	}
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for ti, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[ti][pi]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// txnCommit records the group in its partition's transaction index (durable, fenced-in),
// then has the group store the pending offsets, holding the partition's lock throughout so
// no marker of the partition runs in between.
func (c *Coordinator) txnCommit(ctx context.Context, groupID string, a txnCommitArgs) ([]int16, error) {
	n := len(a.entries)
	if a.pid < 0 || a.epoch < 0 {
		return fill(n, kerr.InvalidProducerIDMapping.Code), nil // Apache's log refuses it as not transactional
	}
	part, release, code, err := c.lockTxnPartition(ctx, coordinator.Partition(groupID, c.cfg.OffsetsPartitions), groupID)
	if err != nil || code != 0 {
		return fill(n, code), err
	}
	defer release()
	pr, err := c.producer(part, a.pid)
	if err != nil {
		c.storageFailed(err)
		c.log.Error(err, "Cannot read a transaction index", "partition", part.p, "producerID", a.pid)
		return fill(n, kerr.NotCoordinator.Code), nil
	}
	if pr.maxEpoch() > a.epoch {
		return fill(n, kerr.InvalidProducerEpoch.Code), nil
	}
	if err := c.record(part, a.pid, pr, groupID, a.epoch); err != nil {
		c.storageFailed(err)
		return fill(n, kerr.NotCoordinator.Code), nil
	}
	return do(ctx, c, groupID,
		func(g *group, w *waiter[[]int16]) { w.send(g.handleTxnCommit(a)) },
		func(code int16) []int16 { return fill(n, code) })
}

// CompleteTransaction applies (commit) or drops (abort) producer producerID's pending
// transactional offsets in every group of __consumer_offsets partition offsetsPartition: the
// broker's WriteTxnMarkers handler calls it for a marker on that partition. It returns NONE
// only when every such group has made the outcome durable under its fence; a resent marker
// finds nothing left and answers NONE again. Committed pending offsets replace the committed
// ones unless a plain commit of the partition (or another transaction's offset written
// later) was acknowledged after them (Apache's completePendingTxnOffsetCommit).
//
// Other answers, each to be resent by the transaction coordinator except 47:
// NOT_LEADER_OR_FOLLOWER (6) — this broker does not coordinate the partition at its view's
// epoch, was deposed, or its storage failed; REQUEST_TIMED_OUT (7) — ctx ended first;
// INVALID_PRODUCER_EPOCH (47) — the partition recorded a newer producer epoch than the
// marker's (Apache's log refuses the marker), and nothing is completed.
func (c *Coordinator) CompleteTransaction(ctx context.Context, offsetsPartition int32, producerID int64, producerEpoch int16, commit bool) int16 {
	if offsetsPartition < 0 || offsetsPartition >= c.cfg.OffsetsPartitions {
		return kerr.UnknownTopicOrPartition.Code
	}
	part, release, code, err := c.lockTxnPartition(ctx, offsetsPartition, c.probeGroup(offsetsPartition))
	if err != nil {
		return kerr.RequestTimedOut.Code
	}
	if code != 0 {
		return markerCode(code)
	}
	defer release()
	pr, err := c.producer(part, producerID)
	if err != nil {
		c.storageFailed(err)
		c.log.Error(err, "Cannot read a transaction index", "partition", part.p, "producerID", producerID)
		return kerr.NotLeaderForPartition.Code
	}
	if pr.maxEpoch() > producerEpoch {
		return kerr.InvalidProducerEpoch.Code
	}
	for _, id := range pr.sortedGroups() {
		for {
			code, err := do(ctx, c, id,
				func(g *group, w *waiter[int16]) { w.send(g.handleTxnComplete(producerID, producerEpoch, commit)) },
				func(code int16) int16 { return code })
			switch {
			case err != nil:
				return kerr.RequestTimedOut.Code
			case code == kerr.CoordinatorLoadInProgress.Code:
				continue // do waited LoadWait; wait on until the group is loaded or ctx ends
			case code != 0:
				return markerCode(code)
			}
			break
		}
	}
	// Still the partition's owner after the groups completed: no coordinator claimed it
	// since ours, so none can have listed a group this index does not show.
	if err := part.fence.Check(part.epoch); err != nil {
		if errors.Is(err, storage.ErrFenced) {
			part.fencedAt, part.epoch = part.epoch, -1
		}
		part.dropProducers()
		c.storageFailed(err)
		return kerr.NotLeaderForPartition.Code
	}
	c.forget(part, producerID)
	return 0
}

// markerCode is the marker answer for a group's status code: the transaction coordinator
// resends on NOT_LEADER_OR_FOLLOWER, as it does when Apache's partition moved.
func markerCode(code int16) int16 {
	switch code {
	case kerr.InvalidProducerEpoch.Code:
		return code
	default:
		return kerr.NotLeaderForPartition.Code
	}
}

type txnCommitArgs struct {
	pid        int64
	epoch      int16
	generation int32
	memberID   string
	instanceID *string
	entries    []commitEntry
}

// handleTxnCommit is Apache's doTxnCommitOffsets on the group's goroutine.
func (g *group) handleTxnCommit(a txnCommitArgs) []int16 {
	codes := make([]int16, len(a.entries))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	if g.state == StateDead {
		return all(kerr.CoordinatorNotAvailable.Code)
	}
	if code := g.validateTxnOffsetCommit(a); code != 0 {
		return all(code)
	}
	if p := g.txn[a.pid]; p != nil && p.epoch > a.epoch {
		return all(kerr.InvalidProducerEpoch.Code)
	}
	if !g.exists() {
		// A missing group is created, Empty (Apache's handleTxnCommitOffsets).
		if code := g.ensureStore(); code != 0 {
			return all(code)
		}
		g.create()
	}
	var store []offsetEntry
	var idx []int
	for i, e := range a.entries {
		if e.tooLarge {
			codes[i] = kerr.OffsetMetadataTooLarge.Code
			continue
		}
		store = append(store, e.offsetEntry)
		idx = append(idx, i)
	}
	if len(store) == 0 {
		return codes
	}
	set := func(code int16) []int16 {
		for _, i := range idx {
			codes[i] = code
		}
		return codes
	}
	if code := g.ensureStore(); code != 0 {
		return set(code)
	}
	if code := g.fenceCheck(); code != 0 {
		return set(code)
	}
	seq := g.txnSeq
	payload := txnCommitPayload(a.pid, a.epoch, seq, store)
	if len(payload) > maxFrame {
		return set(kerr.InvalidCommitOffsetSize.Code)
	}
	start := g.c.clock.Now()
	err := g.st.append(payload)
	g.c.m.commit(g.c.clock.Since(start), err)
	if err != nil {
		g.fail(err)
		return set(errorCode(err))
	}
	g.txnSeq = applyTxnCommit(g.txn, g.txnSeq, a.pid, a.epoch, seq, store)
	return set(0)
}

// validateTxnOffsetCommit: Apache 3.7's checks for a transactional commit of a classic
// group (only what the request sets is enforced), Apache 4.0's ConsumerGroup
// validateOffsetCommit for a consumer group (isTransactional: no version rule).
func (g *group) validateTxnOffsetCommit(a txnCommitArgs) int16 {
	if g.cg != nil {
		return g.validateConsumerCommit(a.memberID, a.generation, 9)
	}
	if a.instanceID != nil {
		if cur, ok := g.static[*a.instanceID]; ok && cur != a.memberID {
			return kerr.FencedInstanceID.Code
		}
	}
	if a.memberID != "" && g.members[a.memberID] == nil {
		return kerr.UnknownMemberID.Code
	}
	if a.generation >= 0 && a.generation != g.generation {
		return kerr.IllegalGeneration.Code
	}
	return 0
}

// handleTxnComplete applies or drops producer pid's pending offsets, durably. A group with
// no files is claimed all the same (an empty snapshot): a deposed coordinator that lists it
// in the transaction index and creates it late must find its fence taken.
func (g *group) handleTxnComplete(pid int64, epoch int16, commit bool) int16 {
	if code := g.ensureStore(); code != 0 {
		return code
	}
	if code := g.fenceCheck(); code != 0 {
		return code
	}
	p := g.txn[pid]
	if p == nil {
		return 0
	}
	if p.epoch > epoch {
		return kerr.InvalidProducerEpoch.Code
	}
	if err := g.st.append(txnCompletePayload(pid, commit)); err != nil {
		g.fail(err)
		return errorCode(err)
	}
	if changed := completeTxn(g.offsets, g.txn, pid, commit); len(changed) > 0 {
		g.publishOffsets(changed)
	}
	return 0
}
