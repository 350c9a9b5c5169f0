package kafkacluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Reconciler provisions a KafkaCluster: it applies the children the desired*
// builders describe (server-side apply, field owner paddock-manager, controller owner
// references, so garbage collection removes them with the cluster — except the data claim,
// which outlives the cluster unless spec.storage.deleteClaim says otherwise) and reports
// clusterID, replicas, listeners and the Ready/Progressing/Degraded conditions. It owns only
// those status fields; the registry reconciler writes the rest (docs/architecture.md, "Who
// writes what"). The one object garbage collection cannot remove is the cluster-scoped
// node-reader ClusterRoleBinding of a cluster whose listeners advertise their node's address:
// FinalizerNodeReader holds the cluster until it is deleted.
type Reconciler struct {
	client.Client
	// APIReader reads the data claim and the StatefulSet from the API server, not the cache:
	// the manager caches only claims with paddock's cluster label, and a claim paddock did not
	// make must be seen to be refused rather than applied over; the StatefulSet's pod template
	// may be applied back as it is (pinnedPodTemplate), so it must be the current one.
	APIReader client.Reader
	// Recorder receives an Event on the KafkaCluster when its data claim's fate changes
	// (retained, owned, adopted). Required.
	Recorder events.EventRecorder
	Options  Options
	// Clock dates how long the data claim has been Pending; nil is the real clock.
	Clock clock.PassiveClock
}

// Options configure the provisioning reconciler.
type Options struct {
	// DefaultBrokerImage runs the brokers of a KafkaCluster whose spec.image is empty. The
	// manager Deployment passes its own image, since one image serves every role.
	DefaultBrokerImage string
}

// scope is one reconcile's state, passed through the phases in order.
type scope struct {
	// cluster is the KafkaCluster being reconciled; phases set its owned status fields.
	cluster *kafkav1alpha1.KafkaCluster
	// orig is cluster as read, the base of the status merge patch.
	orig *kafkav1alpha1.KafkaCluster
	// setClusterID is true when this reconcile set status.clusterID (minted it, or took it
	// from the data claim); its write is then guarded by resourceVersion so a reconcile
	// working from a stale read cannot replace an id that was already stored.
	setClusterID bool
	// claimClusterID is the cluster id the existing data claim carries, when this cluster may
	// use the claim; adoptedClusterID is true when status.clusterID was taken from it.
	claimClusterID   string
	adoptedClusterID bool
	// statefulSet, dataClaim and bootstrap are the existing children as read before applying
	// (nil when absent); statefulSet and dataClaim are read from the API server. Status is computed from them;
	// the effect of this reconcile's apply comes back as a watch event and the next reconcile
	// reports it.
	statefulSet *appsv1.StatefulSet
	dataClaim   *corev1.PersistentVolumeClaim
	bootstrap   *corev1.Service
	// storageClass is the data claim's StorageClass when the spec asks the claim to grow
	// (nil otherwise, or when the class does not exist).
	storageClass *storagev1.StorageClass
	// problem is why the spec was refused; applyErr why applying the children failed;
	// claimProblem why the data claim is not bound (pendingClaimProblem).
	problem      *specProblem
	applyErr     error
	claimProblem *specProblem
	// requeueAfter asks for another reconcile after that long (a Pending claim is looked at
	// again: its events are not watched).
	requeueAfter time.Duration
	// check is what the storage check's condition is computed from (observeStorageCheck);
	// checkDigest what the check of this storage certifies; checkJob the check Job as read,
	// whatever its digest (nil when absent). storageVerified is the StorageVerified condition
	// (zero when the reconcile stopped before it was computed) and storageHold why the
	// brokers are held at zero replicas, or "".
	check           checkObservation
	checkDigest     string
	checkJob        *batchv1.Job
	storageVerified metav1.Condition
	storageHold     string
	// monitored is the Monitored condition (reconcilePodMonitor): nil when the spec asks for
	// no PodMonitor or the reconcile stopped before the phase.
	monitored *metav1.Condition
	// monitorPhaseRan is true once reconcilePodMonitor ran, so a nil monitored means "not
	// asked for" and the condition is removed.
	monitorPhaseRan bool
}

// requeueWithin asks for another reconcile at most d from now.
func (s *scope) requeueWithin(d time.Duration) {
	if s.requeueAfter == 0 || d < s.requeueAfter {
		s.requeueAfter = d
	}
}

// phase is one ordered step of a reconcile. An error stops the reconcile.
type phase func(ctx context.Context, s *scope) error

// Reconcile reads the cluster, runs the phases in order, and writes the status once, at the
// end, whatever happened.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	cluster := &kafkav1alpha1.KafkaCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() {
		// Garbage collection removes the namespaced children; the binding is ours to remove.
		return ctrl.Result{}, r.revokeNodeReads(ctx, cluster)
	}
	s := &scope{cluster: cluster, orig: cluster.DeepCopy()}
	defer r.writeStatus(ctx, s, &reterr)

	phases := []phase{
		r.observeChildren,
		r.validateSpec,
		r.checkDataClaim,
		r.observeDataClaim,
		r.refuseStorageChange,
		r.grantNodeReads,
		r.ensureClusterID,
		r.observeStorageCheck,
		r.applyChildren,
		r.reportDataClaim,
		r.runStorageCheck,
		r.pruneBrokerServices,
		r.pruneOptionalChildren,
		r.reconcilePodMonitor,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: s.requeueAfter}, nil
}

// observeChildren reads the children status and the storage check are computed from.
func (r *Reconciler) observeChildren(ctx context.Context, s *scope) error {
	c := s.cluster
	var err error
	// From the API server: the pod template it runs may be kept as it is (pinnedPodTemplate),
	// and a cached copy a moment behind would put an older one back.
	if s.statefulSet, err = getOptional(ctx, r.APIReader, c.Namespace, kafkav1alpha1.StatefulSetName(c.Name), &appsv1.StatefulSet{}); err != nil {
		return err
	}
	if s.dataClaim, err = getOptional(ctx, r.APIReader, c.Namespace, kafkav1alpha1.DataClaimName(c.Name), &corev1.PersistentVolumeClaim{}); err != nil {
		return err
	}
	s.bootstrap, err = getOptional(ctx, r.Client, c.Namespace, kafkav1alpha1.BootstrapServiceName(c.Name), &corev1.Service{})
	return err
}

// validateSpec refuses a spec that cannot be acted on. Retrying cannot fix it, so the error is
// terminal; the next spec edit triggers a new reconcile. No child is touched.
func (r *Reconciler) validateSpec(_ context.Context, s *scope) error {
	if s.problem = checkSpec(s.cluster, r.Options); s.problem != nil {
		return reconcile.TerminalError(s.problem)
	}
	if s.problem = sharedStorageProblem(s.cluster); s.problem != nil {
		return reconcile.TerminalError(s.problem)
	}
	return nil
}

// observeDataClaim reads what the storage checks need beyond the claim: its StorageClass when
// the spec asks it to grow, and, while it is Pending, its Events, whose latest says why
// (pendingClaimProblem). A Pending claim is looked at again every pendingGrace/2: no watch
// tells of a new event.
func (r *Reconciler) observeDataClaim(ctx context.Context, s *scope) error {
	claim := s.dataClaim
	if claim == nil || s.cluster.Spec.Storage.Type == kafkav1alpha1.StorageEphemeral {
		return nil
	}
	if have, ok := claim.Spec.Resources.Requests[corev1.ResourceStorage]; ok && have.Cmp(s.cluster.Spec.StorageSize()) < 0 && deref(claim.Spec.StorageClassName) != "" {
		var err error
		if s.storageClass, err = getOptional(ctx, r.APIReader, "", deref(claim.Spec.StorageClassName), &storagev1.StorageClass{}); err != nil {
			return err
		}
	}
	if claim.Status.Phase != corev1.ClaimPending {
		return nil
	}
	events := &corev1.EventList{}
	if err := r.APIReader.List(ctx, events, client.InNamespace(claim.Namespace), client.MatchingFields{
		"involvedObject.kind": "PersistentVolumeClaim", "involvedObject.name": claim.Name, "involvedObject.uid": string(claim.UID),
	}); err != nil {
		return fmt.Errorf("list events of claim %s: %w", claim.Name, err)
	}
	s.claimProblem = pendingClaimProblem(claim, events.Items, r.clock().Now())
	s.requeueAfter = pendingGrace / 2
	return nil
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// checkDataClaim refuses to provision over a data claim this cluster may not use: one paddock
// did not make for it, or one holding another cluster's data (dataClaimVerdict). Nothing is
// applied — the StatefulSet would mount the claim — and the claim is left exactly as it is.
// The error is not terminal: such a claim can be deleted or fixed without an event this
// reconciler sees (the manager caches only labelled claims), so the reconcile is retried
// with backoff until it is.
func (r *Reconciler) checkDataClaim(_ context.Context, s *scope) error {
	if s.claimClusterID, s.problem = dataClaimVerdict(s.cluster, s.dataClaim); s.problem != nil {
		return s.problem
	}
	return nil
}

// refuseStorageChange refuses a storage change of an existing cluster, or a spec that does
// not match the retained claim it is adopting. Nothing is applied, so the StatefulSet keeps
// its volume and the claim its size and class.
func (r *Reconciler) refuseStorageChange(_ context.Context, s *scope) error {
	if s.problem = storageChange(s.cluster.Spec.Storage, s.statefulSet, s.dataClaim, s.storageClass); s.problem != nil {
		return reconcile.TerminalError(s.problem)
	}
	return nil
}

// grantNodeReads lets the brokers read Nodes when a listener advertises its node's address,
// and takes the grant back when none does. The finalizer goes on before the binding is made,
// so no binding can outlive its cluster.
func (r *Reconciler) grantNodeReads(ctx context.Context, s *scope) error {
	if !needsNodeReader(s.cluster) {
		return r.revokeNodeReads(ctx, s.cluster)
	}
	if err := r.setFinalizer(ctx, s.cluster, true); err != nil {
		return err
	}
	s.orig = s.cluster.DeepCopy() // the patch refreshed the cluster; status diffs from here
	if err := apply(ctx, r.Client, desiredNodeReaderRole()); err != nil {
		return err
	}
	return apply(ctx, r.Client, desiredNodeReaderBinding(s.cluster))
}

// revokeNodeReads deletes cluster's node-reader binding, if any, then drops the finalizer.
func (r *Reconciler) revokeNodeReads(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster) error {
	if !controllerutil.ContainsFinalizer(cluster, kafkav1alpha1.FinalizerNodeReader) {
		return nil
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.NodeReaderBindingName(cluster.Namespace, cluster.Name)}}
	if err := r.Delete(ctx, binding); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete clusterrolebinding %s: %w", binding.Name, err)
	}
	return r.setFinalizer(ctx, cluster, false)
}

// setFinalizer adds or removes FinalizerNodeReader with a merge patch (no-op when it is
// already so). The patch refreshes cluster from the answer.
func (r *Reconciler) setFinalizer(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, on bool) error {
	if controllerutil.ContainsFinalizer(cluster, kafkav1alpha1.FinalizerNodeReader) == on {
		return nil
	}
	patch := client.MergeFromWithOptions(cluster.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if on {
		controllerutil.AddFinalizer(cluster, kafkav1alpha1.FinalizerNodeReader)
	} else {
		controllerutil.RemoveFinalizer(cluster, kafkav1alpha1.FinalizerNodeReader)
	}
	if err := r.Patch(ctx, cluster, patch); err != nil {
		return fmt.Errorf("patch finalizers of kafkacluster %s: %w", cluster.Name, err)
	}
	return nil
}

// ensureClusterID gives the cluster its Kafka cluster id once: the one its data claim
// carries, when it has a claim (a re-created cluster adopting its retained data, or a status
// that was lost), else a new one. It lives in status, so it survives manager restarts, and
// on the claim, so it survives the cluster; it is never changed once stored.
func (r *Reconciler) ensureClusterID(_ context.Context, s *scope) error {
	if s.cluster.Status.ClusterID != "" {
		return nil
	}
	if s.claimClusterID != "" {
		s.cluster.Status.ClusterID, s.setClusterID, s.adoptedClusterID = s.claimClusterID, true, true
		return nil
	}
	id, err := newClusterID(rand.Reader)
	if err != nil {
		return err
	}
	s.cluster.Status.ClusterID, s.setClusterID = id, true
	return nil
}

// applyChildren server-side applies every desired child. It applies them all even when one
// fails, so one broken child does not hold the others back. The StatefulSet keeps the pod
// template it runs while the template's inputs are unchanged (pinnedPodTemplate).
func (r *Reconciler) applyChildren(ctx context.Context, s *scope) error {
	var errs []error
	for _, child := range desiredChildren(s.cluster, r.Options) {
		if sts, ok := child.(*appsv1.StatefulSet); ok {
			if s.storageHold != "" {
				sts.Spec.Replicas = ptr.To[int32](0) // a failed storage check holds the brokers
			}
			var kept bool
			if sts.Spec.Template, kept = pinnedPodTemplate(sts, s.statefulSet); kept {
				log.FromContext(ctx).V(1).Info("Kept the running broker pod template: its inputs are unchanged", "statefulset", sts.Name)
			}
		}
		if err := apply(ctx, r.Client, child); err != nil {
			errs = append(errs, err)
		}
	}
	s.applyErr = errors.Join(errs...)
	return s.applyErr
}

// reportDataClaim records an Event on the cluster when this reconcile's apply changed what
// happens to the data claim when the cluster is deleted, or adopted the claim
// (dataClaimEvent). It runs only after every child applied.
func (r *Reconciler) reportDataClaim(_ context.Context, s *scope) error {
	claim := desiredDataClaim(s.cluster)
	if claim == nil {
		return nil
	}
	if reason, action, note := dataClaimEvent(s.cluster, s.dataClaim, s.adoptedClusterID); reason != "" {
		r.Recorder.Eventf(s.cluster, claim, corev1.EventTypeNormal, reason, action, "%s", note)
	}
	return nil
}

// pruneBrokerServices deletes the per-broker Services of brokers the cluster no longer has
// (after a scale-down): server-side apply never removes objects it is not asked about.
func (r *Reconciler) pruneBrokerServices(ctx context.Context, s *scope) error {
	selector, err := brokerServiceSelector(s.cluster)
	if err != nil {
		return err
	}
	services := &corev1.ServiceList{}
	if err := r.List(ctx, services, client.InNamespace(s.cluster.Namespace), selector); err != nil {
		return fmt.Errorf("list broker services: %w", err)
	}
	for i := range services.Items {
		svc := &services.Items[i]
		id, err := strconv.Atoi(svc.Labels[kafkav1alpha1.LabelBrokerID])
		if err != nil || id < int(s.cluster.Spec.Replicas) || !metav1.IsControlledBy(svc, s.cluster) {
			continue
		}
		if err := r.Delete(ctx, svc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete service %s of removed broker %d: %w", svc.Name, id, err)
		}
		log.FromContext(ctx).Info("Deleted the Service of a removed broker", "service", svc.Name, "broker", id)
	}
	return nil
}

// pruneOptionalChildren deletes the children the cluster has stopped needing: the internal
// bootstrap Service once it has no external listener (or no internal one) left, and the
// NetworkPolicy once spec.networkPolicy.enabled is false. Only objects this cluster controls
// are deleted.
func (r *Reconciler) pruneOptionalChildren(ctx context.Context, s *scope) error {
	c := s.cluster
	var unwanted []client.Object
	if desiredInternalBootstrapService(c) == nil {
		unwanted = append(unwanted, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: kafkav1alpha1.InternalBootstrapServiceName(c.Name)}})
	}
	if desiredNetworkPolicy(c) == nil {
		unwanted = append(unwanted, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: kafkav1alpha1.StatefulSetName(c.Name)}})
	}
	for _, obj := range unwanted {
		if err := r.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("get %T %s: %w", obj, obj.GetName(), err)
		}
		if !metav1.IsControlledBy(obj, c) {
			continue
		}
		if err := r.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s: %w", obj, obj.GetName(), err)
		}
		log.FromContext(ctx).Info("Deleted a child the cluster no longer needs", "kind", fmt.Sprintf("%T", obj), "name", obj.GetName())
	}
	return nil
}

// writeStatus computes the owned status fields from this reconcile's observations and
// writes them with one merge patch, only when they changed. Its error joins the reconcile's.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope, reterr *error) {
	c := s.cluster
	o := observation{
		Generation: c.Generation, DesiredReplicas: c.Spec.Replicas,
		Problem: s.problem, ApplyErr: s.applyErr, StatefulSet: s.statefulSet,
		ClaimProblem: s.claimProblem, ClaimExpanding: claimExpanding(s.dataClaim),
		ConfigProblems: configProblems(c), Counts: c.Status.Counts,
		MountRefused: mountRefusals(c.Status.Brokers),
		StorageHold:  s.storageHold,
	}
	if s.storageHold != "" {
		o.DesiredReplicas = 0
	}
	c.Status.ObservedGeneration = c.Generation
	c.Status.Replicas, c.Status.ReadyReplicas = 0, 0
	if s.statefulSet != nil {
		c.Status.Replicas, c.Status.ReadyReplicas = s.statefulSet.Status.Replicas, s.statefulSet.Status.ReadyReplicas
	}
	c.Status.StorageSize = claimSize(s.dataClaim)
	c.Status.Listeners = listenerStatuses(c, s.bootstrap)
	meta.SetStatusCondition(&c.Status.Conditions, readyCondition(o))
	meta.SetStatusCondition(&c.Status.Conditions, progressingCondition(o))
	meta.SetStatusCondition(&c.Status.Conditions, degradedCondition(o))
	meta.SetStatusCondition(&c.Status.Conditions, securedCondition(c.Generation, c.Spec.Listeners))
	if s.storageVerified.Type != "" {
		meta.SetStatusCondition(&c.Status.Conditions, s.storageVerified)
	}
	switch {
	case s.monitored != nil:
		meta.SetStatusCondition(&c.Status.Conditions, *s.monitored)
	case s.monitorPhaseRan:
		meta.RemoveStatusCondition(&c.Status.Conditions, kafkav1alpha1.ConditionMonitored)
	}

	if equality.Semantic.DeepEqual(s.orig.Status, c.Status) {
		return
	}
	patch := client.MergeFrom(s.orig)
	if s.setClusterID {
		patch = client.MergeFromWithOptions(s.orig, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Status().Patch(ctx, c, patch); err != nil {
		*reterr = errors.Join(*reterr, fmt.Errorf("patch status of kafkacluster %s: %w", c.Name, err))
	}
}

// SetupWithManager watches KafkaClusters (spec changes, deletions, and the registry's counts
// crossing "none alive", so the other status writes of this and the registry reconciler do
// not retrigger it), every child it owns — the node-reader binding through its labels — so a
// child that is changed or deleted is put back, data claims by their cluster label, owned
// or not, and the storage check's Job and pods (a pod that cannot be scheduled changes no
// Job status).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("kafkacluster").
		For(&kafkav1alpha1.KafkaCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted, aliveCrossedZero(), mountRefusalsChanged()))).
		Watches(&rbacv1.ClusterRoleBinding{}, handler.EnqueueRequestsFromMapFunc(bindingToCluster)).
		Owns(&corev1.ServiceAccount{}).
		Owns(&rbacv1.Role{}).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.NetworkPolicy{}).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(claimToCluster)).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(checkPodToCluster)).
		Complete(r)
}

// aliveCrossedZero passes a KafkaCluster update whose registry counts start or stop saying
// "brokers registered and none alive", which the Degraded condition reports.
func aliveCrossedZero() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*kafkav1alpha1.KafkaCluster)
		cur, okNew := e.ObjectNew.(*kafkav1alpha1.KafkaCluster)
		return okOld && okNew && noAliveBroker(old.Status.Counts) != noAliveBroker(cur.Status.Counts)
	}}
}

// mountRefusalsChanged passes a KafkaCluster update whose registry rows change what they say
// of refused mounts, which the Degraded condition reports.
func mountRefusalsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*kafkav1alpha1.KafkaCluster)
		cur, okNew := e.ObjectNew.(*kafkav1alpha1.KafkaCluster)
		return okOld && okNew && !maps.Equal(mountRefusals(old.Status.Brokers), mountRefusals(cur.Status.Brokers))
	}}
}

// claimToCluster maps a data claim to the cluster its kafka.paddock.dev/cluster label names.
// A retained claim has no owner reference for Owns to follow, and a change to it (relabelled,
// re-annotated, deleted) may change what the cluster is allowed to do with it.
func claimToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	cluster := obj.GetLabels()[kafkav1alpha1.LabelCluster]
	if cluster == "" || obj.GetName() != kafkav1alpha1.DataClaimName(cluster) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: cluster}}}
}

// deletionStarted passes the update that sets a cluster's deletionTimestamp (which does not
// change its generation), so the finalizer is handled at once.
var deletionStarted = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

// bindingToCluster maps a node-reader ClusterRoleBinding to the cluster its labels name.
func bindingToCluster(_ context.Context, obj client.Object) []reconcile.Request {
	ns, name := obj.GetLabels()[kafkav1alpha1.LabelNamespace], obj.GetLabels()[kafkav1alpha1.LabelCluster]
	if ns == "" || name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
}

// getOptional reads namespace/name into obj; nil (no error) when it does not exist.
func getOptional[T client.Object](ctx context.Context, c client.Reader, namespace, name string, obj T) (T, error) {
	var none T
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return none, nil
		}
		return none, fmt.Errorf("get %T %s: %w", obj, name, err)
	}
	return obj, nil
}

// apply server-side applies obj under the paddock-manager field owner, taking
// over fields another manager set (the operator is the authority on its children).
func apply(ctx context.Context, c client.Client, obj client.Object) error {
	body, err := applyBody(obj)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(body),
		client.FieldOwner(kafkav1alpha1.FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", body.GetKind(), body.GetName(), err)
	}
	return nil
}

// applyBody is the apply configuration sent for obj: the object as JSON without
// status and the null creationTimestamps a typed object carries, so the operator claims only
// the fields the builder set. The golden files are this body.
func applyBody(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %T %s: %w", obj, obj.GetName(), err)
	}
	delete(m, "status")
	unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(m, "spec", "template", "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: m}, nil
}

// brokerServiceSelector selects cluster's per-broker Services: the cluster's
// objects that carry a broker id.
func brokerServiceSelector(cluster *kafkav1alpha1.KafkaCluster) (client.MatchingLabelsSelector, error) {
	hasID, err := labels.NewRequirement(kafkav1alpha1.LabelBrokerID, selection.Exists, nil)
	if err != nil {
		return client.MatchingLabelsSelector{}, fmt.Errorf("selector for label %s: %w", kafkav1alpha1.LabelBrokerID, err)
	}
	sel := labels.SelectorFromSet(labels.Set{kafkav1alpha1.LabelCluster: cluster.Name}).Add(*hasID)
	return client.MatchingLabelsSelector{Selector: sel}, nil
}
