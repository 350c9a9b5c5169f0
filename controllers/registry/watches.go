package registry

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/internal/leasewatch"
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

// leaseEvents handles the Lease watch (leasewatch.Handler): it dates every renewal as it
// arrives (freshness is judged on the operator's clock) and enqueues the cluster for every
// Lease event except the common one, a renewal that cannot change a row (freshRenewal). With a
// thousand brokers beating every second, those would keep a reconcile running continuously.
func (r *Reconciler) leaseEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return leasewatch.Handler(&r.leases, func() time.Time { return r.clock().Now() }, leaseToCluster, freshRenewal)
}

// freshRenewal is an update that cannot change any row: it changes nothing but renewTime,
// and the renewal before it was seen live and is still fresh on the operator's clock. Such a
// beat only moves lastSeen, which is settled (see Reconciler). A renewal of a stale Lease, or
// the first one seen since the operator started, is not: that broker may be coming back to
// life.
func freshRenewal(u rules.Update) bool { return u.RenewalOnly && u.WasFresh }

// renewalOnly is what the Lease watch decides for an update from oldObj to newObj: true when
// it observes a fresh renewal and enqueues nothing.
func (r *Reconciler) renewalOnly(oldObj, newObj client.Object) bool {
	return leasewatch.Skips(&r.leases, r.clock().Now(), oldObj, newObj, freshRenewal)
}

// brokerProcessChanged passes the pod events that can change what rules.SeenDead shows: a pod
// created or deleted, and an update that changes its uid or its broker container's status
// (state, last termination, restarts). Probe results and other status churn pass nothing.
var brokerProcessChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
		newPod, ok2 := e.ObjectNew.(*corev1.Pod)
		if !ok1 || !ok2 {
			return true
		}
		return oldPod.UID != newPod.UID || !equality.Semantic.DeepEqual(brokerProcess(oldPod), brokerProcess(newPod))
	},
}

// brokerProcess is what of the broker container's status rules.SeenDead reads (nil when the
// pod has none yet).
func brokerProcess(p *corev1.Pod) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if cs := p.Status.ContainerStatuses[i]; cs.Name == kafkav1alpha1.BrokerContainerName {
			return &corev1.ContainerStatus{State: cs.State, LastTerminationState: cs.LastTerminationState, RestartCount: cs.RestartCount}
		}
	}
	return nil
}
