package broker

import (
	"slices"
	"sync"
	"sync/atomic"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
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
	// Topics are the cluster's KafkaTopics, sorted by name.
	Topics []Topic

	// registered and alive are the ids of Brokers and of those whose health is Alive, sorted:
	// the coordinator rule's inputs, computed once per snapshot (by normalize) rather than
	// once per group key.
	registered, alive []int32
}

// Topic is one KafkaTopic as the wire protocol sees it.
type Topic struct {
	// Name is spec.topicName, or the object's name when that is empty.
	Name string
	// ID is status.topicID decoded from base64url; zero when not minted yet.
	ID [16]byte
	// Partitions lists every partition index below the topic's partition count, sorted;
	// a partition without an assignment has Leader -1.
	Partitions []Partition
}

// Partition is where one partition is served.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
}

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
	cur atomic.Pointer[Snapshot]

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every store; guarded by mu
}

func (st *snapshotStore) Snapshot() *Snapshot {
	if s := st.cur.Load(); s != nil {
		return s
	}
	return &Snapshot{}
}

func (st *snapshotStore) Updated() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed == nil {
		st.changed = make(chan struct{})
	}
	return st.changed
}

func (st *snapshotStore) store(s *Snapshot) {
	s.normalize()
	st.cur.Store(s)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.changed != nil {
		close(st.changed)
	}
	st.changed = make(chan struct{})
}

// MemoryView is a View whose state is set by its owner: tests, and anything that already has
// the state in hand.
type MemoryView struct {
	snapshotStore
}

// NewMemoryView returns a view holding s (marked Synced).
func NewMemoryView(s Snapshot) *MemoryView {
	v := &MemoryView{}
	v.Set(s)
	return v
}

// Set replaces the state with s (marked Synced). s is copied; the caller may reuse it.
func (v *MemoryView) Set(s Snapshot) {
	c := Snapshot{
		Synced:    true,
		ClusterID: s.ClusterID,
		Brokers:   slices.Clone(s.Brokers),
		Topics:    make([]Topic, len(s.Topics)),
	}
	for i, t := range s.Topics {
		t.Partitions = slices.Clone(t.Partitions)
		c.Topics[i] = t
	}
	v.store(&c)
}
