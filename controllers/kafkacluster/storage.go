package kafkacluster

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// What the data claim can honestly give the brokers (docs/architecture.md, "The data
// claim"): a volume every broker can mount, the size asked for, and — while it cannot — the
// reason the storage provider gave. Each rule is pure and table-tested in storage_test.go.

// pendingGrace is how long a data claim may be Pending, with only Normal events, before the
// cluster reports it Degraded: provisioning a volume takes a few seconds, and a claim whose
// class binds on first use waits for the first broker pod to be scheduled.
const pendingGrace = time.Minute

// sharedStorageProblem refuses a claim that several brokers cannot all mount: ReadWriteOnce
// (one node) or ReadWriteOncePod (one pod) with more than one broker. Every broker must be
// able to take over any partition, wherever it runs (docs/storage.md).
func sharedStorageProblem(cluster *kafkav1alpha1.KafkaCluster) *specProblem {
	s := cluster.Spec.Storage
	if s.Type == kafkav1alpha1.StorageEphemeral || cluster.Spec.Replicas <= 1 {
		return nil
	}
	if s.AccessMode != corev1.ReadWriteOnce && s.AccessMode != corev1.ReadWriteOncePod {
		return nil
	}
	return &specProblem{
		Reason: kafkav1alpha1.ReasonStorageNotShared,
		Message: fmt.Sprintf("spec.storage.accessMode %s lets only one %s mount the claim, and %d brokers must all mount it to take over each other's partitions; "+
			"use accessMode ReadWriteMany with a StorageClass that provides it (NFS, CephFS, EFS, Filestore, Azure Files: docs/operations.md), or replicas 1; nothing is applied",
			s.AccessMode, map[corev1.PersistentVolumeAccessMode]string{corev1.ReadWriteOnce: "node", corev1.ReadWriteOncePod: "pod"}[s.AccessMode], cluster.Spec.Replicas),
	}
}

// claimExpansion accepts growing claim from have to want when its StorageClass allows volume
// expansion: the apply then asks for the larger size and the storage provider expands the
// volume (the cluster reports Progressing, ExpandingStorage, until it has). Otherwise the
// growth is refused and the claim keeps its size.
func claimExpansion(claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, have, want resource.Quantity) *specProblem {
	if class != nil && class.AllowVolumeExpansion != nil && *class.AllowVolumeExpansion {
		return nil
	}
	why := fmt.Sprintf("its StorageClass %s does not allow volume expansion (allowVolumeExpansion is not true)", deref(claim.Spec.StorageClassName))
	switch {
	case deref(claim.Spec.StorageClassName) == "":
		why = "it has no StorageClass (a volume bound by hand cannot be expanded by its claim)"
	case class == nil:
		why = fmt.Sprintf("its StorageClass %s does not exist", deref(claim.Spec.StorageClassName))
	}
	return &specProblem{
		Reason: kafkav1alpha1.ReasonStorageNotExpandable,
		Message: fmt.Sprintf("storage.size grew from %s to %s, but claim %s cannot be expanded: %s; set the size back to %s, "+
			"or allow expansion on the class; the claim is left at its size and nothing is applied", have.String(), want.String(), claim.Name, why, have.String()),
	}
}

// claimSize is the size claim asks for (status.storageSize), nil without a claim.
func claimSize(claim *corev1.PersistentVolumeClaim) *resource.Quantity {
	if claim == nil {
		return nil
	}
	size, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return nil
	}
	return &size
}

// claimExpanding is why the claim is not yet the size it asks for, or "" when it is (or is
// not bound yet: a Pending claim is pendingClaimProblem's).
func claimExpanding(claim *corev1.PersistentVolumeClaim) string {
	if claim == nil || claim.Status.Phase != corev1.ClaimBound {
		return ""
	}
	want, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	have, known := claim.Status.Capacity[corev1.ResourceStorage]
	if !ok || !known || have.Cmp(want) >= 0 {
		return ""
	}
	return fmt.Sprintf("data claim %s is being expanded from %s to %s", claim.Name, have.String(), want.String())
}

// pendingClaimProblem reports a data claim that is not bound: at once when the storage
// provider has said something is wrong (a Warning event), after pendingGrace otherwise. The
// message carries the claim's latest event, the provider's own words; events are the claim's
// Events in any order. Nil when the claim is bound, absent, or still within its grace.
func pendingClaimProblem(claim *corev1.PersistentVolumeClaim, events []corev1.Event, now time.Time) *specProblem {
	if claim == nil || claim.Status.Phase != corev1.ClaimPending {
		return nil
	}
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b corev1.Event) int { return eventTime(a).Compare(eventTime(b)) })
	warned := slices.ContainsFunc(events, func(e corev1.Event) bool { return e.Type == corev1.EventTypeWarning })
	pendingFor := now.Sub(claim.CreationTimestamp.Time)
	if !warned && pendingFor < pendingGrace {
		return nil
	}
	said := "no event of the claim says why (is there a provisioner for its StorageClass, or a default StorageClass?)"
	if n := len(events); n > 0 {
		last := events[n-1]
		said = fmt.Sprintf("its latest event says %s: %s", last.Reason, last.Message)
	}
	return &specProblem{
		Reason: kafkav1alpha1.ReasonDataClaimPending,
		Message: fmt.Sprintf("data claim %s (StorageClass %q, %v) has been Pending for %s and the brokers cannot start without it; %s",
			claim.Name, deref(claim.Spec.StorageClassName), claim.Spec.AccessModes, pendingFor.Round(time.Second), said),
	}
}

// eventTime is when an event last happened, whichever of its times is set.
func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}
