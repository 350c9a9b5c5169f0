// Package coordinator picks a consumer group's coordinator: the group hashes (FNV-1a 32) to a
// partition of __consumer_offsets, and that partition's leader — the partition modulo the
// number of registered brokers (Alive, Draining and Dead alike) — coordinates it, so losing a
// broker moves only the groups that lived on it (docs/coordinator.md, "The rule").
//
// Pure: no client, no I/O.
package coordinator
