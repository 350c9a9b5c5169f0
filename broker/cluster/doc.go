// Package cluster is what a broker knows of its cluster and the only broker room that talks
// to the Kubernetes API server: the informer-fed view of its KafkaCluster and KafkaTopics
// (view.go, view_informer.go; an immutable Snapshot replaced whole by one writer), where the
// broker is reachable on each listener (addresses.go, from its own Service and Node), its
// heartbeat Lease (heartbeat.go), and its admin writes to KafkaTopics (admin.go: the admin
// APIs' creates, deletes and spec updates, and a deleted topic's data finalizer). connect.go
// makes the one connection all of them share. MemoryView is the View of tests and of anything
// that has the state in hand.
//
// It answers in Kubernetes' and paddock's API terms (v1alpha1 types, API errors) and knows
// nothing of the Kafka protocol: the broker package turns what it reads into answers.
//
// It must never be on a request's path to the API server for a read (handlers read the
// Snapshot; a Get happens only inside a write), never wait on the API server without a bound,
// never write anything but the broker's own Lease and its cluster's KafkaTopics, and never
// import another broker package or controllers/: the operator and the broker meet only
// through the API.
package cluster
