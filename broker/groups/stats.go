package groups

import (
	"context"
	"slices"
	"strings"
)

// GroupStats is what the broker's metrics show of one group this coordinator serves.
type GroupStats struct {
	Group string
	// State is the classic state's name, or a consumer-protocol group's (Assigning, ...).
	State string
	// Members counts the members of both protocols.
	Members int
	// Offsets are the committed offsets, sorted by topic and partition.
	Offsets []CommittedOffset
}

// Stats asks each loaded group this coordinator serves for its state, member count and
// committed offsets, through the group's own goroutine (one call each, as a request would),
// sorted by group id. It starts no group and waits for none that is loading; a group that
// does not answer before ctx ends is left out. Nothing here touches the volume.
func (c *Coordinator) Stats(ctx context.Context) []GroupStats {
	c.mu.Lock()
	if c.closed || c.owns == nil {
		c.mu.Unlock()
		return nil
	}
	var gs []*group
	for id, g := range c.groups {
		if c.owns(id) {
			gs = append(gs, g)
		}
	}
	c.mu.Unlock()
	out := make([]GroupStats, 0, len(gs))
	for _, g := range gs {
		select {
		case <-g.loaded:
		default:
			continue
		}
		if g.loadErr != nil {
			continue
		}
		if s, ok := g.stats(ctx); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b GroupStats) int { return strings.Compare(a.Group, b.Group) })
	return out
}

// stats runs one call on g's goroutine; false when g exits, refuses, or ctx ends first.
func (g *group) stats(ctx context.Context) (GroupStats, bool) {
	w := newWaiter[*GroupStats]()
	cl := &call{
		run:    func(g *group) { w.send(g.snapshotStats()) },
		refuse: func(int16) { w.send(nil) },
	}
	select {
	case g.calls <- cl:
	case <-g.done:
		return GroupStats{}, false
	case <-ctx.Done():
		return GroupStats{}, false
	}
	select {
	case s := <-w.ch:
		if s == nil {
			return GroupStats{}, false
		}
		return *s, true
	case <-ctx.Done():
		cl.withdraw()
		return GroupStats{}, false
	}
}

// snapshotStats runs on the group's goroutine. A group that no longer exists (deleted,
// expired) is left out, as ListGroups leaves it out.
func (g *group) snapshotStats() *GroupStats {
	if !g.exists() {
		return nil
	}
	s := &GroupStats{Group: g.id, State: g.state.String(), Members: len(g.members), Offsets: make([]CommittedOffset, 0, len(g.offsets))}
	if g.cg != nil {
		s.State = g.cg.stateName()
		s.Members += len(g.cg.members)
	}
	for k, o := range g.offsets {
		s.Offsets = append(s.Offsets, CommittedOffset{Topic: k.topic, Partition: k.partition, Offset: o.offset})
	}
	slices.SortFunc(s.Offsets, func(a, b CommittedOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return s
}
