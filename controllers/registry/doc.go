// Package registry is the registry reconciler: it reads a KafkaCluster's EndpointSlices, its
// brokers' heartbeat Leases and the broker StatefulSet from the cache, applies the pure rules
// of internal/registry (imported as rules), and writes the result as one Broker object per
// registered broker and as the KafkaCluster's status.brokers and status.counts — the only
// KafkaCluster status fields it owns (docs/registry.md).
//
// It must never import the broker or another reconciler's package, and never decide a
// registry rule itself: a rule lives in internal/registry with its table test.
package registry
