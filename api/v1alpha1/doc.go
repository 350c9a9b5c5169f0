// Package v1alpha1 holds paddock's API: KafkaCluster (what a user asks for), Broker (one row of
// the broker registry, written only by the operator) and KafkaTopic, in the group
// kafka.paddock.dev.
//
// It imports apimachinery and core API types only. It must never import a client, a
// controller or the broker: every other package depends on it, not the other way round.
//
// +kubebuilder:object:generate=true
// +groupName=kafka.paddock.dev
package v1alpha1
