package v1alpha1

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// Names of the recovery reconciler (docs/recovery.md): it force-deletes the pod of a broker
// whose node is lost once that is safe, and clears claims that pin a broker pod to a node
// that is gone.

// AnnotationAutoRecover on a KafkaCluster set to "false" turns recovery off for that
// cluster: lost brokers are reported (condition BrokerRecovery, reason AutoRecoverDisabled)
// but their pods are left for a person to delete.
const AnnotationAutoRecover = "kafka.paddock.dev/auto-recover"

// AnnotationClaimed is what a broker writes on its heartbeat Lease about the partitions it
// has claimed: FormatClaims of every partition whose fence it holds at the epoch the
// assignment gave it (taken over, or found claimed at a newer epoch). The recovery
// reconciler compares it with the current assignment: a lost broker's pod is deleted only
// once every partition has been claimed by its current leader, so the fence refuses
// whatever the old process, if it still runs, appends.
const AnnotationClaimed = "kafka.paddock.dev/claimed"

// FieldOwnerRecovery is the server-side-apply field manager of the recovery reconciler's
// one status write, the BrokerRecovery condition of a Broker. The registry owns the rest of
// the Broker's status under FieldOwner; server-side apply keeps the two apart per
// condition type.
const FieldOwnerRecovery = "paddock-recovery"

// ConditionBrokerRecovery on a Broker says whether the operator is replacing the broker's pod
// after a node loss, or why not: True once it force-deleted the pod (or deleted a claim that
// pinned it to a lost node), False with the gate that holds it back, or NodeReady when
// nothing is wrong. Written by the recovery reconciler only.
const ConditionBrokerRecovery = "BrokerRecovery"

// BrokerRecovery reasons: what was done, or the first gate that holds a recovery back.
const (
	// ReasonNodeReady: the broker's pod runs on a Ready node (or has no node yet); there is
	// nothing to recover.
	ReasonNodeReady = "NodeReady"
	// ReasonAutoRecoverDisabled: the cluster is annotated kafka.paddock.dev/auto-recover: "false".
	ReasonAutoRecoverDisabled = "AutoRecoverDisabled"
	// ReasonNodeLossPending: the node is NotReady or Unknown, but not yet for spec.nodeLossTimeout
	// (and it has no out-of-service taint).
	ReasonNodeLossPending = "NodeLossPending"
	// ReasonHeartbeatFresh: the broker's Lease was renewed within the session timeout, on the
	// operator's clock: the broker lives, whatever its node says.
	ReasonHeartbeatFresh = "HeartbeatFresh"
	// ReasonNoAliveBrokersToRecover: no broker of the cluster is alive; the problem is then probably the
	// control plane or the network, not one node, and deleting pods would not help.
	ReasonNoAliveBrokersToRecover = "NoAliveBrokers"
	// ReasonLeadsPartitions: the current assignment still gives the broker partitions.
	ReasonLeadsPartitions = "LeadsPartitions"
	// ReasonCoordinatesGroups: the coordinator epoch has not yet been bumped for an alive set
	// without the broker, so it may still coordinate groups.
	ReasonCoordinatesGroups = "CoordinatesGroups"
	// ReasonPartitionsNotClaimed: a partition's new leader has not claimed it yet (its Lease's
	// kafka.paddock.dev/claimed does not match the assignment).
	ReasonPartitionsNotClaimed = "PartitionsNotClaimed"
	// ReasonRecoveryInProgress: another broker of the cluster is being recovered; one at a time.
	ReasonRecoveryInProgress = "RecoveryInProgress"
	// ReasonPodForceDeleted: every gate held and the broker's pod was force-deleted (grace 0)
	// so the StatefulSet recreates it on another node.
	ReasonPodForceDeleted = "PodForceDeleted"
	// ReasonRecovered: the broker is Alive again after its pod was replaced.
	ReasonRecovered = "Recovered"
	// ReasonVolumeNodeAffinityConflict: the broker's pod is Pending because a volume's node
	// affinity can no longer be met, and paddock does not delete that claim (the cluster's data
	// claim, or a claim that is not local).
	ReasonVolumeNodeAffinityConflict = "VolumeNodeAffinityConflict"
	// ReasonZombieClaimDeleted: the broker's pod was Pending on a local claim bound to a node
	// that is gone; the claim and the pod were deleted so the pod can start elsewhere.
	ReasonZombieClaimDeleted = "ZombieClaimDeleted"
)

// Event reasons of the recovery reconciler, on the KafkaCluster and the Broker.
const (
	// EventPodForceDeleted: a lost broker's pod was force-deleted.
	EventPodForceDeleted = "PodForceDeleted"
	// EventRecoveryHeldBack: a broker on a lost node is not being recovered yet; the message
	// names the gate.
	EventRecoveryHeldBack = "RecoveryHeldBack"
	// EventZombieClaimDeleted: a local claim pinning a broker pod to a lost node was deleted.
	EventZombieClaimDeleted = "ZombieClaimDeleted"
	// EventVolumeNodeAffinityConflict: a broker pod cannot be scheduled because of a volume's
	// node affinity, and paddock leaves the claim alone.
	EventVolumeNodeAffinityConflict = "VolumeNodeAffinityConflict"
	// EventRecovered: a recovered broker is Alive again.
	EventRecovered = "Recovered"
	// EventInvalidAnnotation (a Warning, on the KafkaCluster): an annotation the user sets has
	// a value paddock does not accept (kafka.paddock.dev/auto-recover other than "true" or
	// "false"); the default is used.
	EventInvalidAnnotation = "InvalidAnnotation"
)

// PartitionClaim is one partition a leader holds at an epoch: an entry of AnnotationClaimed.
type PartitionClaim struct {
	// TopicID is the topic's status.topicID (unpadded base64url).
	TopicID string
	// Partition is the partition index.
	Partition int32
	// Epoch is the leader epoch the partition was claimed at.
	Epoch int32
}

// FormatClaims is the AnnotationClaimed value for claims, in any order: "<count>/<digest>",
// the digest being FNV-1a 64 over the sorted entries. Broker and operator compute it alike,
// so equal sets give equal strings whatever the size of the cluster (an annotation cannot
// hold ten thousand partitions).
func FormatClaims(claims []PartitionClaim) string {
	sorted := slices.Clone(claims)
	slices.SortFunc(sorted, func(a, b PartitionClaim) int {
		if a.TopicID != b.TopicID {
			if a.TopicID < b.TopicID {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	h := fnv.New64a()
	for _, c := range sorted {
		_, _ = fmt.Fprintf(h, "%s/%d@%d\n", c.TopicID, c.Partition, c.Epoch) // a hash never fails
	}
	return strconv.Itoa(len(sorted)) + "/" + strconv.FormatUint(h.Sum64(), 16)
}
