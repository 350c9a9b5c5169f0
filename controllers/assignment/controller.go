package assignment

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/balance"
)

// Reconciler assigns the partitions of one KafkaCluster's topics (package doc). A request is a
// cluster; KafkaTopic events map to their spec.cluster.
//
// Every write is guarded by the resourceVersion it was computed from (optimistic lock): a
// decision taken from a stale cache never reaches the API server, so one partition is never
// given two leaders at one epoch, nor one coordinator epoch two broker sets.
type Reconciler struct {
	client.Client
	// Recorder receives an Event on a KafkaTopic for each reconcile that changed its leaders
	// and when a deleted topic is unassigned.
	Recorder events.EventRecorder
	// Random mints topic ids; crypto/rand when nil.
	Random io.Reader
}

// Event actions (events.k8s.io requires one).
const (
	actionAssign   = "Assign"
	actionUnassign = "Unassign"
)

// What the assignment did with a failed partition: the action label of
// paddock_partition_failures_total.
const (
	actionRetried = "retried"
	actionMoved   = "moved"
	actionOffline = "offline"
)

// partitionFailures counts the failed partitions the assignment acted on (docs/metrics.md).
var partitionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "paddock_partition_failures_total",
	Help: "Partitions whose storage failed on their leader, by what the assignment did: retried (taken over again on the same broker at the next epoch), moved (to another broker), offline (failed on every alive broker).",
}, []string{"namespace", "cluster", "action"})

// Collectors are the series this package records, for the manager's registry
// (controllers.RegisterMetrics registers them).
func Collectors() []prometheus.Collector { return []prometheus.Collector{partitionFailures} }

// scope is one reconcile's state, passed through the phases in order.
type scope struct {
	// cluster is the KafkaCluster (nil when it does not exist or is being deleted).
	cluster *kafkav1alpha1.KafkaCluster
	// name and namespace identify the cluster even when it is gone.
	name, namespace string
	// live and deleting are the cluster's KafkaTopics, sorted by name; served are the live
	// ones that are assigned (no older topic claims their name).
	live, deleting, served []*kafkav1alpha1.KafkaTopic
	// yieldsTo maps each live topic that is not served to the topic it yields to.
	yieldsTo map[string]string
	// alive is the alive set; failed the partitions the brokers announce as failed (by served
	// topic); result what the balancer decided for served.
	alive  []balance.Broker
	failed []balance.Failure
	result balance.Result
	// uncleanable is what the rows announce of partitions that cannot be compacted, by
	// served topic.
	uncleanable map[string][]kafkav1alpha1.UncleanablePartitionStatus
}

// phase is one ordered step of a reconcile. An error stops the reconcile.
type phase func(ctx context.Context, s *scope) error

// Reconcile decides and writes the assignment of one cluster's topics.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &scope{name: req.Name, namespace: req.Namespace}
	phases := []phase{
		r.observe,
		r.ensureFinalizers,
		r.assign,
		r.writeTopics,
		r.releaseDeleted,
		r.writeClusterStatus,
	}
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// observe reads the cluster and its topics from the cache.
func (r *Reconciler) observe(ctx context.Context, s *scope) error {
	kc := &kafkav1alpha1.KafkaCluster{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, kc); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get kafkacluster %s: %w", s.name, err)
	case kc.DeletionTimestamp.IsZero():
		s.cluster = kc
	}
	topics := &kafkav1alpha1.KafkaTopicList{}
	if err := r.List(ctx, topics, client.InNamespace(s.namespace), client.MatchingFields{topicClusterField: s.name}); err != nil {
		return fmt.Errorf("list kafkatopics of cluster %s: %w", s.name, err)
	}
	for i := range topics.Items {
		kt := &topics.Items[i]
		if kt.DeletionTimestamp.IsZero() {
			s.live = append(s.live, kt)
		} else {
			s.deleting = append(s.deleting, kt)
		}
	}
	slices.SortFunc(s.live, byName)
	slices.SortFunc(s.deleting, byName)
	s.yieldsTo = conflicts(s.live)
	for _, kt := range s.live {
		if _, yields := s.yieldsTo[kt.Name]; !yields {
			s.served = append(s.served, kt)
		}
	}
	if s.cluster != nil {
		s.alive = alive(s.cluster.Status.Brokers)
		s.failed = failures(s.cluster.Status.Brokers, s.served)
		s.uncleanable = uncleanableByTopic(s.cluster.Status.Brokers, s.served)
	}
	return nil
}

// ensureFinalizers puts both topic finalizers on every live topic of an existing cluster, before
// any partition of it is assigned: data can only be written once a leader is, and from then on
// a deletion must pass through unassignment and data removal (docs/topics.md).
func (r *Reconciler) ensureFinalizers(ctx context.Context, s *scope) error {
	if s.cluster == nil {
		return nil
	}
	for _, kt := range s.live {
		if controllerutil.ContainsFinalizer(kt, kafkav1alpha1.FinalizerAssignment) && controllerutil.ContainsFinalizer(kt, kafkav1alpha1.FinalizerData) {
			continue
		}
		controllerutil.AddFinalizer(kt, kafkav1alpha1.FinalizerAssignment)
		controllerutil.AddFinalizer(kt, kafkav1alpha1.FinalizerData)
		if err := r.Update(ctx, kt); err != nil {
			return fmt.Errorf("add finalizers to kafkatopic %s: %w", kt.Name, err)
		}
	}
	return nil
}

// assign lets the balancer decide every served topic's leaders over the alive set. With no
// broker alive it keeps everything (balance's rule 1).
func (r *Reconciler) assign(_ context.Context, s *scope) error {
	if s.cluster == nil {
		return nil
	}
	in := balance.Input{Alive: s.alive, Failed: s.failed}
	for _, kt := range s.served {
		in.Topics = append(in.Topics, balanceTopic(kt))
	}
	var err error
	if s.result, err = balance.Assign(in); err != nil {
		return fmt.Errorf("assign partitions of cluster %s: %w", s.name, err)
	}
	return nil
}

// writeTopics writes the status of every live topic whose status changed, and records an
// Event for each one whose leaders changed.
func (r *Reconciler) writeTopics(ctx context.Context, s *scope) error {
	var errs []error
	for _, kt := range s.live {
		errs = append(errs, r.writeTopic(ctx, s, kt))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) writeTopic(ctx context.Context, s *scope, kt *kafkav1alpha1.KafkaTopic) error {
	orig := kt.DeepCopy()
	st := &kt.Status
	st.ObservedGeneration = kt.Generation
	st.TopicName = kt.KafkaName()
	if st.TopicID == "" && s.cluster != nil {
		id, err := kafkav1alpha1.NewKafkaUUID(r.random())
		if err != nil {
			return err
		}
		st.TopicID = id.String() // minted once: the guarded write below fails if another reconcile stored one
	}
	var clusterConfig map[string]string
	if s.cluster != nil {
		clusterConfig = s.cluster.Spec.Config
	}
	f := topicFacts{
		Generation: kt.Generation, ClusterFound: s.cluster != nil, Alive: len(s.alive),
		ConfigProblems: topicConfigProblems(kt.Spec.Config, clusterConfig),
	}
	var moves []balance.Move
	switch other, yields := s.yieldsTo[kt.Name]; {
	case s.cluster == nil:
		// Keep the stored assignment: no broker reads it, and a cluster re-created under
		// the name continues from it.
	case yields:
		f.YieldsTo, f.YieldsToName = other, kt.KafkaName()
		st.Partitions = unassigned(kt)
		st.Uncleanable = nil
	default:
		a, _ := s.result.Topic(kt.Name)
		st.Partitions = partitionStatuses(a)
		st.Uncleanable = s.uncleanable[kt.Name]
		for _, m := range s.result.Moves {
			if m.Topic == kt.Name {
				moves = append(moves, m)
			}
		}
	}
	f.Partitions, f.Leaderless = len(st.Partitions), leaderless(st.Partitions, s.alive)
	if s.cluster != nil {
		f.Offline = offlineOf(s.result.Offline, kt.Name)
	}
	setConditions(st, f)
	if equality.Semantic.DeepEqual(orig.Status, kt.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, kt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch status of kafkatopic %s: %w", kt.Name, err)
	}
	if len(moves) > 0 {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, kafkav1alpha1.EventLeadersChanged, actionAssign, "%s", movesMessage(moves))
		log.FromContext(ctx).Info("Assigned leaders", "topic", kt.Name, "changed", len(moves))
	}
	r.reportFailures(ctx, s, kt, orig, moves, f.Offline)
	for _, u := range newlyUncleanable(orig.Status.Uncleanable, st.Uncleanable) {
		r.Recorder.Eventf(kt, nil, corev1.EventTypeWarning, kafkav1alpha1.EventPartitionUncleanable, actionAssign, "%s", uncleanableMessage(u))
		log.FromContext(ctx).Info("A compacted partition cannot be cleaned", "topic", kt.Name, "partition", u.Partition,
			"broker", u.Broker, "cause", u.Cause)
	}
	return nil
}

// reportFailures records a Warning Event and counts each failed partition the decision just
// took over again or moved, and the partitions that became offline (failed on every alive
// broker) — once, when the topic's Degraded condition turns to PartitionsFailed.
func (r *Reconciler) reportFailures(ctx context.Context, s *scope, kt, orig *kafkav1alpha1.KafkaTopic, moves []balance.Move, offline []int32) {
	for _, m := range moves {
		if m.Reason != balance.ReasonStorageFailed {
			continue
		}
		action := actionRetried
		if m.From != m.To {
			action = actionMoved
		}
		partitionFailures.WithLabelValues(s.namespace, s.name, action).Inc()
		r.Recorder.Eventf(kt, nil, corev1.EventTypeWarning, kafkav1alpha1.EventPartitionFailed, actionAssign, "%s", failureMessage(m))
		log.FromContext(ctx).Info("A failed partition got a new epoch", "topic", kt.Name, "partition", m.Partition,
			"from", m.From, "to", m.To, "epoch", m.Epoch)
	}
	was := meta.FindStatusCondition(orig.Status.Conditions, kafkav1alpha1.ConditionDegraded)
	if len(offline) > 0 && (was == nil || was.Reason != kafkav1alpha1.ReasonPartitionsFailed) {
		partitionFailures.WithLabelValues(s.namespace, s.name, actionOffline).Add(float64(len(offline)))
		r.Recorder.Eventf(kt, nil, corev1.EventTypeWarning, kafkav1alpha1.EventPartitionFailed, actionAssign,
			"partitions %v failed on every alive broker; they stay offline until a broker forgets a failure (10 minutes) or another broker joins", offline)
	}
}

// releaseDeleted moves every deleted topic that still holds the assignment finalizer on: its
// partitions are written unassigned (leader -1, epochs kept), then the finalizer is removed,
// so the data finalizer's broker acts only on a topic nothing leads. When the cluster is gone
// no broker will ever remove the data, so both finalizers go — also from a topic already
// unassigned that was waiting for its broker when the cluster went (topics and clusters
// deleted together, as docs/operations.md's uninstall does): the data stays on the volume
// under the old cluster's id (docs/topics.md).
func (r *Reconciler) releaseDeleted(ctx context.Context, s *scope) error {
	var errs []error
	for _, kt := range s.deleting {
		waiting := controllerutil.ContainsFinalizer(kt, kafkav1alpha1.FinalizerAssignment) ||
			(s.cluster == nil && controllerutil.ContainsFinalizer(kt, kafkav1alpha1.FinalizerData))
		if !waiting {
			continue
		}
		errs = append(errs, r.release(ctx, s, kt))
	}
	return errors.Join(errs...)
}

func (r *Reconciler) release(ctx context.Context, s *scope, kt *kafkav1alpha1.KafkaTopic) error {
	if s.cluster == nil {
		controllerutil.RemoveFinalizer(kt, kafkav1alpha1.FinalizerAssignment)
		controllerutil.RemoveFinalizer(kt, kafkav1alpha1.FinalizerData)
		if err := r.Update(ctx, kt); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("release kafkatopic %s of a gone cluster: %w", kt.Name, err)
		}
		log.FromContext(ctx).Info("Released a deleted topic whose cluster is gone; its data is not removed", "topic", kt.Name)
		return nil
	}
	orig := kt.DeepCopy()
	kt.Status.Partitions = unassigned(kt)
	setConditions(&kt.Status, topicFacts{Generation: kt.Generation, ClusterFound: true, Deleting: true})
	if !equality.Semantic.DeepEqual(orig.Status, kt.Status) {
		if err := r.Status().Patch(ctx, kt, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("unassign deleted kafkatopic %s: %w", kt.Name, err)
		}
	}
	controllerutil.RemoveFinalizer(kt, kafkav1alpha1.FinalizerAssignment)
	if err := r.Update(ctx, kt); err != nil {
		return fmt.Errorf("remove the assignment finalizer of kafkatopic %s: %w", kt.Name, err)
	}
	r.Recorder.Eventf(kt, nil, corev1.EventTypeNormal, kafkav1alpha1.EventUnassigned, actionUnassign,
		"All %d partitions unassigned; a broker removes the topic's data next", len(kt.Status.Partitions))
	return nil
}

// writeClusterStatus writes the cluster status fields this reconciler owns — coordinatorEpoch,
// coordinatorBrokers, topics and partitions — with one merge patch, only when they changed,
// guarded by the resourceVersion the rows were read at.
func (r *Reconciler) writeClusterStatus(ctx context.Context, s *scope) error {
	c := s.cluster
	if c == nil {
		return nil
	}
	orig := c.DeepCopy()
	c.Status.CoordinatorEpoch, c.Status.CoordinatorBrokers = nextCoordinatorEpoch(c.Status.CoordinatorEpoch, c.Status.CoordinatorBrokers, c.Status.Brokers)
	c.Status.Topics, c.Status.Partitions = int32(len(s.served)), 0
	for _, kt := range s.served {
		c.Status.Partitions += kt.Spec.Partitions
	}
	if equality.Semantic.DeepEqual(orig.Status, c.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, c, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patch assignment status of kafkacluster %s: %w", c.Name, err)
	}
	if c.Status.CoordinatorEpoch != orig.Status.CoordinatorEpoch {
		log.FromContext(ctx).Info("Bumped the coordinator epoch", "epoch", c.Status.CoordinatorEpoch,
			"registered", c.Status.CoordinatorBrokers.Registered, "alive", c.Status.CoordinatorBrokers.Alive)
	}
	return nil
}

// SetupWithManager watches the clusters' registry rows and their KafkaTopics.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kafkav1alpha1.KafkaTopic{}, topicClusterField, topicCluster); err != nil {
		return fmt.Errorf("index kafkatopics by cluster: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("assignment").
		For(&kafkav1alpha1.KafkaCluster{}, builder.WithPredicates(registryChanged())).
		Watches(&kafkav1alpha1.KafkaTopic{}, handler.EnqueueRequestsFromMapFunc(topicToCluster),
			builder.WithPredicates(topicChanged())).
		Complete(r)
}

func (r *Reconciler) random() io.Reader {
	if r.Random == nil {
		return rand.Reader
	}
	return r.Random
}
