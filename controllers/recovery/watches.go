package recovery

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/internal/leasewatch"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// decisions counts the recovery decisions that changed a broker's BrokerRecovery condition,
// by reason: PodForceDeleted and ZombieClaimDeleted are recoveries done, the others what held
// one back.
var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paddock_recovery_decisions_total",
	Help: "Recovery decisions about brokers on lost nodes or stuck on zombie claims, by reason (PodForceDeleted, ZombieClaimDeleted, or the gate that held the recovery back).",
}, []string{"namespace", "cluster", "reason"})

func init() { metrics.Registry.MustRegister(decisions) }

// SetupWithManager watches what the decisions read: the cluster (its registry rows and
// coordinator sets), its broker pods, Leases, Broker objects and KafkaTopics, and every
// Node's readiness and taints.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	labelled := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request { return requestFor(obj) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("recovery").
		For(&kafkav1alpha1.KafkaCluster{}).
		Watches(&corev1.Pod{}, labelled).
		Watches(&kafkav1alpha1.Broker{}, labelled).
		Watches(&coordinationv1.Lease{}, r.leaseEvents()).
		Watches(&kafkav1alpha1.KafkaTopic{}, handler.EnqueueRequestsFromMapFunc(topicToCluster)).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeToClusters), builder.WithPredicates(nodeChanged())).
		Complete(r)
}

// topicToCluster maps a KafkaTopic to the cluster its spec.cluster names.
func topicToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	kt, ok := obj.(*kafkav1alpha1.KafkaTopic)
	if !ok || kt.Spec.Cluster == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: kt.Namespace, Name: kt.Spec.Cluster}}}
}

// nodeToClusters maps a Node to every KafkaCluster: any may have a broker on it.
func (r *Reconciler) nodeToClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &kafkav1alpha1.KafkaClusterList{}
	if err := r.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "List kafkaclusters for a node change")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}})
	}
	return out
}

// nodeChanged passes a Node event when its Ready condition's status or its taints changed —
// not the periodic status updates of a healthy node.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okNew := e.ObjectNew.(*corev1.Node)
		if !okOld || !okNew {
			return true
		}
		return readyStatus(old) != readyStatus(cur) || !equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints)
	}}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// leaseEvents handles the Lease watch (leasewatch.Handler): it dates every renewal as it
// arrives (the heartbeat gate is judged on the operator's clock) and enqueues the cluster for
// every Lease event but a plain renewal: that one cannot open a gate, and the requeue at the
// next expiry covers time.
func (r *Reconciler) leaseEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	return leasewatch.Handler(&r.leases, func() time.Time { return r.clock().Now() },
		func(_ context.Context, obj client.Object) []reconcile.Request { return requestFor(obj) },
		func(u rules.Update) bool { return u.RenewalOnly })
}
