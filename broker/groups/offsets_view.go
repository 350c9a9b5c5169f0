package groups

// The committed offsets as a change feed, for the broker's __consumer_offsets view
// (docs/groups.md, "The offsets topic view"): after every acknowledged change of a group's
// committed offsets — and at its load, with its whole state — the group's goroutine calls
// Config.OffsetsChanged. What the feed says has been acknowledged (or inherited at the
// load), exactly what OffsetFetch would return.

// CommittedOffset is one committed offset, or a tombstone for one that is gone, in the
// terms of Apache's offsets topic records (key: group, topic, partition; value: offset,
// leader epoch, metadata, commit time).
type CommittedOffset struct {
	Group     string
	Topic     string
	Partition int32
	// Deleted is true for a tombstone: the offset was deleted (OffsetDelete, DeleteGroups, a
	// deleted topic, expiry). The fields below are zero then.
	Deleted     bool
	Offset      int64
	LeaderEpoch int32
	Metadata    string
	CommitMs    int64
}

// OffsetsChanged receives a group's offset changes. With whole set, offsets is the group's
// every visible committed offset (a load, a purge, a deleted group: offsets the receiver
// holds for the group and that are not listed are gone); otherwise only the changed ones.
// It is called on the group's goroutine with no lock held; it must not block for long and
// must not call the Coordinator.
type OffsetsChanged func(group string, offsets []CommittedOffset, whole bool)

// publishOffsets reports the current state of the given partitions (tombstones for those
// without an offset now).
func (g *group) publishOffsets(parts []tp) {
	if g.c.cfg.OffsetsChanged == nil || len(parts) == 0 {
		return
	}
	out := make([]CommittedOffset, 0, len(parts))
	for _, k := range parts {
		out = append(out, g.committedOffset(k))
	}
	g.c.cfg.OffsetsChanged(g.id, out, false)
}

// publishAll reports the group's whole state.
func (g *group) publishAll() {
	if g.c.cfg.OffsetsChanged == nil {
		return
	}
	out := make([]CommittedOffset, 0, len(g.offsets))
	for k := range g.offsets {
		if co := g.committedOffset(k); !co.Deleted {
			out = append(out, co)
		}
	}
	g.c.cfg.OffsetsChanged(g.id, out, true)
}

func (g *group) committedOffset(k tp) CommittedOffset {
	co := CommittedOffset{Group: g.id, Topic: k.topic, Partition: k.partition}
	c, ok := g.visible(k)
	if !ok {
		co.Deleted = true
		return co
	}
	co.Offset, co.LeaderEpoch, co.Metadata, co.CommitMs = c.offset, c.leaderEpoch, c.metadata, c.commitMs
	return co
}
