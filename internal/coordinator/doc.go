// Package coordinator picks a consumer group's coordinator: FNV-1a 32 of the group id modulo
// the number of registered brokers (Alive, Draining and Dead alike), so losing a broker moves
// only the groups that lived on it (docs/coordinator.md, "The rule").
//
// Pure: no client, no I/O.
package coordinator
