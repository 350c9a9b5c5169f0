// Package assignment is the assignment reconciler: the only writer of partition leaders
// (docs/assignment.md, docs/topics.md). For each KafkaCluster it reads the registry rows
// (status.brokers, written by the registry reconciler) and the cluster's KafkaTopics from the
// cache, lets internal/balance decide every partition's leader and epoch over the alive set,
// and writes each topic's status (partitions, topicID, topicName, Ready/Degraded,
// observedGeneration) and the cluster's coordinatorEpoch, coordinatorBrokers, topics and
// partitions — only when they change. It holds the assignment finalizer of every KafkaTopic:
// a deleted topic is unassigned before its finalizer goes, and a broker then removes its data.
//
// It must never import the broker or another reconciler's package, never decide a placement
// itself (internal/balance does), and never write a KafkaCluster status field it does not own.
package assignment
