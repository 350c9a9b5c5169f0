package registry

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// Event actions (events.k8s.io requires one): what the registry did when it recorded the event.
const (
	actionCreate = "Create"
	actionDelete = "Delete"
	actionReport = "UpdateStatus"
)

// syncBroker makes the Broker object of the i-th row say that row: it creates the object for
// a newly registered broker, writes its status when it differs, and records an Event for each
// transition. It compares with the status this reconciler last wrote when the cache does not
// show that write yet (writtenStatuses), so a stale cache never makes it write a status, and
// record its transitions, twice.
func (r *Reconciler) syncBroker(ctx context.Context, s *scope, i int) error {
	row, why := s.cluster.Status.Brokers[i], s.result.Reasons[i]
	b, exists := s.brokers[row.ID]
	if !exists {
		var err error
		if b, err = r.createBroker(ctx, s.cluster, row); err != nil || b == nil {
			return err
		}
	}
	key := client.ObjectKeyFromObject(b)
	cur := r.written.current(key, registryOwned(b.Status))
	var written *kafkav1alpha1.BrokerRow
	if cur.State != "" {
		written = cur.BrokerRow.DeepCopy()
	}
	want := brokerStatus(s.cluster.Name, row, why, cur, b.Generation, s.now)
	if equality.Semantic.DeepEqual(cur, want) {
		return nil
	}
	if err := r.applyBrokerStatus(ctx, b, want); err != nil {
		return err
	}
	r.written.record(key, want)
	for _, t := range rules.Transitions(written, row) {
		r.recordTransition(ctx, b, t)
	}
	return nil
}

// applyBrokerStatus server-side applies b's whole status. The registry owns every status
// field of a Broker, so apply is the write that also removes a field the new status leaves
// out (a cleared reason), without the resourceVersion conflicts of an update.
func (r *Reconciler) applyBrokerStatus(ctx context.Context, b *kafkav1alpha1.Broker, status kafkav1alpha1.BrokerStatus) error {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return fmt.Errorf("convert status of broker %s: %w", b.Name, err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": content}}
	u.SetGroupVersionKind(kafkav1alpha1.GroupVersion.WithKind("Broker"))
	u.SetNamespace(b.Namespace)
	u.SetName(b.Name)
	if err := r.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(kafkav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply status of broker %s: %w", b.Name, err)
	}
	b.Status = status
	return nil
}

// createBroker creates broker row.ID's object, owned by the cluster. It returns nil (no
// error) when the object already exists: the cache has not seen this controller's own create
// yet, and the create event brings the reconcile back.
func (r *Reconciler) createBroker(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, row kafkav1alpha1.BrokerRow) (*kafkav1alpha1.Broker, error) {
	b := desiredBroker(cluster, row.ID)
	scheme := r.Scheme
	if scheme == nil {
		scheme = r.Client.Scheme()
	}
	if err := controllerutil.SetControllerReference(cluster, b, scheme); err != nil {
		return nil, fmt.Errorf("own broker %s: %w", b.Name, err)
	}
	if err := r.Create(ctx, b); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("create broker %s: %w", b.Name, err)
	}
	log.FromContext(ctx).Info("Registered broker", "broker", row.ID, "pod", row.Pod)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, kafkav1alpha1.EventRegistered, actionCreate,
		"Broker %d (pod %s) is registered", row.ID, row.Pod)
	return b, nil
}

// deregister deletes broker id's object: the StatefulSet no longer wants it and it no longer
// heartbeats. The Event goes on the cluster, since the Broker object is gone with it.
func (r *Reconciler) deregister(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, id int32, b *kafkav1alpha1.Broker) error {
	r.written.forget(client.ObjectKeyFromObject(b))
	if err := r.Delete(ctx, b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("delete broker %s: %w", b.Name, err)
	}
	log.FromContext(ctx).Info("Deregistered broker", "broker", id)
	r.Recorder.Eventf(cluster, b, corev1.EventTypeNormal, kafkav1alpha1.EventDeregistered, actionDelete,
		"Broker %d is deregistered: the StatefulSet no longer wants it and it stopped heartbeating", id)
	return nil
}

// recordTransition records one transition event on b, whose status is already the new one.
// Only Dead is a warning: fencing is also what a booting or restarting broker goes through.
func (r *Reconciler) recordTransition(ctx context.Context, b *kafkav1alpha1.Broker, transition string) {
	condType := kafkav1alpha1.ConditionAlive
	if transition == kafkav1alpha1.EventFenced || transition == kafkav1alpha1.EventServing {
		condType = kafkav1alpha1.ConditionReady
	}
	cond := meta.FindStatusCondition(b.Status.Conditions, condType)
	eventType := corev1.EventTypeNormal
	if transition == kafkav1alpha1.EventDead {
		eventType = corev1.EventTypeWarning
	}
	log.FromContext(ctx).Info("Broker changed", "broker", b.Status.ID, "transition", transition, "reason", cond.Reason)
	r.Recorder.Eventf(b, nil, eventType, transition, actionReport, "Broker %d is %s (%s): %s",
		b.Status.ID, transition, cond.Reason, cond.Message)
}

// registryOwned is the part of a Broker's status the registry writes: all of it but the
// conditions of other writers (the recovery reconciler's BrokerRecovery, applied under its
// own field manager). The registry compares, remembers and applies only this part, so
// server-side apply leaves the other conditions alone.
func registryOwned(st kafkav1alpha1.BrokerStatus) kafkav1alpha1.BrokerStatus {
	own := *st.DeepCopy()
	own.Conditions = slices.DeleteFunc(own.Conditions, func(c metav1.Condition) bool {
		return c.Type != kafkav1alpha1.ConditionReady && c.Type != kafkav1alpha1.ConditionAlive
	})
	if len(own.Conditions) == 0 {
		own.Conditions = nil
	}
	return own
}

// desiredBroker is broker id's object without status (status is a subresource, written
// separately).
func desiredBroker(cluster *kafkav1alpha1.KafkaCluster, id int32) *kafkav1alpha1.Broker {
	return &kafkav1alpha1.Broker{
		ObjectMeta: metav1.ObjectMeta{
			Name:      kafkav1alpha1.BrokerObjectName(cluster.Name, id),
			Namespace: cluster.Namespace,
			Labels:    kafkav1alpha1.BrokerLabels(cluster.Name, id),
		},
	}
}

// brokerID is the id of a Broker object this cluster controls, from its broker-id
// label; false for an object it does not control or whose label is not an id.
func brokerID(cluster *kafkav1alpha1.KafkaCluster, b *kafkav1alpha1.Broker) (int32, bool) {
	if !metav1.IsControlledBy(b, cluster) {
		return 0, false
	}
	id, err := strconv.ParseInt(b.Labels[kafkav1alpha1.LabelBrokerID], 10, 32)
	if err != nil || id < 0 || b.Name != kafkav1alpha1.BrokerObjectName(cluster.Name, int32(id)) {
		return 0, false
	}
	return int32(id), true
}

// brokerStatus is the status a Broker object whose status is cur (at generation) should have
// for row: the row, its cluster, Ready (state Serving) and the Ready and Alive conditions. A
// condition's lastTransitionTime moves only when its status does.
func brokerStatus(cluster string, row kafkav1alpha1.BrokerRow, why rules.Reasons, cur kafkav1alpha1.BrokerStatus, generation int64, now time.Time) kafkav1alpha1.BrokerStatus {
	st := kafkav1alpha1.BrokerStatus{
		Cluster:    cluster,
		BrokerRow:  *row.DeepCopy(),
		Ready:      row.State == kafkav1alpha1.BrokerServing,
		Conditions: cur.DeepCopy().Conditions,
	}
	meta.SetStatusCondition(&st.Conditions, condition(kafkav1alpha1.ConditionReady,
		st.Ready, kafkav1alpha1.ReasonServing, why.State, generation, now))
	meta.SetStatusCondition(&st.Conditions, condition(kafkav1alpha1.ConditionAlive,
		row.Health == kafkav1alpha1.BrokerAlive, kafkav1alpha1.ReasonHeartbeating, why.Health, generation, now))
	return st
}

// writtenStatuses remembers the Broker status this reconciler last applied to each Broker
// object until the cache shows it. A reconcile that runs before the informer delivered the
// reconciler's own write would otherwise compare with the stale cached status, apply the
// same status again and record every transition a second time. Only the registry writes
// Broker status, so a cached status that differs from the one remembered is taken as not
// caught up yet. Safe for concurrent use.
type writtenStatuses struct {
	mu   sync.Mutex
	last map[client.ObjectKey]kafkav1alpha1.BrokerStatus // guarded by mu
}

// current is the status the Broker object key has as far as the reconciler knows: cached
// once the cache shows the last write (which is then forgotten), else the last write.
func (w *writtenStatuses) current(key client.ObjectKey, cached kafkav1alpha1.BrokerStatus) kafkav1alpha1.BrokerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[key]
	if !ok {
		return cached
	}
	if equality.Semantic.DeepEqual(last, cached) {
		delete(w.last, key)
		return cached
	}
	return last
}

// record remembers that status was just applied to key.
func (w *writtenStatuses) record(key client.ObjectKey, status kafkav1alpha1.BrokerStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[client.ObjectKey]kafkav1alpha1.BrokerStatus{}
	}
	w.last[key] = *status.DeepCopy()
}

// forget drops what is remembered about key (its object was deleted).
func (w *writtenStatuses) forget(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.last, key)
}

// condition is a condition that is True with trueReason, or False with falseReason.
func condition(condType string, isTrue bool, trueReason, falseReason string, generation int64, now time.Time) metav1.Condition {
	c := metav1.Condition{
		Type: condType, Status: metav1.ConditionFalse, Reason: falseReason,
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
	}
	if isTrue {
		c.Status, c.Reason = metav1.ConditionTrue, trueReason
	}
	c.Message = messages[c.Reason]
	return c
}

// messages says what each reason means for the broker, in a sentence a user reading
// `kubectl describe broker` can act on.
var messages = map[string]string{
	kafkav1alpha1.ReasonServing:          "The broker's endpoint is serving; clients see it in Metadata.",
	kafkav1alpha1.ReasonNotServing:       "The broker's endpoint is listed but its pod is not ready; clients do not see it in Metadata.",
	kafkav1alpha1.ReasonTerminating:      "The broker's pod is being deleted.",
	kafkav1alpha1.ReasonPodMissing:       "The StatefulSet wants this broker but no endpoint lists it: its pod is missing or being recreated.",
	kafkav1alpha1.ReasonNotListed:        "The broker heartbeats but no endpoint lists it.",
	kafkav1alpha1.ReasonHeartbeating:     "The broker's heartbeat Lease is fresh and healthy; it may be given work.",
	kafkav1alpha1.ReasonStarting:         "The broker has not heartbeated yet: it is being scheduled or is starting.",
	kafkav1alpha1.ReasonNoHeartbeat:      "The broker has never heartbeated, and its start-up grace period is over.",
	kafkav1alpha1.ReasonHeartbeatExpired: "The broker's heartbeat Lease was not renewed within its duration; clients no longer see it in Metadata.",
	kafkav1alpha1.ReasonPodGone:          "The pod the broker's heartbeat came from was deleted or replaced: the broker is out of the alive set without waiting for its Lease to expire.",
	kafkav1alpha1.ReasonProcessExited:    "The broker container exited or restarted since its last heartbeat: the broker is out of the alive set without waiting for its Lease to expire.",
	kafkav1alpha1.ReasonUnhealthy:        "The broker reports itself unhealthy: its request loop is wedged or its storage is failing.",
	kafkav1alpha1.ReasonDraining:         "The broker announced a shutdown and is handing its work over.",
}

// warnRefused records a Warning for each thing a broker's Lease says that the rules did not
// believe (rules.Result.Refused), once per Lease and problem: on the broker's Broker object,
// or on the cluster while it has none. The rows already leave it out, so nothing of it
// reaches status; the Event is how a person learns that a broker is lying or broken.
func (r *Reconciler) warnRefused(ctx context.Context, s *scope) error {
	byLease := map[string][]rules.Refusal{}
	for _, rf := range s.result.Refused {
		byLease[rf.Lease] = append(byLease[rf.Lease], rf)
	}
	for _, l := range s.input.Leases {
		key := client.ObjectKeyFromObject(&l)
		found := byLease[l.Name]
		var problems []string
		for _, rf := range found {
			problems = append(problems, rf.Problem)
		}
		if !r.refused.changed(key, problems) || len(found) == 0 {
			continue
		}
		regarding := client.Object(s.cluster)
		if b, ok := s.brokers[found[0].Broker]; ok {
			regarding = b
		}
		log.FromContext(ctx).Info("Refused what a heartbeat Lease says", "lease", l.Name, "broker", found[0].Broker, "problems", problems)
		r.Recorder.Eventf(regarding, &l, corev1.EventTypeWarning, kafkav1alpha1.EventInvalidHeartbeat, actionReport,
			"Lease %s of broker %d: %s", l.Name, found[0].Broker, strings.Join(problems, "; "))
	}
	return nil
}

// refusals remembers, per Lease, the problems last warned about. Safe for concurrent use.
type refusals struct {
	mu   sync.Mutex
	last map[client.ObjectKey]string // guarded by mu
}

// changed records problems as key's current ones and reports whether they differ from the
// last recorded (no problems clears the record).
func (f *refusals) changed(key client.ObjectKey, problems []string) bool {
	now := strings.Join(problems, "\n")
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.last == nil {
		f.last = map[client.ObjectKey]string{}
	}
	if f.last[key] == now {
		return false
	}
	if now == "" {
		delete(f.last, key)
	} else {
		f.last[key] = now
	}
	return true
}
