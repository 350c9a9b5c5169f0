package groups

import (
	"cmp"
	"errors"
	"slices"
	"time"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Keeping a group's state small, on its goroutine (docs/groups.md "Compaction", "Offset
// retention"): the owner compacts its offsets file, expires offsets a retention after the
// rule says so, and removes the files of a group that is gone.

// onRetentionCheck is Apache's periodic cleanup of one group (GroupMetadataManager's
// cleanupGroupMetadata, every offsets.retention.check.interval.ms): expired offsets are
// deleted (durably, like an OffsetDelete), and a group left Empty with no offsets and no
// members is no more — its files are removed when its goroutine exits. A group only loaded
// (no offsets in its files) is removed at its first check.
func (g *group) onRetentionCheck() {
	g.retentionAt = g.retentionAt.Add(g.c.cfg.CleanupInterval)
	if expired := g.expiredOffsets(g.now()); len(expired) > 0 {
		if err := g.st.append(deletePayload(expired)); err != nil {
			g.fail(err)
			return
		}
		for _, p := range expired {
			delete(g.offsets, p)
		}
		g.publishOffsets(expired)
		g.c.m.offsetsExpired(len(expired))
		g.c.log.V(1).Info("Offsets expired", "group", g.id, "partitions", len(expired), "left", len(g.offsets))
	}
	// Pending transactional offsets keep the group (Apache's hasOffsets counts them).
	if g.isEmpty() && len(g.offsets) == 0 && len(g.txn) == 0 && len(g.members) == 0 && len(g.pending) == 0 {
		g.created, g.gone = false, true
	}
}

// create marks the group created by a JoinGroup or OffsetCommit.
func (g *group) create() { g.created, g.gone = true, false }

// expiredOffsets is Apache 3.7's GroupMetadata.removeExpiredOffsets: which committed offsets
// have outlived offsets.retention.minutes at now.
//   - A group with a protocol type that is Empty: every offset, a retention after the group
//     became Empty (however recent the commit).
//   - A consumer-protocol group with members: offsets of topics no member subscribes to, a
//     retention after their commit (Apache 4.0).
//   - A Stable consumer group whose members' subscriptions are all known: offsets of topics
//     no member subscribes to, a retention after their commit.
//   - A group that only stores offsets (no protocol type): each offset a retention after its
//     commit.
//   - Any other group (rebalancing, or members whose subscription did not parse): none.
//
// An offset committed with an explicit retention (OffsetCommit v2–4) expires at the time that
// set instead, under the same cases.
func (g *group) expiredOffsets(now time.Time) []tp {
	retention := g.c.cfg.OffsetsRetention.Milliseconds()
	nowMs := now.UnixMilli()
	var base func(c committed) int64
	subscribed := func(string) bool { return false }
	switch {
	case g.protocolType != "" && g.isEmpty():
		since := g.emptySince.UnixMilli()
		base = func(committed) int64 { return since }
	case g.cg != nil:
		// A consumer group with members: offsets of topics nobody subscribes to (Apache
		// 4.0's ConsumerGroup offset expiration).
		base = func(c committed) int64 { return c.commitMs }
		subscribed = g.isSubscribedToTopic
	case g.protocolType == "consumer" && g.state == StateStable && g.subscribedKnown:
		base = func(c committed) int64 { return c.commitMs }
		subscribed = g.isSubscribedToTopic
	case g.protocolType == "":
		base = func(c committed) int64 { return c.commitMs }
	default:
		return nil
	}
	var out []tp
	for k, c := range g.offsets {
		switch {
		case subscribed(k.topic):
		case hasPending(g.txn, k):
			// Kept while a transaction may still commit an offset of it: the delete frame
			// would drop the pending offset too (docs/groups.md "Transactional offsets").
		case c.expireMs != 0 && nowMs >= c.expireMs,
			c.expireMs == 0 && nowMs-base(c) >= retention:
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b tp) int { return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition)) })
	return out
}

// emptySinceMs is the group's emptySince as stored: 0 while it has members.
func (g *group) emptySinceMs() int64 {
	if !g.isEmpty() {
		return 0
	}
	return max(g.emptySince.UnixMilli(), 1)
}

// recordEmptySince makes a transition to or from Empty durable (ms 0: the group gained
// members), so the next coordinator counts an Empty group's retention from when it became
// Empty, and never counts a group that had members as Empty since an older time.
func (g *group) recordEmptySince(ms int64) {
	if g.st == nil || g.fatal != nil || ms == 0 && g.storedEmptySince == 0 {
		return
	}
	if err := g.st.append(emptySincePayload(ms)); err != nil {
		g.fail(err)
		return
	}
	g.storedEmptySince = ms
}

// durableState is what the group has acknowledged, as a snapshot records it. It shares the
// group's offsets map: it is for use on the goroutine only.
func (g *group) durableState() *durable {
	return &durable{protocolType: g.protocolType, consumer: g.cg != nil, emptySinceMs: g.emptySinceMs(), offsets: g.offsets,
		txn: g.txn, txnSeq: g.txnSeq}
}

// maybeCompact compacts the group's file once it has grown to twice its snapshot. A failure
// unloads the group like any storage error; the next request reloads it.
func (g *group) maybeCompact() {
	if g.st == nil || g.fatal != nil || !g.st.needsCompaction() {
		return
	}
	start := g.c.clock.Now()
	from := g.st.end
	d := g.durableState()
	if err := g.st.compact(d); err != nil {
		g.fail(err)
		return
	}
	g.storedEmptySince = d.emptySinceMs
	g.c.m.compaction()
	g.c.log.V(1).Info("Offsets file compacted", "group", g.id, "epoch", g.st.epoch, "from", from, "to", g.st.end,
		"took", g.c.clock.Since(start).String())
}

// removeFiles removes the files of a group that is gone (deleted, or found Empty without
// offsets at a retention check — all of its offsets expired, or none since it was loaded). A
// failure is logged: the files hold an empty state, so they cost only space until the next
// removal.
func (g *group) removeFiles() {
	if g.st == nil || g.fatal != nil {
		return
	}
	if err := g.st.remove(); err != nil {
		if errors.Is(err, storage.ErrFenced) {
			g.c.log.V(1).Info("Group not removed: another coordinator claimed it", "group", g.id, "err", err.Error())
			return
		}
		g.c.storageFailed(err)
		g.c.log.Error(err, "Cannot remove a deleted group's files", "group", g.id)
		return
	}
	g.c.log.V(1).Info("Group removed", "group", g.id)
}
