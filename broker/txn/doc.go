// Package txn is paddock's transaction coordinator: the state of each transactional.id
// (Apache 3.7's TransactionMetadata state machine: Empty, Ongoing, PrepareCommit,
// PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence), the rules of
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions and
// ListTransactions (docs/transactions.md "The coordinator"), transaction timeouts and transactional-id
// expiry, and the driving of commit/abort markers to the partitions' leaders.
//
// The rules are pure functions of a Txn and decoded inputs (state.go, table-tested with no
// I/O). The Coordinator (coordinator.go) applies them to ids kept in files under
// <data>/<clusterID>/txn/ (store.go; docs/transactions.md "The coordinator"), each id
// claimed fence-first at the coordinator epoch exactly as a group is.
//
// Durability: a transition is answered only after its file is durable and the id's fence
// still holds this coordinator's epoch; a deposed coordinator answers NOT_COORDINATOR and
// forgets the id. A commit/abort decision (Prepare*) is durable before any marker is sent, so
// a coordinator that loads a Prepare* state finishes it.
//
// It must never speak the wire, write a partition's log itself (markers go through the
// injected MarkerWriter), import the broker, or acknowledge a transition that is not durable
// and fenced-in.
package txn
