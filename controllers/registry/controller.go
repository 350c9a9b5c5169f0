package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// Reconciler keeps a KafkaCluster's broker registry: it reads the headless Service's
// EndpointSlices, the brokers' heartbeat Leases and the broker StatefulSet's replicas from the
// cache, applies the rules of internal/registry, and writes the result as one Broker object
// per registered broker (created on registration, deleted on deregistration, owned by the
// cluster) and as the cluster's status.brokers and status.counts — the only KafkaCluster
// status fields it owns (docs/architecture.md, "Who writes what").
//
// Writes happen only on change, and a heartbeat alone is not a change: lastSeen, which is
// the Lease's renewTime and so moves every beat, is written with a row's other changes and
// otherwise at most every rules.LastSeenRefresh while the broker is live. A Dead broker's
// lastSeen is always its last renewTime exactly (it cannot move without a new beat). The
// reconciler requeues itself at the next Lease expiry, so a broker that falls silent turns
// Dead on time although no object changes to announce it.
type Reconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Recorder receives an Event on a Broker for each transition (Fenced, Serving, Dead,
	// Draining, Alive) and on the KafkaCluster for each deregistration.
	Recorder events.EventRecorder
	// Clock is what freshness is judged against; nil means the real clock.
	Clock clock.PassiveClock
	// ErrorBackoff is the per-cluster backoff of a failed reconcile, before it is capped at
	// the next Lease expiry; nil means controller-runtime's default (5 ms doubling to 1000 s).
	ErrorBackoff workqueue.TypedRateLimiter[reconcile.Request]

	// leases dates every observed renewal on the operator's clock; the Lease watch and the
	// reconcile both feed it.
	leases rules.Observer
	// retries is the error backoff, capped at the next Lease expiry (set up by SetupWithManager).
	retries *expiryLimiter
	// written remembers the Broker statuses this reconciler applied, until the cache shows them.
	written writtenStatuses
	// refused remembers what was last refused of each Lease, so each refusal is warned about
	// once, not at every reconcile.
	refused refusals
}

// scope is one reconcile's state, passed through the phases in order.
type scope struct {
	// cluster is the KafkaCluster being reconciled; its status.brokers and status.counts are
	// set by computeRows. orig is the cluster as read: its rows are the ones last written,
	// which lastSeen is settled against and the new rows compared with.
	cluster, orig *kafkav1alpha1.KafkaCluster
	// now is the one instant this reconcile judges freshness at.
	now time.Time
	// input is what the registry rules read; result what they said.
	input  rules.Input
	result rules.Result
	// computed is true once result holds this reconcile's rules.
	computed bool
	// brokers are the cluster's existing Broker objects by id.
	brokers map[int32]*kafkav1alpha1.Broker
}

// phase is one ordered step of a reconcile. An error stops the reconcile.
type phase func(ctx context.Context, s *scope) error

// Reconcile recomputes one cluster's registry, writes the cluster's registry status, syncs
// its Broker objects, and requeues at the next Lease expiry.
//
// The cluster status is written once, as soon as it is computed rather than deferred to the
// end: it is what the brokers serve clients from, so it must not wait for a hundred Broker
// object writes, and nothing after it can change it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &kafkav1alpha1.KafkaCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // garbage collection removes the Broker objects
	}
	s := &scope{cluster: cluster, orig: cluster.DeepCopy(), now: r.clock().Now()}
	phases := []phase{
		r.observeSources,
		r.observeBrokers,
		r.computeRows,
		r.warnRefused,
		r.writeClusterStatus,
		r.deleteDeregistered,
		r.syncRegistered,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			// The error's backoff must not outlast the next expiry: controller-runtime drops
			// the RequeueAfter of a failed reconcile, and a silent death would then wait for
			// the backoff (up to 1000 s) to be noticed.
			if s.computed {
				r.retries.failedBefore(req, s.result.NextExpiry)
			}
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: requeueAfter(s.result.NextExpiry, s.now)}, nil
}

// observeSources reads the registry's inputs from the cache: the headless Service's
// EndpointSlices, the cluster's Leases and pods (a broker whose pod or process is seen gone is
// Dead at once: rules.SeenDead) and the StatefulSet's replicas.
func (r *Reconciler) observeSources(ctx context.Context, s *scope) error {
	c := s.cluster
	s.input = rules.Input{Cluster: c.Name, Now: s.now, SessionTimeout: c.Spec.SessionTimeout()}
	for _, l := range c.Spec.Listeners {
		s.input.ListenerNames = append(s.input.ListenerNames, l.Name)
	}
	if len(c.Spec.Listeners) > 0 {
		s.input.PortName = c.Spec.Listeners[0].Name
	}
	endpointSlices := &discoveryv1.EndpointSliceList{}
	if err := r.List(ctx, endpointSlices, client.InNamespace(c.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: kafkav1alpha1.HeadlessServiceName(c.Name)}); err != nil {
		return fmt.Errorf("list endpointslices of %s: %w", kafkav1alpha1.HeadlessServiceName(c.Name), err)
	}
	s.input.Slices = endpointSlices.Items
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, client.InNamespace(c.Namespace), client.MatchingLabels{kafkav1alpha1.LabelCluster: c.Name}); err != nil {
		return fmt.Errorf("list leases of cluster %s: %w", c.Name, err)
	}
	s.input.Leases = leases.Items
	s.input.Observed = make(map[string]rules.Observation, len(leases.Items))
	for i := range leases.Items {
		// Normally the watch already dated this renewTime; the cache can show it a moment
		// before the handler runs.
		_, _, s.input.Observed[leases.Items[i].Name] = r.leases.Observe(&leases.Items[i], s.now)
		r.leases.Cap(c.Namespace, leases.Items[i].Name, s.input.SessionTimeout)
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{kafkav1alpha1.LabelCluster: c.Name}); err != nil {
		return fmt.Errorf("list pods of cluster %s: %w", c.Name, err)
	}
	s.input.Pods, s.input.PodsListed = pods.Items, true
	s.input.Written = s.orig.Status.Brokers
	sts := &appsv1.StatefulSet{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: kafkav1alpha1.StatefulSetName(c.Name)}, sts); {
	case apierrors.IsNotFound(err):
		s.input.Replicas = rules.WantedReplicas(nil, false, c.Spec.Replicas)
	case err != nil:
		return fmt.Errorf("get statefulset %s: %w", kafkav1alpha1.StatefulSetName(c.Name), err)
	default:
		s.input.Replicas = rules.WantedReplicas(sts.Spec.Replicas, sts.DeletionTimestamp.IsZero(), c.Spec.Replicas)
	}
	return nil
}

// computeRows applies the registry rules and settles lastSeen against the rows last written,
// so that a heartbeat alone changes nothing.
func (r *Reconciler) computeRows(_ context.Context, s *scope) error {
	s.result, s.computed = rules.Compute(s.input), true
	s.cluster.Status.Brokers = rules.SettleAll(s.orig.Status.Brokers, s.result)
	s.cluster.Status.Counts = s.result.Counts
	s.cluster.Status.Groups = s.result.Groups
	return nil
}

// observeBrokers reads the cluster's existing Broker objects from the cache; their creation
// dates the start-up grace of brokers that have not heartbeated yet.
func (r *Reconciler) observeBrokers(ctx context.Context, s *scope) error {
	list := &kafkav1alpha1.BrokerList{}
	if err := r.List(ctx, list, client.InNamespace(s.cluster.Namespace), client.MatchingLabels{kafkav1alpha1.LabelCluster: s.cluster.Name}); err != nil {
		return fmt.Errorf("list brokers of cluster %s: %w", s.cluster.Name, err)
	}
	s.brokers = make(map[int32]*kafkav1alpha1.Broker, len(list.Items))
	s.input.Registered = make(map[int32]time.Time, len(list.Items))
	for i := range list.Items {
		b := &list.Items[i]
		if id, ok := brokerID(s.cluster, b); ok {
			s.brokers[id] = b
			s.input.Registered[id] = b.CreationTimestamp.Time
		}
	}
	return nil
}

// deleteDeregistered deletes the Broker object of every broker the rules no longer register.
func (r *Reconciler) deleteDeregistered(ctx context.Context, s *scope) error {
	registered := make(map[int32]bool, len(s.cluster.Status.Brokers))
	for _, row := range s.cluster.Status.Brokers {
		registered[row.ID] = true
	}
	var errs []error
	for id, b := range s.brokers {
		if !registered[id] {
			errs = append(errs, r.deregister(ctx, s.cluster, id, b))
		}
	}
	return errors.Join(errs...)
}

// syncRegistered creates the Broker object of each newly registered broker and writes the
// status of each whose row or conditions changed, with an Event per transition.
func (r *Reconciler) syncRegistered(ctx context.Context, s *scope) error {
	var errs []error
	for i := range s.cluster.Status.Brokers {
		errs = append(errs, r.syncBroker(ctx, s, i))
	}
	return errors.Join(errs...)
}

// writeClusterStatus writes status.brokers, status.counts and status.groups with one merge patch, only when
// they changed. The patch carries only those fields: the kafkacluster reconciler owns the
// rest.
func (r *Reconciler) writeClusterStatus(ctx context.Context, s *scope) error {
	c := s.cluster
	if equality.Semantic.DeepEqual(s.orig.Status.Brokers, c.Status.Brokers) &&
		s.orig.Status.Counts == c.Status.Counts && slices.Equal(s.orig.Status.Groups, c.Status.Groups) {
		return nil
	}
	// The patch spells out both owned fields whole (a patch diffed from the cached object would
	// leave out zero counts the stored object may not have), and nothing else, so it can
	// never revert a field the kafkacluster reconciler wrote in between.
	patch, err := statusPatch(map[string]any{"brokers": c.Status.Brokers, "counts": c.Status.Counts, "groups": c.Status.Groups})
	if err == nil {
		err = r.Status().Patch(ctx, c, patch)
	}
	if err != nil {
		return fmt.Errorf("patch registry status of kafkacluster %s: %w", c.Name, err)
	}
	log.FromContext(ctx).V(1).Info("Wrote registry status", "registered", c.Status.Counts.Registered,
		"serving", c.Status.Counts.Serving, "alive", c.Status.Counts.Alive, "dead", c.Status.Counts.Dead)
	return nil
}

// SetupWithManager watches what the registry is computed from. Status writes of the
// KafkaCluster and Brokers do not retrigger it (generation predicates), and a heartbeat that
// only renews a still-fresh Lease does not either — its renewal is dated as it arrives
// (leaseEvents), and the requeue at the next expiry covers time.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	base := r.ErrorBackoff
	if base == nil {
		base = workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]()
	}
	r.retries = newExpiryLimiter(base, r.clock())
	return ctrl.NewControllerManagedBy(mgr).
		Named("registry").
		WithOptions(controller.Options{RateLimiter: r.retries}).
		For(&kafkav1alpha1.KafkaCluster{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&kafkav1alpha1.Broker{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&discoveryv1.EndpointSlice{}, handler.EnqueueRequestsFromMapFunc(endpointSliceToCluster)).
		Watches(&coordinationv1.Lease{}, r.leaseEvents()).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(leaseToCluster), builder.WithPredicates(brokerProcessChanged)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(statefulSetToCluster),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// requeueAfter is how long until the next Lease expires (0: nothing will).
func requeueAfter(nextExpiry, now time.Time) time.Duration {
	if nextExpiry.IsZero() {
		return 0
	}
	// A Lease is stale from the instant renewTime+duration on; a millisecond past it keeps a
	// timer that fires a hair early from finding it still fresh.
	return max(nextExpiry.Sub(now), 0) + time.Millisecond
}

// statusPatch is a JSON merge patch that sets the given status fields.
func statusPatch(status any) (client.Patch, error) {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, fmt.Errorf("encode status patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, body), nil
}

// expiryLimiter is the registry's error backoff: the usual per-cluster backoff, but never past
// the next Lease expiry the failed reconcile computed.
type expiryLimiter struct {
	base  workqueue.TypedRateLimiter[reconcile.Request]
	clock clock.PassiveClock

	mu     sync.Mutex
	expiry map[reconcile.Request]time.Time // guarded by mu
}

func newExpiryLimiter(base workqueue.TypedRateLimiter[reconcile.Request], clk clock.PassiveClock) *expiryLimiter {
	return &expiryLimiter{base: base, clock: clk, expiry: map[reconcile.Request]time.Time{}}
}

// failedBefore records that req's reconcile failed with the registry due to change at expiry
// (zero: nothing will expire).
func (l *expiryLimiter) failedBefore(req reconcile.Request, expiry time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if expiry.IsZero() {
		delete(l.expiry, req)
		return
	}
	l.expiry[req] = expiry
}

// When is the base backoff, cut short to just past the recorded expiry.
func (l *expiryLimiter) When(req reconcile.Request) time.Duration {
	d := l.base.When(req)
	l.mu.Lock()
	expiry, ok := l.expiry[req]
	l.mu.Unlock()
	if ok {
		d = min(d, requeueAfter(expiry, l.clock.Now()))
	}
	return d
}

// Forget clears req's backoff and expiry: its reconcile succeeded.
func (l *expiryLimiter) Forget(req reconcile.Request) {
	l.base.Forget(req)
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.expiry, req)
}

// NumRequeues is the base's count of failures.
func (l *expiryLimiter) NumRequeues(req reconcile.Request) int { return l.base.NumRequeues(req) }
