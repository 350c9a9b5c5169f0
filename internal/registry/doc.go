// Package registry holds the pure rules that turn a Service's EndpointSlices, the brokers'
// heartbeat Leases and the StatefulSet's desired size into registry rows: who is registered,
// Serving or Fenced, Alive, Draining or Dead (docs/registry.md). Compute is the
// recompute; Settle decides which lastSeen to write so that heartbeats alone cause no writes;
// Transitions names the changes worth an Event.
//
// No client, no clock reads, no I/O: callers pass "now" in. Each rule is pinned by a table
// test named for it.
package registry
