package broker

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
)

// What the data-plane handlers (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch) share:
// finding the log of a requested partition, the leader-epoch checks, the storage errors'
// Kafka codes, and the KIP-951 leader hints (docs/dataplane.md).

// servedPartition is one requested partition as the request's view and this broker's
// Partitions see it.
type servedPartition struct {
	part cluster.Partition // from the view
	log  *storage.Log      // set only when code is 0
	code int16
}

// takeoverWait bounds how long one Produce or Fetch waits, over all its partitions, for
// partitions this broker is still taking over at the epoch the request's view gives it
// (partitionAfterTakeover). A takeover takes milliseconds; a refusal instead would cost the
// client its retry backoff (kgo: 250 ms at least), since the answer names this broker, which
// the client already asked (docs/dataplane.md, "The client-side gap of a move").
const takeoverWait = 2 * time.Second

// partition finds partition index of t for a data request carrying currentEpoch (-1: none),
// in Apache's order (Partition.getLocalLog): unknown index → UNKNOWN_TOPIC_OR_PARTITION; a
// current epoch below the view's → FENCED_LEADER_EPOCH, above it → UNKNOWN_LEADER_EPOCH; then
// not led here → NOT_LEADER_OR_FOLLOWER. Led here by the view but not (yet) served —
// no topic id yet, no data directory, takeover queued or running, fenced by a newer epoch
// than the view shows, or held at another epoch — is NOT_LEADER_OR_FOLLOWER too; a partition
// a storage error took offline is KAFKA_STORAGE_ERROR.
func (rc *requestContext) partition(t *cluster.Topic, index int32, currentEpoch int32) servedPartition {
	return rc.findPartition(t, index, currentEpoch, 0)
}

// partitionAfterTakeover is partition for a Produce or a Fetch: a partition this broker is
// taking over at the view's epoch is waited for — until its takeover ends, limit (the
// request's own timeout or max wait) passes, or takeoverWait since the request's first wait
// — and then answered as it is: served once taken over, NOT_LEADER_OR_FOLLOWER if the wait
// ran out or it was fenced, KAFKA_STORAGE_ERROR if it failed.
func (rc *requestContext) partitionAfterTakeover(t *cluster.Topic, index int32, currentEpoch int32, limit time.Duration) servedPartition {
	return rc.findPartition(t, index, currentEpoch, limit)
}

func (rc *requestContext) findPartition(t *cluster.Topic, index int32, currentEpoch int32, wait time.Duration) servedPartition {
	if index < 0 || int(index) >= len(t.Partitions) {
		return servedPartition{part: cluster.Partition{Index: index, Leader: -1, LeaderEpoch: -1}, code: kerr.UnknownTopicOrPartition.Code}
	}
	sp := servedPartition{part: t.Partitions[index]}
	switch {
	case currentEpoch >= 0 && currentEpoch < sp.part.LeaderEpoch:
		sp.code = kerr.FencedLeaderEpoch.Code
		return sp
	case currentEpoch > sp.part.LeaderEpoch:
		sp.code = kerr.UnknownLeaderEpoch.Code
		return sp
	}
	sp.code = kerr.NotLeaderForPartition.Code
	if sp.part.Leader != rc.self || t.ID == ([16]byte{}) {
		return sp
	}
	key := partitionKey{t.ID, index}
	l := rc.h.Partitions.Leader(key)
	if wait > 0 && l != nil && l.epoch == sp.part.LeaderEpoch && l.phase == phaseTakingOver {
		l = rc.awaitTakeover(key, l, wait)
	}
	if l == nil || l.epoch != sp.part.LeaderEpoch {
		return sp
	}
	switch l.phase {
	case phaseServing:
		sp.log, sp.code = l.log, 0
	case phaseFailed:
		sp.code = kerr.KafkaStorageError.Code
	}
	return sp
}

// awaitTakeover waits until key's leader entry is no longer l in its takeover (Partitions
// publishes each takeover's outcome, then wakes Changed) or the wait's bound passes, and
// returns the entry then.
func (rc *requestContext) awaitTakeover(key partitionKey, l *leader, limit time.Duration) *leader {
	if rc.takeoverDeadline.IsZero() {
		rc.takeoverDeadline = time.Now().Add(min(takeoverWait, limit))
	}
	left := time.Until(rc.takeoverDeadline)
	if left <= 0 {
		return l
	}
	timer := time.NewTimer(left)
	defer timer.Stop()
	for l != nil && l.phase == phaseTakingOver {
		changed := rc.h.Partitions.Changed() // taken before the entry is read: no wake-up is missed
		if cur := rc.h.Partitions.Leader(key); cur != l {
			l = cur
			continue
		}
		select {
		case <-changed:
		case <-timer.C:
			return l
		case <-rc.ctx.Done():
			return l
		}
	}
	return l
}

// storageCode is the Kafka error code of an error from broker/storage (docs/storage.md,
// "Errors and the Kafka codes they map to"); 0 for nil.
func storageCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, storage.ErrNotLeader), errors.Is(err, storage.ErrFenced):
		return kerr.NotLeaderForPartition.Code
	case errors.Is(err, storage.ErrStorage):
		return kerr.KafkaStorageError.Code
	case errors.Is(err, storage.ErrInvalidRecord):
		return kerr.InvalidRecord.Code
	case errors.Is(err, storage.ErrCorruptMessage):
		return kerr.CorruptMessage.Code
	case errors.Is(err, storage.ErrMessageTooLarge):
		return kerr.MessageTooLarge.Code
	case errors.Is(err, storage.ErrRecordListTooLarge):
		return kerr.RecordListTooLarge.Code
	case errors.Is(err, storage.ErrInvalidRequiredAcks):
		return kerr.InvalidRequiredAcks.Code
	case errors.Is(err, storage.ErrOutOfOrderSequence):
		return kerr.OutOfOrderSequenceNumber.Code
	case errors.Is(err, storage.ErrInvalidProducerEpoch):
		return kerr.InvalidProducerEpoch.Code
	case errors.Is(err, storage.ErrInvalidTxnState):
		return kerr.InvalidTxnState.Code
	case errors.Is(err, storage.ErrTransactionCoordinatorFenced):
		return kerr.TransactionCoordinatorFenced.Code
	case errors.Is(err, storage.ErrOffsetOutOfRange):
		return kerr.OffsetOutOfRange.Code
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// The request's own timeout, or the server closing under it: the append may still
		// become durable, as after a Kafka produce timeout.
		return kerr.RequestTimedOut.Code
	}
	return kerr.UnknownServerError.Code
}

// hintKey names a partition: one that answered NOT_LEADER_OR_FOLLOWER (or
// FENCED_LEADER_EPOCH), for its KIP-951 hint.
type hintKey struct {
	topic string
	index int32
}

// hintTarget is one partition answer that gets a KIP-951 hint: set fills its CurrentLeader.
type hintTarget struct {
	key hintKey
	set func(leader, epoch int32)
}

// hintTargets collects, in the order they are answered, the partitions of one response that
// get KIP-951 hints. Only the request's own goroutine adds to it.
type hintTargets []hintTarget

func (h *hintTargets) add(topic string, index int32, set func(leader, epoch int32)) {
	*h = append(*h, hintTarget{hintKey{topic, index}, set})
}

// resolve fills every target's CurrentLeader with the leader and epoch the view gives its
// partition and returns the distinct endpoints of those leaders on the request's listener —
// the response's NodeEndpoints. It reads the view afresh: the request may have waited (an
// acks=-1 append, a long poll) while the partition moved, and the hint is worth most when it
// names the newest leader. A partition whose leader the answer's broker list would not hold
// (unassigned, fenced, no address on this listener) gets no hint, so the client refreshes its
// metadata.
func (h hintTargets) resolve(rc *requestContext) []endpoint {
	fresh := *rc
	fresh.view = rc.h.View.Snapshot()
	listed := fresh.brokers(false)
	var eps []endpoint
	seen := map[int32]bool{}
	for _, target := range h {
		t, ok := fresh.view.Topic(target.key.topic)
		if !ok || target.key.index < 0 || int(target.key.index) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[target.key.index]
		for _, e := range listed {
			if e.id == p.Leader && p.Leader >= 0 {
				target.set(p.Leader, p.LeaderEpoch)
				if !seen[e.id] {
					seen[e.id] = true
					eps = append(eps, e)
				}
				break
			}
		}
	}
	return eps
}
