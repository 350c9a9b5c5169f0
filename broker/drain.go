package broker

import (
	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// workHere says what the view still gives this broker: partitions it leads, and whether it
// can still be picked as a group coordinator. A broker may close its listeners once both are
// gone (DESIGN.md "Draining").
//
// Groups follow coordinator.Pick over the registry, which only ever picks an Alive broker; so
// "no group coordinated here" is exactly "the registry no longer lists this broker Alive" —
// the registry has seen the draining beat and every group has a new coordinator.
func workHere(s *Snapshot, self int32) (partitions int, coordinatesGroups bool) {
	for _, t := range s.Topics {
		for _, p := range t.Partitions {
			if p.Leader == self {
				partitions++
			}
		}
	}
	row, ok := s.Row(self)
	return partitions, ok && row.Health == v1alpha1.BrokerAlive
}

// drained is true once the view gives this broker no partition and no group.
func drained(s *Snapshot, self int32) bool {
	partitions, groups := workHere(s, self)
	return partitions == 0 && !groups
}
