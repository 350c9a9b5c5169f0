package cluster

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// InformerView is the production View: informers on the broker's own KafkaCluster (a field
// selector on its name) and on the KafkaTopics of its namespace. Every informer event marks
// the view dirty; one goroutine rebuilds the snapshot from the cache, so the snapshot has a
// single writer and the request path only loads a pointer.
type InformerView struct {
	snapshotStore
	cache     cache.Cache
	namespace string
	cluster   string
	log       logr.Logger
	dirty     chan struct{} // capacity 1: a pending rebuild
}

// NewInformerView prepares the informers; Start runs them.
func NewInformerView(cfg *rest.Config, scheme *runtime.Scheme, namespace, cluster string, log logr.Logger) (*InformerView, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject: map[client.Object]cache.ByObject{
			&v1alpha1.KafkaCluster{}: {Field: fields.OneTermEqualSelector("metadata.name", cluster)},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("create informer cache: %w", err)
	}
	return &InformerView{cache: c, namespace: namespace, cluster: cluster, log: log, dirty: make(chan struct{}, 1)}, nil
}

// Start runs the informers until ctx ends and returns once they have synced and the first
// snapshot is published, or with an error.
func (v *InformerView) Start(ctx context.Context) error {
	if err := markDirtyOnEvents(ctx, v.cache, []client.Object{&v1alpha1.KafkaCluster{}, &v1alpha1.KafkaTopic{}}, v.dirty); err != nil {
		return err
	}
	go func() {
		if err := v.cache.Start(ctx); err != nil {
			v.log.Error(err, "Informer cache stopped")
		}
	}()
	if !v.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("informer cache did not sync: %w", ctx.Err())
	}
	if err := v.rebuild(ctx); err != nil {
		return err
	}
	go v.rebuildLoop(ctx)
	return nil
}

func (v *InformerView) rebuildLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-v.dirty:
			if err := v.rebuild(ctx); err != nil && ctx.Err() == nil {
				v.log.Error(err, "Rebuild cluster view")
			}
		}
	}
}

func (v *InformerView) rebuild(ctx context.Context) error {
	var kcs v1alpha1.KafkaClusterList
	if err := v.cache.List(ctx, &kcs, client.InNamespace(v.namespace)); err != nil {
		return fmt.Errorf("list kafkaclusters: %w", err)
	}
	var topics v1alpha1.KafkaTopicList
	if err := v.cache.List(ctx, &topics, client.InNamespace(v.namespace)); err != nil {
		return fmt.Errorf("list kafkatopics: %w", err)
	}
	var kc *v1alpha1.KafkaCluster
	for i := range kcs.Items {
		if kcs.Items[i].Name == v.cluster {
			kc = &kcs.Items[i]
		}
	}
	v.store(snapshotFrom(v.cluster, kc, topics.Items))
	return nil
}

// snapshotFrom is the wire view of a KafkaCluster (nil when it does not exist) and the
// namespace's KafkaTopics; topics of other clusters are ignored. Of several live KafkaTopics
// claiming one Kafka name (or colliding ones) only the one topicname.Conflicts serves is
// listed — the rule the assignment reconciler applies, so both agree without talking.
func snapshotFrom(cluster string, kc *v1alpha1.KafkaCluster, topics []v1alpha1.KafkaTopic) *Snapshot {
	s := &Snapshot{Synced: true}
	if kc != nil {
		s.ClusterID = kc.Status.ClusterID
		s.Brokers = append(s.Brokers, kc.Status.Brokers...)
		s.ConfigMap = kc.Spec.Config
		s.Limits = kc.Spec.Limits
		s.CoordinatorEpoch = kc.Status.CoordinatorEpoch
		if kc.Spec.Authorization != nil {
			s.SuperUsers = kc.Spec.Authorization.SuperUsers
			s.EveryoneACLs = kc.Spec.Authorization.ACLs
			s.Authorization = true
		}
		if kc.Status.CoordinatorBrokers != nil {
			s.CoordinatorBrokers = kc.Status.CoordinatorBrokers.DeepCopy()
		}
	}
	s.Config = kafkaconfig.ResolveCluster(s.ConfigMap)
	var live []*v1alpha1.KafkaTopic
	var claims []topicname.Claim
	for i := range topics {
		kt := &topics[i]
		if kt.Spec.Cluster != cluster {
			continue
		}
		if !kt.DeletionTimestamp.IsZero() {
			s.Deleting = append(s.Deleting, deletingTopic(kt))
			continue
		}
		live = append(live, kt)
		claims = append(claims, topicname.Claim{Object: kt.Name, Name: kt.KafkaName(), Created: kt.CreationTimestamp.Time})
	}
	yields := topicname.Conflicts(claims)
	for _, kt := range live {
		if _, no := yields[kt.Name]; !no {
			s.Topics = append(s.Topics, servedTopic(kt, s.ConfigMap))
		}
	}
	return s
}

// servedTopic is the wire view of a live KafkaTopic.
func servedTopic(kt *v1alpha1.KafkaTopic, clusterConfig map[string]string) Topic {
	t := Topic{
		Name: kt.KafkaName(), ID: topicID(kt),
		Object: kt.Name, UID: kt.UID, Generation: kt.Generation,
		ConfigMap: kt.Spec.Config, Config: kafkaconfig.ResolveTopic(kt.Spec.Config, clusterConfig),
	}
	// Every partition below spec.partitions exists; those the assignment has not reached
	// yet have no leader. A status row outside [0, partitions) names no partition of the
	// topic and is ignored: the count comes from the spec alone (bounded by the CRD), never
	// from a status index, so one bad status cannot overflow or balloon the view.
	n := partitionCount(kt)
	t.Partitions = make([]Partition, n)
	for i := range t.Partitions {
		t.Partitions[i] = Partition{Index: int32(i), Leader: -1}
	}
	for _, p := range kt.Status.Partitions {
		if p.Partition >= 0 && p.Partition < n {
			t.Partitions[p.Partition] = Partition{Index: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch}
		}
	}
	return t
}

// partitionCount is spec.partitions within the CRD's bounds.
func partitionCount(kt *v1alpha1.KafkaTopic) int32 {
	return min(max(kt.Spec.Partitions, 0), v1alpha1.MaxPartitions)
}

// deletingTopic is what the data removal needs of a KafkaTopic being deleted.
func deletingTopic(kt *v1alpha1.KafkaTopic) DeletingTopic {
	d := DeletingTopic{
		Object: kt.Name, UID: kt.UID, Name: kt.KafkaName(), ID: topicID(kt),
		Partitions: partitionCount(kt),
		AwaitsDataRemoval: controllerutil.ContainsFinalizer(kt, v1alpha1.FinalizerData) &&
			!controllerutil.ContainsFinalizer(kt, v1alpha1.FinalizerAssignment),
	}
	return d
}

// topicID is kt's status.topicID; the zero id ("no id" to clients) while it is not minted or
// does not parse.
func topicID(kt *v1alpha1.KafkaTopic) [16]byte {
	id, err := v1alpha1.ParseKafkaUUID(kt.Status.TopicID)
	if err != nil {
		return [16]byte{}
	}
	return id
}
