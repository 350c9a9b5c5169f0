// Package groups is paddock's group coordinator: the classic consumer-group protocol
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup; the states Empty, PreparingRebalance,
// CompletingRebalance, Stable, Dead; static members; session, rebalance and initial-delay
// timers) and the groups' committed offsets, kept on the cluster's shared volume and fenced by
// the coordinator epoch (docs/groups.md is the full design).
//
// Each group is owned by one goroutine; requests reach it only over its channel, so no lock
// guards group state (kfake's groups.go model). A JoinGroup or SyncGroup that waits for a
// rebalance blocks only its caller, and only until the answer or the caller's context.
//
// The API takes kmsg request structs (with Version set) and returns kmsg responses, as kfake
// does: what differs between versions of these APIs — MEMBER_ID_REQUIRED from v4, static
// members from v5, batched LeaveGroup from v3, several groups per OffsetFetch from v8,
// top-level versus per-partition errors below v2, KRaft's UNSUPPORTED_VERSION for
// OffsetCommit/OffsetFetch v0 — is group semantics, so it lives here, and the broker's wire
// handlers stay a few lines each. VersionRange gives the ranges to advertise.
//
// The broker calls, per request, the method of the API key; on every new cluster view,
// SetView(coordinatorEpoch, owns) with the coordinator rule as owns; on a deleted topic,
// PurgeTopic; during the SIGTERM drain, Owned until it is 0; at exit, Close.
//
// Durability: an OffsetCommit is acknowledged only after it is fsynced and the group's fence
// still holds this coordinator's epoch; a coordinator taking a group claims its fence first,
// then loads, then serves; a deposed one answers NOT_COORDINATOR and drops the group.
//
// Transactional offsets (TxnOffsetCommit) are pending per producer until the transaction's
// marker reaches CompleteTransaction, which finds every group holding them through a durable,
// fenced per-partition index reached by name, never by a directory listing
// (docs/groups.md "Transactional offsets").
//
// It must never speak the wire (no framing, connections or ApiVersions), touch Kubernetes,
// import the broker, acknowledge a commit that is not durable and fenced-in, or rewrite a file
// another coordinator may own.
package groups
