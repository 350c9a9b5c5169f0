package registry

import (
	"context"
	"maps"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
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

// leaseEvents handles the Lease watch. It dates every renewal as it arrives (the Observer:
// freshness is judged on the operator's clock) and enqueues the cluster for every Lease event
// except the common one, a renewal that cannot change a row (renewalOnly). With a thousand
// brokers beating every second, those would keep a reconcile running continuously.
func (r *Reconciler) leaseEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range leaseToCluster(context.Background(), obj) {
			q.Add(req)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if l, ok := e.Object.(*coordinationv1.Lease); ok {
				r.leases.Observe(l, r.clock().Now())
			}
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !r.renewalOnly(e.ObjectOld, e.ObjectNew) {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.leases.Forget(e.Object.GetNamespace(), e.Object.GetName())
			enqueue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// renewalOnly observes the updated Lease and reports whether the update is a renewal that
// cannot change any row: it changes nothing but renewTime, and the renewal before it was seen
// live and is still fresh on the operator's clock. Such a beat only moves lastSeen, which is
// settled (see Reconciler). A renewal of a stale Lease, or the first one seen since the
// operator started, is not: that broker may be coming back to life.
func (r *Reconciler) renewalOnly(oldObj, newObj client.Object) bool {
	old, okOld := oldObj.(*coordinationv1.Lease)
	cur, okNew := newObj.(*coordinationv1.Lease)
	if !okOld || !okNew {
		return false
	}
	now := r.clock().Now()
	prev, had, _ := r.leases.Observe(cur, now)
	d, ok := rules.FreshFor(old)
	if !had || !prev.Changed || !ok || !prev.At.Add(d).After(now) {
		return false
	}
	o, n := old.Spec.DeepCopy(), cur.Spec.DeepCopy()
	o.RenewTime, n.RenewTime = nil, nil
	return equality.Semantic.DeepEqual(o, n) &&
		maps.Equal(old.Annotations, cur.Annotations) && maps.Equal(old.Labels, cur.Labels)
}
