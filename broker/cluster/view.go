package cluster

import (
	"maps"
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/notify"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// View is the cluster state the broker answers from: the registry rows and the topic
// assignment, as last read from the API server. Handlers read it on every request, so
// implementations must make Snapshot cheap and never call the API server from it.
type View interface {
	// Snapshot returns the current state. It is never nil and must be treated as read-only.
	Snapshot() *Snapshot
	// Updated returns a channel that is closed at the next change of the snapshot.
	Updated() <-chan struct{}
}

// Snapshot is one immutable reading of the cluster state.
type Snapshot struct {
	// Synced is true once the state was read from the API server at least once (an empty
	// snapshot before that means "not known yet", not "no brokers").
	Synced bool
	// ClusterID is the KafkaCluster's status.clusterID (empty until the operator minted it).
	ClusterID string
	// Brokers are the registry rows (KafkaCluster status.brokers), sorted by id.
	Brokers []v1alpha1.BrokerRow
	// ConfigMap is the KafkaCluster's spec.config as written (invalid entries included);
	// Config is what the brokers apply from it.
	ConfigMap map[string]string
	Config    kafkaconfig.ClusterConfig
	// Limits is the KafkaCluster's spec.limits (zero fields: the defaults; read them with
	// MaxTopics and MaxPartitions).
	Limits v1alpha1.ClusterLimits
	// Topics are the topics the cluster serves, sorted by name: its KafkaTopics that are not
	// being deleted and whose Kafka name no older KafkaTopic claims (topicname.Conflicts).
	Topics []Topic
	// Deleting are the cluster's KafkaTopics being deleted, sorted by name. They are not
	// served; one broker removes their data (topic_removal.go).
	Deleting []DeletingTopic
	// CoordinatorEpoch is status.coordinatorEpoch and CoordinatorBrokers the registered and
	// alive ids it was set for (status.coordinatorBrokers; nil until set): the group
	// coordinator's fence epoch and the coordinator rule's inputs at that epoch
	// (group_coordinator.go).
	CoordinatorEpoch   int64
	CoordinatorBrokers *v1alpha1.CoordinatorBrokers
	// SuperUsers are spec.authorization.superUsers: principals allowed everything (and a
	// mutual-TLS connection without a KafkaUser).
	SuperUsers []string
	// EveryoneACLs are spec.authorization.acls: the rules of the wildcard principal User:*,
	// which apply to every principal.
	EveryoneACLs []v1alpha1.ACLRule
	// Authorization is true when spec.authorization is set: every request is checked against
	// the KafkaUsers' ACLs (broker/authz.go). False: everyone may do everything.
	Authorization bool

	// registered and alive are the ids of Brokers and of those whose health is Alive, sorted:
	// the coordinator rule's inputs, computed once per snapshot (by normalize) rather than
	// once per group key.
	registered, alive []int32
}

// Topic is one KafkaTopic as the wire protocol sees it.
type Topic struct {
	// Name is spec.topicName, or the object's name when that is empty.
	Name string
	// ID is status.topicID (v1alpha1.KafkaUUID); zero when not minted yet.
	ID [16]byte
	// Partitions lists every partition index below the topic's partition count, sorted;
	// a partition without an assignment has Leader -1.
	Partitions []Partition
	// Object, UID and Generation identify the KafkaTopic the topic is read from (admin
	// writes name it, and wait for the generation they wrote).
	Object     string
	UID        types.UID
	Generation int64
	// ConfigMap is spec.config as written; Config the effective configuration (valid
	// topic values over the cluster's, over Apache's defaults).
	ConfigMap map[string]string
	Config    kafkaconfig.TopicConfig
}

// DeletingTopic is a KafkaTopic being deleted.
type DeletingTopic struct {
	Object string
	UID    types.UID
	// Name and ID locate its data directory (ID zero: never minted, so no data was written).
	Name string
	ID   [16]byte
	// Partitions is how many partitions it may have data for.
	Partitions int32
	// AwaitsDataRemoval is true once the assignment reconciler has unassigned it (its
	// finalizer is gone) while the data finalizer is still held: a broker's turn.
	AwaitsDataRemoval bool
}

// Partition is where one partition is served.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
}

// RegisteredIDs are the ids of Brokers, sorted: the coordinator rule's registered set. The
// caller must not change them.
func (s *Snapshot) RegisteredIDs() []int32 { return s.registered }

// AliveIDs are the ids of the Brokers whose health is Alive, sorted: the coordinator rule's
// alive set. The caller must not change them.
func (s *Snapshot) AliveIDs() []int32 { return s.alive }

// Row returns the registry row of broker id.
func (s *Snapshot) Row(id int32) (v1alpha1.BrokerRow, bool) {
	i, ok := slices.BinarySearchFunc(s.Brokers, id, func(r v1alpha1.BrokerRow, id int32) int {
		return int(r.ID) - int(id)
	})
	if !ok {
		return v1alpha1.BrokerRow{}, false
	}
	return s.Brokers[i], true
}

// Topic returns the topic called name.
func (s *Snapshot) Topic(name string) (*Topic, bool) {
	i, ok := slices.BinarySearchFunc(s.Topics, name, func(t Topic, name string) int {
		switch {
		case t.Name < name:
			return -1
		case t.Name > name:
			return 1
		}
		return 0
	})
	if !ok {
		return nil, false
	}
	return &s.Topics[i], true
}

// Deleted returns the topic being deleted whose Kafka name is name.
func (s *Snapshot) Deleted(name string) (*DeletingTopic, bool) {
	for i := range s.Deleting {
		if s.Deleting[i].Name == name {
			return &s.Deleting[i], true
		}
	}
	return nil, false
}

// TopicByID returns the topic whose id is id (never matches the zero id).
func (s *Snapshot) TopicByID(id [16]byte) (*Topic, bool) {
	if id == ([16]byte{}) {
		return nil, false
	}
	for i := range s.Topics {
		if s.Topics[i].ID == id {
			return &s.Topics[i], true
		}
	}
	return nil, false
}

// normalize sorts the snapshot's lists so the lookups above can binary search, and derives
// the id lists.
func (s *Snapshot) normalize() {
	slices.SortFunc(s.Brokers, func(a, b v1alpha1.BrokerRow) int { return int(a.ID) - int(b.ID) })
	s.registered = make([]int32, 0, len(s.Brokers))
	s.alive = make([]int32, 0, len(s.Brokers))
	for _, row := range s.Brokers {
		s.registered = append(s.registered, row.ID)
		if row.Health == v1alpha1.BrokerAlive {
			s.alive = append(s.alive, row.ID)
		}
	}
	// A KafkaTopic named like an internal topic is never served: the broker serves those
	// names itself (docs/wire.md, "Internal topics").
	s.Topics = slices.DeleteFunc(s.Topics, func(t Topic) bool { return topicname.IsInternal(t.Name) })
	slices.SortFunc(s.Topics, func(a, b Topic) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// snapshotStore is the single owner of the current snapshot: readers load it without a lock,
// writers replace it whole and wake everyone waiting in Updated.
type snapshotStore struct {
	cur     atomic.Pointer[Snapshot]
	changed notify.Notifier
}

func (st *snapshotStore) Snapshot() *Snapshot {
	if s := st.cur.Load(); s != nil {
		return s
	}
	return &Snapshot{}
}

func (st *snapshotStore) Updated() <-chan struct{} { return st.changed.Changed() }

func (st *snapshotStore) store(s *Snapshot) {
	s.normalize()
	st.cur.Store(s)
	st.changed.Notify()
}

// MemoryView is a View whose state is set by its owner: tests, and anything that already has
// the state in hand. The zero MemoryView was never set: its snapshot is empty and not Synced.
type MemoryView struct {
	snapshotStore
}

// MaxTopics and MaxPartitions are the cluster's spec.limits, or their defaults.
func (s *Snapshot) MaxTopics() int32 {
	return (&v1alpha1.KafkaClusterSpec{Limits: s.Limits}).MaxTopicsOrDefault()
}

func (s *Snapshot) MaxPartitions() int32 {
	return (&v1alpha1.KafkaClusterSpec{Limits: s.Limits}).MaxPartitionsOrDefault()
}

// Held is how many topics (served and being deleted: each is a KafkaTopic) and partitions
// the cluster holds, as spec.limits counts them.
func (s *Snapshot) Held() (topics, partitions int) {
	for _, t := range s.Topics {
		partitions += len(t.Partitions)
	}
	for _, d := range s.Deleting {
		partitions += int(d.Partitions)
	}
	return len(s.Topics) + len(s.Deleting), partitions
}

// NewMemoryView returns a view holding s (marked Synced).
func NewMemoryView(s Snapshot) *MemoryView {
	v := &MemoryView{}
	v.Set(s)
	return v
}

// Set replaces the state with s (marked Synced). s is copied; the caller may reuse it. Config
// and each topic's Config are derived from the ConfigMaps, as the informer view does.
func (v *MemoryView) Set(s Snapshot) {
	c := Snapshot{
		Synced:     true,
		ClusterID:  s.ClusterID,
		Brokers:    slices.Clone(s.Brokers),
		ConfigMap:  maps.Clone(s.ConfigMap),
		Config:     kafkaconfig.ResolveCluster(s.ConfigMap),
		Topics:     make([]Topic, len(s.Topics)),
		Deleting:   slices.Clone(s.Deleting),
		SuperUsers: slices.Clone(s.SuperUsers), EveryoneACLs: slices.Clone(s.EveryoneACLs),
		Limits: s.Limits,

		Authorization: s.Authorization,

		CoordinatorEpoch: s.CoordinatorEpoch,
	}
	if s.CoordinatorBrokers != nil {
		c.CoordinatorBrokers = s.CoordinatorBrokers.DeepCopy()
	}
	for i, t := range s.Topics {
		t.Partitions = slices.Clone(t.Partitions)
		t.ConfigMap = maps.Clone(t.ConfigMap)
		t.Config = kafkaconfig.ResolveTopic(t.ConfigMap, c.ConfigMap)
		c.Topics[i] = t
	}
	v.store(&c)
}
