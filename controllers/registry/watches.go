package registry

import (
	"context"
	"maps"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// endpointSliceToCluster maps a slice of Service <c>-brokers (label kubernetes.io/service-name)
// to cluster c. Slices of other Services map to nothing.
func endpointSliceToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster, ok := strings.CutSuffix(obj.GetLabels()[discoveryv1.LabelServiceName], kafkav1alpha1.HeadlessServiceName(""))
	return requestFor(obj, cluster, ok)
}

// leaseToCluster maps a heartbeat Lease to the cluster its kafka.paddock.dev/cluster label names.
func leaseToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster, ok := obj.GetLabels()[kafkav1alpha1.LabelCluster]
	return requestFor(obj, cluster, ok)
}

// statefulSetToCluster maps StatefulSet <c>-broker to cluster c, by name: its replicas decide
// which absent brokers stay registered, whoever created it.
func statefulSetToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster, ok := strings.CutSuffix(obj.GetName(), kafkav1alpha1.StatefulSetName(""))
	return requestFor(obj, cluster, ok)
}

func requestFor(obj client.Object, cluster string, ok bool) []reconcile.Request {
	if !ok || cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster}}}
}

// heartbeatChanged passes every Lease event except the common one: a renewal of a
// Lease that was still fresh, changing nothing but renewTime. Such a beat cannot change any
// row (lastSeen is settled, see Reconciler), and with a thousand brokers beating
// every second it would keep a reconcile running continuously. A renewal of a stale Lease
// passes: that broker is coming back to life.
func heartbeatChanged(clk clock.PassiveClock) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*coordinationv1.Lease)
		cur, okNew := e.ObjectNew.(*coordinationv1.Lease)
		if !okOld || !okNew {
			return true
		}
		if _, fresh := rules.Fresh(old, clk.Now()); !fresh {
			return true
		}
		o, n := old.Spec.DeepCopy(), cur.Spec.DeepCopy()
		o.RenewTime, n.RenewTime = nil, nil
		return !equality.Semantic.DeepEqual(o, n) ||
			!maps.Equal(old.Annotations, cur.Annotations) || !maps.Equal(old.Labels, cur.Labels)
	}}
}
