// Package leasewatch is the heartbeat-Lease watch the registry and recovery reconcilers
// share. Every Lease event is dated first, on the operator's clock, by the reconciler's
// registry.Observer — so freshness is judged from when each renewal arrived, even for events
// that enqueue nothing — and then the Lease's cluster is enqueued unless the reconciler says
// the update cannot change its decision. The rules themselves (what an observation is, when a
// Lease is fresh, what an update changed) are internal/registry's; this is only their wiring
// to controller-runtime.
package leasewatch

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	rules "github.com/paddock-dev/paddock/internal/registry"
)

// Handler is the event handler of a Lease watch. observer dates every created or updated
// Lease at now() and forgets a deleted one; every event enqueues toCluster's requests for the
// Lease, except an update for which quiet returns true (Skips).
func Handler(observer *rules.Observer, now func() time.Time, toCluster handler.MapFunc, quiet func(rules.Update) bool) handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range toCluster(context.Background(), obj) {
			q.Add(req)
		}
	}
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if l, ok := e.Object.(*coordinationv1.Lease); ok {
				observer.Observe(l, now())
			}
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if !Skips(observer, now(), e.ObjectOld, e.ObjectNew, quiet) {
				enqueue(e.ObjectNew, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			observer.Forget(e.Object.GetNamespace(), e.Object.GetName())
			enqueue(e.Object, q)
		},
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

// Skips observes the update from oldObj to newObj at now and reports whether it enqueues
// nothing: both are Leases and quiet says the update cannot change the decision.
func Skips(observer *rules.Observer, now time.Time, oldObj, newObj client.Object, quiet func(rules.Update) bool) bool {
	old, okOld := oldObj.(*coordinationv1.Lease)
	cur, okNew := newObj.(*coordinationv1.Lease)
	if !okOld || !okNew {
		return false
	}
	return quiet(observer.ObserveUpdate(old, cur, now))
}
