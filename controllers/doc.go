// Package controllers wires paddock's reconcilers into a controller-runtime manager: one
// package per reconciler below it — kafkacluster (provisions the broker StatefulSet, its
// Services, RBAC, claim and PDB), registry (turns EndpointSlices and heartbeat Leases into
// Broker objects and the KafkaCluster's registry status) and assignment (places every
// partition leader); the recovery reconciler will join them. This package holds only what they share: SetupWithManager, the
// manager's cache scoping (CacheByObject) and the manager's RBAC markers.
//
// Decisions live in the pure packages under internal/; a reconciler gathers inputs, calls
// them, and writes the result. Nothing here may import the broker.
package controllers
