package assignment

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// topicClusterField indexes KafkaTopics by spec.cluster, the reverse lookup from a cluster to
// its topics.
const topicClusterField = "spec.cluster"

func topicCluster(obj client.Object) []string {
	kt, ok := obj.(*kafkav1alpha1.KafkaTopic)
	if !ok {
		return nil
	}
	return []string{kt.Spec.Cluster}
}

// topicToCluster maps a KafkaTopic to the cluster its spec.cluster names.
func topicToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	kt, ok := obj.(*kafkav1alpha1.KafkaTopic)
	if !ok || kt.Spec.Cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: kt.Namespace, Name: kt.Spec.Cluster}}}
}

// registryChanged passes a KafkaCluster event when what the assignment is computed from
// changed: the registry rows' ids, health, epochs, failed partitions or partitions that
// cannot be compacted, or the object's deletion. The row
// fields that move without changing the assignment (lastSeen, state, addresses) and the
// status this reconciler writes itself do not retrigger it.
func registryChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*kafkav1alpha1.KafkaCluster)
		cur, okNew := e.ObjectNew.(*kafkav1alpha1.KafkaCluster)
		if !okOld || !okNew {
			return true
		}
		return !slices.Equal(assignmentInputs(old.Status.Brokers), assignmentInputs(cur.Status.Brokers)) ||
			!failuresEqual(old.Status.Brokers, cur.Status.Brokers) ||
			old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero()
	}}
}

// failuresEqual reports whether two sets of rows announce the same failed partitions and the
// same partitions that cannot be compacted.
func failuresEqual(a, b []kafkav1alpha1.BrokerRow) bool {
	return slices.EqualFunc(a, b, func(x, y kafkav1alpha1.BrokerRow) bool {
		return x.ID == y.ID && slices.Equal(x.FailedPartitions, y.FailedPartitions) &&
			slices.Equal(x.UncleanablePartitions, y.UncleanablePartitions)
	})
}

// rowInput is the part of a registry row the assignment reads.
type rowInput struct {
	id     int32
	health kafkav1alpha1.BrokerHealth
	epoch  int64
}

func assignmentInputs(rows []kafkav1alpha1.BrokerRow) []rowInput {
	out := make([]rowInput, len(rows))
	for i, row := range rows {
		out[i] = rowInput{row.ID, row.Health, row.Epoch}
	}
	return out
}

// topicChanged passes a KafkaTopic event unless it is only a status write (the assignment
// reconciler is the only status writer): a spec change (generation), a deletion, a finalizer
// change (the broker removing the data finalizer lets the object go, which must be noticed to
// update the cluster's counts) or a creation.
func topicChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, cur := e.ObjectOld, e.ObjectNew
		return old.GetGeneration() != cur.GetGeneration() ||
			old.GetDeletionTimestamp().IsZero() != cur.GetDeletionTimestamp().IsZero() ||
			!slices.Equal(old.GetFinalizers(), cur.GetFinalizers())
	}}
}
