// Package controllers wires paddock's reconcilers into a controller-runtime manager: one
// package per reconciler below it — kafkacluster (provisions the broker StatefulSet, its
// Services, RBAC, claim and PDB), registry (turns EndpointSlices and heartbeat Leases into
// Broker objects and the KafkaCluster's registry status), assignment (places every
// partition leader) and recovery (force-deletes the pod of a broker whose node is lost, once
// that is safe, and clears zombie claims). This package holds only what they share:
// SetupWithManager, the manager's cache scoping (CacheByObject) and the manager's RBAC
// markers.
//
// Decisions live in the pure packages under internal/; a reconciler gathers inputs, calls
// them, and writes the result. Nothing here may import the broker.
package controllers
