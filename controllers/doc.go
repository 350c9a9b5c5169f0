// Package controllers holds paddock's reconcilers: kafkacluster (provisions the broker
// StatefulSet and its Services), registry (turns EndpointSlices and heartbeat Leases into
// Broker objects and KafkaCluster status) and assignment (partition leaders).
//
// Decisions live in the pure packages under internal/; a reconciler gathers inputs, calls
// them, and writes the result. It must never import the broker.
package controllers
