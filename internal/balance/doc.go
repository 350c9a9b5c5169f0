// Package balance decides which alive broker leads each partition, and at which leader epoch
// (the rules and their proofs: docs/assignment.md). Assign is the whole API: topics with their current leaders and epochs
// plus the alive set in, leaders, epochs and the list of moves out.
//
// The rules: with nothing alive nothing changes; otherwise every topic's partitions per broker
// and every broker's total differ by at most one, reached with the fewest leader changes, so a
// partition on an alive leader stays put unless the spreads need it, stable inputs are a fixed
// point and a new topic moves no other partition; every change bumps the epoch by one, and a
// leader that restarted keeps its partitions at the next epoch.
//
// Pure: no client, no clock, no I/O, no randomness, no goroutines. It imports only the
// standard library and must never import anything of paddock's but api/. The result depends
// only on the content of the input, never on slice order.
package balance
