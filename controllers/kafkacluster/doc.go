// Package kafkacluster is the provisioning reconciler: it turns a KafkaCluster into the
// children its brokers need — ServiceAccount, Role and RoleBinding, the headless, bootstrap
// and per-broker Services, the shared data claim, the PodDisruptionBudget and the broker
// StatefulSet — built by pure desired* functions (golden files in testdata/golden pin them)
// and server-side applied under one field owner. It reports clusterID, replicas, listeners
// and the Ready/Progressing/Degraded conditions, and no other status field (the registry
// owns the broker rows).
//
// The data claim outlives its cluster unless spec.storage.deleteClaim is true, and a cluster
// re-created with the same name adopts it with its clusterID (docs/architecture.md, "The data
// claim").
//
// It must never import the broker or another reconciler's package, and never adopt, rewrite
// or delete a data claim another cluster's data or another owner may be on.
package kafkacluster
