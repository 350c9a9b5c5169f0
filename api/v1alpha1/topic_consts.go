package v1alpha1

// Finalizers of a KafkaTopic (docs/topics.md, "Deleting a topic"). A topic is deleted in two
// steps, each holding one finalizer, so its data is removed only once nothing leads it.
const (
	// FinalizerAssignment is held by the assignment reconciler until it has written every
	// partition of the deleted topic unassigned (leader -1, epochs kept).
	FinalizerAssignment = "kafka.paddock.dev/assignment"
	// FinalizerData is held until one broker (the lowest-id alive one) has claimed every
	// partition's fence above any leader epoch and removed the topic's data directory. The
	// operator does not mount the data volume; brokers do.
	FinalizerData = "kafka.paddock.dev/data"
)

// Condition reasons of a KafkaTopic, beyond the shared ones in conditions.go.
const (
	// ReasonLeadersAlive: every partition has a leader in the alive set.
	ReasonLeadersAlive = "LeadersAlive"
	// ReasonLeadersNotAlive: some partitions have no leader in the alive set (being placed,
	// or no broker is alive).
	ReasonLeadersNotAlive = "LeadersNotAlive"
	// ReasonTopicNameConflict: another, older KafkaTopic of the cluster has the same Kafka
	// name, or one that differs only by '.' against '_'; this one is not served.
	ReasonTopicNameConflict = "TopicNameConflict"
	// ReasonClusterNotFound: spec.cluster names no KafkaCluster in the namespace.
	ReasonClusterNotFound = "ClusterNotFound"
	// ReasonDeleting: the topic is being deleted; it is no longer served.
	ReasonDeleting = "Deleting"
)

// Event reasons the assignment reconciler records on a KafkaTopic.
const (
	// EventLeadersChanged: partitions got a new leader or a new leader epoch; the message
	// lists them with the reason of each change.
	EventLeadersChanged = "LeadersChanged"
	// EventUnassigned: a deleted topic's partitions were unassigned; a broker removes its
	// data next.
	EventUnassigned = "Unassigned"
)
