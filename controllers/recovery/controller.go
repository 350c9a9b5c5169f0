package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// Reconciler recovers the brokers of one KafkaCluster (package doc). A request is a cluster;
// pods, Leases, Broker objects and KafkaTopics map to their cluster, Nodes to every cluster.
type Reconciler struct {
	client.Client
	// APIReader reads what the cache does not hold, only for a Pending broker pod: its
	// claims, their volumes and StorageClasses.
	APIReader client.Reader
	// Recorder receives an Event on the KafkaCluster and the Broker for each new decision.
	Recorder events.EventRecorder
	// Clock is the operator's clock; nil means the real one.
	Clock clock.PassiveClock

	// leases dates every observed renewal on the operator's clock (as the registry does).
	leases rules.Observer
	// nodes dates when each node was first seen not Ready.
	nodes nodeObserver
	// deleted remembers the pods this reconciler force-deleted, by UID, so a cache that
	// still shows one does not make it delete (and report) it twice.
	deleted sync.Map
	// warned remembers the last problem warned about per object (the cluster's auto-recover
	// annotation, a Lease's claims), so each is warned about once.
	warned sync.Map
}

// Event actions (events.k8s.io requires one).
const (
	actionDelete = "Delete"
	actionHold   = "HoldBack"
	actionReport = "Report"
)

// scope is one reconcile's state, passed through the phases in order.
type scope struct {
	cluster *kafkav1alpha1.KafkaCluster
	now     time.Time
	// pods are the cluster's broker pods by id; brokers its Broker objects by id.
	pods    map[int32]*corev1.Pod
	brokers map[int32]*kafkav1alpha1.Broker
	// base holds the facts every broker shares; leases the per-broker Lease observations,
	// leaseObjects the Leases themselves.
	base         Facts
	leases       map[int32]time.Time
	leaseObjects map[int32]*coordinationv1.Lease
	// next is the earliest instant a time gate may open (zero: none).
	next time.Time
	// acted is set once this reconcile deleted a pod or claim: one recovery at a time.
	acted bool
}

// phase is one ordered step of a reconcile. An error stops the reconcile.
type phase func(ctx context.Context, s *scope) error

// Reconcile decides, for every broker pod of the cluster, whether to replace it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &kafkav1alpha1.KafkaCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	s := &scope{cluster: cluster, now: r.clock().Now()}
	for _, phase := range []phase{r.observe, r.observeAssignment, r.checkClaims, r.recoverLost, r.clearZombieClaims} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if s.next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: s.next.Sub(s.now) + time.Millisecond}, nil
}

// observe reads the cluster's pods, Broker objects and Leases from the cache, dates every
// Lease renewal on the operator's clock, and gathers the facts every broker shares.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	c := s.cluster
	autoRecover, problem := ReadAutoRecover(c.Annotations)
	r.warnOnce(c, nil, client.ObjectKeyFromObject(c).String(), kafkav1alpha1.EventInvalidAnnotation, problem)
	s.base = Facts{
		Now: s.now, AutoRecover: autoRecover,
		NodeLossTimeout: c.Spec.NodeLossTimeoutOrDefault(), SessionTimeout: c.Spec.SessionTimeout(),
		Claimed: map[int32]string{}, ClaimedBy: map[int32]int64{},
	}
	inCluster := []client.ListOption{client.InNamespace(c.Namespace), client.MatchingLabels{kafkav1alpha1.LabelCluster: c.Name}}
	for _, read := range []func(context.Context, *scope, []client.ListOption) error{r.readPods, r.readBrokers, r.readLeases} {
		if err := read(ctx, s, inCluster); err != nil {
			return err
		}
	}
	for _, row := range c.Status.Brokers {
		if row.Health == kafkav1alpha1.BrokerAlive {
			s.base.Alive = append(s.base.Alive, row.ID)
		}
	}
	if cb := c.Status.CoordinatorBrokers; cb != nil {
		s.base.CoordinatorAlive = append([]int32{}, cb.Alive...)
	}
	s.base.Recovering = recovering(s.brokers, s.base.Alive, s.now)
	return nil
}

// readPods reads the cluster's broker pods by id.
func (r *Reconciler) readPods(ctx context.Context, s *scope, inCluster []client.ListOption) error {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, inCluster...); err != nil {
		return fmt.Errorf("list pods of cluster %s: %w", s.cluster.Name, err)
	}
	s.pods = map[int32]*corev1.Pod{}
	for i := range pods.Items {
		if id, ok := rules.Ordinal(s.cluster.Name, pods.Items[i].Name); ok {
			s.pods[id] = &pods.Items[i]
		}
	}
	return nil
}

// readBrokers reads the cluster's Broker objects by id, those the registry has written a
// row into.
func (r *Reconciler) readBrokers(ctx context.Context, s *scope, inCluster []client.ListOption) error {
	brokers := &kafkav1alpha1.BrokerList{}
	if err := r.List(ctx, brokers, inCluster...); err != nil {
		return fmt.Errorf("list brokers of cluster %s: %w", s.cluster.Name, err)
	}
	s.brokers = map[int32]*kafkav1alpha1.Broker{}
	for i := range brokers.Items {
		b := &brokers.Items[i]
		if b.Name == kafkav1alpha1.BrokerObjectName(s.cluster.Name, b.Status.ID) && b.Status.State != "" {
			s.brokers[b.Status.ID] = b
		}
	}
	return nil
}

// readLeases dates each broker's last Lease renewal on the operator's clock and reads the
// partitions it announces claimed.
func (r *Reconciler) readLeases(ctx context.Context, s *scope, inCluster []client.ListOption) error {
	leases := &coordinationv1.LeaseList{}
	if err := r.List(ctx, leases, inCluster...); err != nil {
		return fmt.Errorf("list leases of cluster %s: %w", s.cluster.Name, err)
	}
	s.leases, s.leaseObjects = map[int32]time.Time{}, map[int32]*coordinationv1.Lease{}
	for i := range leases.Items {
		l := &leases.Items[i]
		id, ok := rules.Ordinal(s.cluster.Name, l.Name)
		if !ok {
			continue
		}
		_, _, obs := r.leases.Observe(l, s.now)
		s.leases[id], s.leaseObjects[id] = obs.At, l
		if v, ok := l.Annotations[kafkav1alpha1.AnnotationClaimed]; ok {
			s.base.Claimed[id] = v
			s.base.ClaimedBy[id] = int64(ptr.Deref(l.Spec.LeaseTransitions, 0))
		}
	}
	return nil
}

// checkClaims drops every claims digest that cannot be one (ReadClaims: malformed, or more
// partitions than the cluster has) and warns about it once: such a Lease has claimed nothing.
func (r *Reconciler) checkClaims(_ context.Context, s *scope) error {
	partitions := 0
	for _, p := range s.base.Partitions {
		if p.TopicID != "" {
			partitions++
		}
	}
	for _, id := range sortedKeys(s.base.Claimed) {
		problem := ReadClaims(s.base.Claimed[id], partitions)
		var regarding client.Object = s.cluster
		if b := s.brokers[id]; b != nil {
			regarding = b
		}
		lease := s.leaseObjects[id]
		r.warnOnce(regarding, lease, client.ObjectKeyFromObject(lease).String(), kafkav1alpha1.EventInvalidHeartbeat, problem)
		if problem != "" {
			delete(s.base.Claimed, id)
		}
	}
	return nil
}

// warnOnce records a Warning reason on regarding (about related, when not nil: the Lease that
// says it, whose resourceVersion tells each write's Event apart from the last) saying problem,
// unless problem is the last one warned about for key; an empty problem clears key.
func (r *Reconciler) warnOnce(regarding, related client.Object, key, reason, problem string) {
	if problem == "" {
		r.warned.Delete(key)
		return
	}
	if last, ok := r.warned.Load(key); ok && last == problem {
		return
	}
	r.warned.Store(key, problem)
	r.Recorder.Eventf(regarding, related, corev1.EventTypeWarning, reason, actionReport, "%s", problem)
}

// recovering is the sorted ids of the brokers still being recovered at now (Recovering).
func recovering(brokers map[int32]*kafkav1alpha1.Broker, alive []int32, now time.Time) []int32 {
	var out []int32
	for id, b := range brokers {
		if cond := meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery); cond != nil &&
			Recovering(cond.Reason, cond.LastTransitionTime.Time, now, slices.Contains(alive, id)) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// observeAssignment reads the current assignment: every partition of the cluster's topics.
func (r *Reconciler) observeAssignment(ctx context.Context, s *scope) error {
	topics := &kafkav1alpha1.KafkaTopicList{}
	if err := r.List(ctx, topics, client.InNamespace(s.cluster.Namespace)); err != nil {
		return fmt.Errorf("list kafkatopics of cluster %s: %w", s.cluster.Name, err)
	}
	for _, kt := range topics.Items {
		if kt.Spec.Cluster != s.cluster.Name {
			continue
		}
		id := strings.TrimRight(kt.Status.TopicID, "=") // the broker writes it unpadded
		for _, p := range kt.Status.Partitions {
			s.base.Partitions = append(s.base.Partitions, Partition{
				Topic: kt.Status.TopicName, TopicID: id, Index: p.Partition, Leader: p.Leader, Epoch: p.LeaderEpoch,
				Incarnation: p.LeaderIncarnation})
		}
	}
	return nil
}

// recoverLost decides about every broker pod in id order, force-deletes at most one, and
// reports each decision that changed.
func (r *Reconciler) recoverLost(ctx context.Context, s *scope) error {
	var errs []error
	for _, id := range sortedKeys(s.pods) {
		pod := s.pods[id]
		if pod.Status.Phase == corev1.PodPending && pod.Spec.NodeName == "" {
			continue // unscheduled: clearZombieClaims looks at it
		}
		f, err := r.facts(ctx, s, id, pod)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v := Decide(f)
		if v.Lost() {
			if next := NextChange(f); !next.IsZero() && (s.next.IsZero() || next.Before(s.next)) {
				s.next = next
			}
		}
		if v.Delete {
			if _, done := r.deleted.Load(pod.UID); done {
				continue
			}
			if err := r.forceDelete(ctx, pod); err != nil {
				errs = append(errs, err)
				continue
			}
			s.acted = true
			s.base.Recovering = append(s.base.Recovering, id)
			log.FromContext(ctx).Info("Force-deleted the pod of a lost broker", "broker", id, "pod", pod.Name, "node", pod.Spec.NodeName)
		}
		errs = append(errs, r.report(ctx, s, id, v.Reason, v.Message, v.Delete))
	}
	return errors.Join(errs...)
}

// facts gathers broker id's facts: its pod, its node and its Lease on top of the cluster's.
func (r *Reconciler) facts(ctx context.Context, s *scope, id int32, pod *corev1.Pod) (Facts, error) {
	f := s.base
	f.Broker, f.Pod, f.NodeName, f.LeaseRenewedAt = id, pod.Name, pod.Spec.NodeName, s.leases[id]
	if f.NodeName == "" {
		return f, nil
	}
	node := &corev1.Node{}
	switch err := r.Get(ctx, client.ObjectKey{Name: f.NodeName}, node); {
	case apierrors.IsNotFound(err):
		r.nodes.forget(f.NodeName)
		return f, nil
	case err != nil:
		return f, fmt.Errorf("get node %s: %w", f.NodeName, err)
	}
	f.NodeExists = true
	f.NodeNotReadySince = r.nodes.observe(node, s.now)
	f.OutOfService = outOfService(node)
	return f, nil
}

// forceDelete deletes pod with grace period 0, guarded by its UID: a pod of the same name the
// StatefulSet already recreated is never the one deleted.
func (r *Reconciler) forceDelete(ctx context.Context, pod *corev1.Pod) error {
	err := r.Delete(ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: ptr.To(pod.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("force-delete pod %s: %w", pod.Name, err)
	}
	r.deleted.Store(pod.UID, true)
	return nil
}

// report writes broker id's BrokerRecovery condition and records the decision's Events and
// metric when the decision changed. A broker on a Ready node gets no condition unless it had
// one: then it says the node is Ready again, or that the broker is Recovered.
func (r *Reconciler) report(ctx context.Context, s *scope, id int32, reason, message string, done bool) error {
	b := s.brokers[id]
	var cur *metav1.Condition
	if b != nil {
		cur = meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery)
	}
	if reason == kafkav1alpha1.ReasonNodeReady {
		switch {
		case cur == nil || cur.Reason == kafkav1alpha1.ReasonRecovered || cur.Reason == kafkav1alpha1.ReasonNodeReady:
			return nil
		case slices.Contains(s.base.Recovering, id):
			return nil // replaced, not Alive yet
		case cur.Reason == kafkav1alpha1.ReasonPodForceDeleted || cur.Reason == kafkav1alpha1.ReasonZombieClaimDeleted:
			reason, message = kafkav1alpha1.ReasonRecovered, fmt.Sprintf("Broker %d is Alive again after its pod was replaced at %s", id, stamp(cur.LastTransitionTime.Time))
		}
	}
	if cur != nil && cur.Reason == reason && cur.Message == message {
		return nil
	}
	if b == nil && !done {
		return nil // no Broker object (yet) to hold the condition: only an action is reported
	}
	decisions.WithLabelValues(s.cluster.Namespace, s.cluster.Name, reason).Inc()
	eventType, action := corev1.EventTypeNormal, actionHold
	switch {
	case done:
		eventType, action = corev1.EventTypeWarning, actionDelete
	case reason == kafkav1alpha1.ReasonRecovered || reason == kafkav1alpha1.ReasonNodeReady:
		action = actionReport
	}
	event := eventFor(reason)
	r.Recorder.Eventf(s.cluster, b, eventType, event, action, "%s", message)
	if b == nil {
		return nil // no Broker object yet: the cluster's Event is the record
	}
	r.Recorder.Eventf(b, nil, eventType, event, action, "%s", message)
	status := metav1.ConditionFalse
	if done {
		status = metav1.ConditionTrue
	}
	return r.applyCondition(ctx, b, metav1.Condition{
		Type: kafkav1alpha1.ConditionBrokerRecovery, Status: status, Reason: reason, Message: message,
		ObservedGeneration: b.Generation, LastTransitionTime: metav1.NewTime(s.now),
	})
}

// eventFor is the Event reason of a decision.
func eventFor(reason string) string {
	switch reason {
	case kafkav1alpha1.ReasonPodForceDeleted:
		return kafkav1alpha1.EventPodForceDeleted
	case kafkav1alpha1.ReasonZombieClaimDeleted:
		return kafkav1alpha1.EventZombieClaimDeleted
	case kafkav1alpha1.ReasonVolumeNodeAffinityConflict:
		return kafkav1alpha1.EventVolumeNodeAffinityConflict
	case kafkav1alpha1.ReasonRecovered, kafkav1alpha1.ReasonNodeReady:
		return kafkav1alpha1.EventRecovered
	}
	return kafkav1alpha1.EventRecoveryHeldBack
}

// applyCondition server-side applies the one condition this reconciler owns on b, under its
// own field manager: the registry's apply of the rest of the status leaves it alone, and this
// apply leaves the registry's conditions alone (conditions are a map keyed by type).
func (r *Reconciler) applyCondition(ctx context.Context, b *kafkav1alpha1.Broker, cond metav1.Condition) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
	if err != nil {
		return fmt.Errorf("convert condition of broker %s: %w", b.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{content}}}}
	u.SetGroupVersionKind(kafkav1alpha1.GroupVersion.WithKind("Broker"))
	u.SetNamespace(b.Namespace)
	u.SetName(b.Name)
	if err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(kafkav1alpha1.FieldOwnerRecovery), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s condition of broker %s: %w", kafkav1alpha1.ConditionBrokerRecovery, b.Name, err)
	}
	return nil
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// outOfService reports the node.kubernetes.io/out-of-service taint (any effect).
func outOfService(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == corev1.TaintNodeOutOfService {
			return true
		}
	}
	return false
}

// nodeObserver dates when each node was first seen not Ready, on the operator's clock — as
// Lease renewals are — so the node loss timeout never compares another component's clock
// with the operator's. After an operator restart a NotReady node is dated when first seen:
// the timeout starts again, which delays a recovery and never hastens one. Safe for
// concurrent use.
type nodeObserver struct {
	mu    sync.Mutex
	since map[string]time.Time // guarded by mu
}

// observe records node's readiness at now and returns since when it has not been Ready
// (zero while it is Ready).
func (o *nodeObserver) observe(node *corev1.Node, now time.Time) time.Time {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since == nil {
		o.since = map[string]time.Time{}
	}
	if ready {
		delete(o.since, node.Name)
		return time.Time{}
	}
	if t, ok := o.since[node.Name]; ok {
		return t
	}
	o.since[node.Name] = now
	return now
}

func (o *nodeObserver) forget(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.since, name)
}

// requestFor is the request of obj's cluster, by its kafka.paddock.dev/cluster label.
func requestFor(obj client.Object) []ctrl.Request {
	cluster, ok := obj.GetLabels()[kafkav1alpha1.LabelCluster]
	if !ok || cluster == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster}}}
}
