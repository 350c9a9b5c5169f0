// Package recovery is the recovery reconciler (docs/recovery.md): it replaces a broker whose
// node is lost without a human, safely. A pod on a node that stops answering stays
// Terminating forever and the StatefulSet never recreates it; this reconciler force-deletes
// it once every gate of Decide holds — the node lost for spec.nodeLossTimeout (or tainted
// out-of-service), the broker's Lease expired on the operator's clock, nothing assigned to
// it, and every partition claimed by its new leader — one broker per cluster at a time. It
// also deletes a zombie claim (DecideClaims): a local volume's claim pinning a Pending
// broker pod to a node that is gone, never the cluster's data claim.
//
// The decisions are pure functions (rules.go, claims.go); the reconciler gathers their
// inputs and acts. Its one status write is the BrokerRecovery condition of a Broker, applied
// under its own field manager: it never writes a KafkaCluster status field, nor any other
// Broker status field, and never imports the broker.
package recovery
