package kafkacluster

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The data claim's rules (docs/architecture.md, "The data claim"). The claim outlives the
// cluster unless spec.storage.deleteClaim is true, and a cluster re-created with the same
// name adopts it, with the cluster id it carries. Who may adopt what is decided here, purely,
// from the claim as read from the API server; the tables in dataclaim_test.go pin each rule.

// Event actions (events.k8s.io requires one): what the reconciler did to the claim.
const (
	actionApply = "Apply"
	actionAdopt = "Adopt"
)

// dataClaimVerdict says whether cluster may use the existing data claim and, if so, the
// cluster id the claim carries ("" when it carries none). claim is nil when there is none, and
// an Ephemeral cluster has no claim to use: both are accepted with no id. The rules, first
// match wins:
//   - a claim this cluster controls is its own (a wrong or missing annotation is put back by
//     the next apply, from status.clusterID);
//   - a claim another object controls is foreign — typically the claim of an earlier cluster
//     of this name with deleteClaim true, which the garbage collector is about to delete;
//   - an unowned claim is adoptable only if paddock made it for a cluster of this name (its
//     labels) and it names the cluster whose data it holds (a valid cluster-id annotation);
//   - and only if that id is this cluster's, when this cluster already has one.
//
// A refusal is a problem for the Degraded condition; the reconciler then applies nothing.
func dataClaimVerdict(cluster *kafkav1alpha1.KafkaCluster, claim *corev1.PersistentVolumeClaim) (claimID string, problem *specProblem) {
	if claim == nil || cluster.Spec.Storage.Type == kafkav1alpha1.StorageEphemeral {
		return "", nil
	}
	id := claim.Annotations[kafkav1alpha1.AnnotationClusterID]
	if metav1.IsControlledBy(claim, cluster) {
		if !isClusterID(id) {
			id = "" // a claim made before the annotation existed; the next apply writes it
		}
		return id, nil
	}
	foreign := func(format string, args ...any) *specProblem {
		return &specProblem{
			Reason:  kafkav1alpha1.ReasonDataClaimForeign,
			Message: fmt.Sprintf(format, args...) + "; it is left alone and nothing is applied",
		}
	}
	if owner := metav1.GetControllerOf(claim); owner != nil {
		if owner.Kind == "KafkaCluster" && owner.Name == cluster.Name {
			return "", foreign("claim %s belongs to an earlier KafkaCluster %s (uid %s) that had spec.storage.deleteClaim true and is deleted with it; "+
				"a new claim is created once the garbage collector has removed it", claim.Name, owner.Name, owner.UID)
		}
		return "", foreign("claim %s is controlled by %s %s, not by this cluster", claim.Name, owner.Kind, owner.Name)
	}
	if claim.Labels[kafkav1alpha1.LabelName] != kafkav1alpha1.LabelNameValue || claim.Labels[kafkav1alpha1.LabelCluster] != cluster.Name {
		return "", foreign("claim %s exists but paddock did not make it for this cluster (it lacks the labels %s=%s and %s=%s); "+
			"delete or rename it, or label and annotate it (%s) to adopt it",
			claim.Name, kafkav1alpha1.LabelName, kafkav1alpha1.LabelNameValue, kafkav1alpha1.LabelCluster, cluster.Name, kafkav1alpha1.AnnotationClusterID)
	}
	if !isClusterID(id) {
		return "", foreign("claim %s has no valid %s annotation (got %q), so whose data it holds is unknown; "+
			"set it to the id of the cluster that wrote the data (the directory name at the root of the volume) to adopt it",
			claim.Name, kafkav1alpha1.AnnotationClusterID, id)
	}
	if have := cluster.Status.ClusterID; have != "" && have != id {
		return "", &specProblem{
			Reason: kafkav1alpha1.ReasonDataClaimOfAnotherCluster,
			Message: fmt.Sprintf("claim %s holds the data of cluster id %s, and this cluster's id is %s; "+
				"it is left alone and nothing is applied: delete or rename the claim, or restore its %s annotation",
				claim.Name, id, have, kafkav1alpha1.AnnotationClusterID),
		}
	}
	return id, nil
}

// isClusterID reports whether s is a cluster id as newClusterID mints them: a Kafka Uuid in
// its one written form (22 characters of unpadded base64url). Anything else is refused
// before it can become status.clusterID, which the brokers use as a directory name.
func isClusterID(s string) bool {
	id, err := kafkav1alpha1.ParseKafkaUUID(s)
	return err == nil && id.String() == s
}

// dataClaimEvent is the Event that tells what this reconcile did to the fate of cluster's
// data claim, which was before as read ahead of applying (nil when it did not exist):
// adopted it (adopted: status.clusterID was taken from it), created it or removed its owner
// reference (retained when the cluster is deleted), or created it or gave it an owner
// reference (deleted with the cluster). An empty reason means nothing changed and no Event is
// due. The Event is recorded at reconcile time, not at deletion: docs/architecture.md, "The
// data claim", says why no finalizer waits for the deletion.
func dataClaimEvent(cluster *kafkav1alpha1.KafkaCluster, before *corev1.PersistentVolumeClaim, adopted bool) (reason, action, note string) {
	if cluster.Spec.Storage.Type == kafkav1alpha1.StorageEphemeral {
		return "", "", ""
	}
	name := kafkav1alpha1.DataClaimName(cluster.Name)
	fate := fmt.Sprintf("it is retained, with its data, when this cluster is deleted (spec.storage.deleteClaim is false); "+
		"delete the claim to delete the data, or re-create a cluster called %s to use it again", cluster.Name)
	if cluster.Spec.Storage.DeleteClaim {
		fate = "it is deleted, with its data, when this cluster is deleted (spec.storage.deleteClaim is true)"
	}
	switch owned := before != nil && metav1.IsControlledBy(before, cluster); {
	case adopted && before != nil:
		return kafkav1alpha1.EventDataClaimAdopted, actionAdopt,
			fmt.Sprintf("Adopted the existing claim %s and its cluster id %s; %s", name, cluster.Status.ClusterID, fate)
	case before != nil && owned == cluster.Spec.Storage.DeleteClaim:
		return "", "", ""
	case cluster.Spec.Storage.DeleteClaim:
		return kafkav1alpha1.EventDataClaimOwned, actionApply, fmt.Sprintf("Claim %s is owned by this cluster: %s", name, fate)
	default:
		return kafkav1alpha1.EventDataClaimRetained, actionApply, fmt.Sprintf("Claim %s has no owner: %s", name, fate)
	}
}
