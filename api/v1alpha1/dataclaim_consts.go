package v1alpha1

// The data claim <cluster>-data outlives its KafkaCluster unless spec.storage.deleteClaim is
// true (docs/architecture.md, "The data claim"). These name what makes a retained claim
// findable, and what the provisioning reconciler reports about it.

// AnnotationClusterID on a data claim is the Kafka cluster id (status.clusterID) of the
// cluster whose data it holds, written when the claim is created or adopted. A KafkaCluster
// with no clusterID yet that finds a retained claim of its name takes this id, so it reports
// the same clusterID as before and its brokers find their data under <data>/<clusterID>/.
const AnnotationClusterID = "kafka.paddock.dev/cluster-id"

// Degraded reasons about the data claim. Either way the claim is left exactly as it is and no
// child is applied (the StatefulSet would mount the claim).
const (
	// ReasonDataClaimForeign: a claim called <cluster>-data exists that paddock did not make for
	// this cluster — it lacks the cluster's labels or a valid cluster-id annotation, or another
	// object controls it — so it is not adopted.
	ReasonDataClaimForeign = "DataClaimForeign"
	// ReasonDataClaimOfAnotherCluster: the claim <cluster>-data carries another cluster id than
	// this cluster's status.clusterID: it holds another cluster's data, so it is not adopted.
	ReasonDataClaimOfAnotherCluster = "DataClaimOfAnotherCluster"
)

// Event reasons the provisioning reconciler records on a KafkaCluster when its data claim's
// fate changes.
const (
	// EventDataClaimRetained: the claim was created, or its owner reference removed, so it is
	// retained, with its data, when the cluster is deleted (spec.storage.deleteClaim false).
	EventDataClaimRetained = "DataClaimRetained"
	// EventDataClaimOwned: the claim was created, or given an owner reference, so it is deleted
	// with the cluster (spec.storage.deleteClaim true).
	EventDataClaimOwned = "DataClaimOwned"
	// EventDataClaimAdopted: a cluster without a clusterID took over an existing claim of its
	// name and the cluster id it carries (a re-created cluster finding its retained data).
	EventDataClaimAdopted = "DataClaimAdopted"
)

// Condition reasons about what the data claim can honestly give the brokers.
const (
	// ReasonStorageNotShared (Degraded): spec.storage.accessMode is ReadWriteOnce or
	// ReadWriteOncePod while spec.replicas is above 1. Brokers on several nodes cannot share
	// such a claim, and any broker must be able to take over any partition, so nothing is
	// applied until the access mode is ReadWriteMany or there is one broker.
	ReasonStorageNotShared = "StorageNotShared"
	// ReasonStorageNotExpandable (Degraded): spec.storage.size grew, but the claim's
	// StorageClass does not allow volume expansion (or the claim has no class); the claim is
	// left at its size and nothing is applied.
	ReasonStorageNotExpandable = "StorageNotExpandable"
	// ReasonDataClaimPending (Degraded): the data claim is not bound to a volume; the message
	// gives the reason and message of the claim's latest Event (no such StorageClass, no
	// provisioner for the class, no volume with the access mode...). The brokers cannot start
	// until it is bound.
	ReasonDataClaimPending = "DataClaimPending"
	// ReasonExpandingStorage (Progressing): the data claim asks for more than its volume has
	// yet; the storage provider is expanding it.
	ReasonExpandingStorage = "ExpandingStorage"
)
