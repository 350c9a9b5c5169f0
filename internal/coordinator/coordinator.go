package coordinator

import (
	"slices"
)

// FNV-1a 32-bit parameters.
const (
	offsetBasis32 uint32 = 0x811c9dc5
	prime32       uint32 = 0x01000193
)

// FNV1a32 is the 32-bit FNV-1a hash of s. It is spelled out rather than taken from hash/fnv so
// that the group→coordinator mapping is visibly a fixed function of the bytes: it must never
// change between releases, or every group would move on upgrade.
func FNV1a32(s string) uint32 {
	h := offsetBasis32
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= prime32
	}
	return h
}

// DefaultPartitions is Apache's offsets.topic.num.partitions: how many partitions of
// __consumer_offsets the groups hash to unless the cluster says otherwise.
const DefaultPartitions int32 = 50

// Partition is the partition of __consumer_offsets that groupID hashes to among partitions
// (at least 1): FNV1a32(groupID) modulo partitions. Every group of one partition has the same
// coordinator, that partition's leader (PickPartition), as in Apache Kafka, where a group's
// coordinator is the leader of its offsets partition.
func Partition(groupID string, partitions int32) int32 {
	return int32(FNV1a32(groupID) % uint32(max(partitions, 1)))
}

// Pick returns the coordinator of groupID when __consumer_offsets has partitions partitions:
// the leader of the group's partition (PickPartition(Partition(groupID, partitions), ...)),
// or ok=false when no broker is alive (COORDINATOR_NOT_AVAILABLE).
func Pick(groupID string, partitions int32, registered, alive []int32) (id int32, ok bool) {
	return PickPartition(Partition(groupID, partitions), registered, alive)
}

// PickPartition returns the leader of partition of __consumer_offsets — the coordinator of
// every group hashing to it — or ok=false when no broker is alive.
//
// registered is every registered broker id — Alive, Draining and Dead alike — and alive the
// ids whose health is Alive; both in any order. The slot is the partition modulo the number
// of registered brokers, taken over the ids sorted numerically: holding the divisor at the
// registered count is what keeps coordinatorship stable when a broker dies or drains. If the
// slot's broker is not alive, the partition falls back to alive[slot % len(alive)] (sorted),
// so only the partitions (and groups) that lived on a lost broker move, and none onto a
// broker that is not alive.
//
// An alive id that is not registered is ignored: a broker the registry does not list cannot
// coordinate. PickPartition does not modify its arguments.
func PickPartition(partition int32, registered, alive []int32) (id int32, ok bool) {
	if len(registered) == 0 || partition < 0 {
		return -1, false
	}
	reg := sortedUnique(registered)
	live := make([]int32, 0, len(alive))
	for _, a := range sortedUnique(alive) {
		if _, found := slices.BinarySearch(reg, a); found {
			live = append(live, a)
		}
	}
	if len(live) == 0 {
		return -1, false
	}
	slot := uint32(partition) % uint32(len(reg))
	if _, found := slices.BinarySearch(live, reg[slot]); found {
		return reg[slot], true
	}
	return live[slot%uint32(len(live))], true
}

func sortedUnique(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}
