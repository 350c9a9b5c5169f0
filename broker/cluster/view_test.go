package cluster

import (
	"encoding/base64"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestSnapshotFromKafkaObjects(t *testing.T) {
	id := [16]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	kc := &v1alpha1.KafkaCluster{Status: v1alpha1.KafkaClusterStatus{
		ClusterID: testClusterID,
		Brokers:   []v1alpha1.BrokerRow{{ID: 2}, {ID: 0}},
	}}
	topics := []v1alpha1.KafkaTopic{
		{ObjectMeta: metav1.ObjectMeta{Name: "orders-obj"},
			Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", TopicName: "Orders_V2", Partitions: 3},
			Status: v1alpha1.KafkaTopicStatus{TopicID: base64.RawURLEncoding.EncodeToString(id[:]),
				Partitions: []v1alpha1.PartitionStatus{{Partition: 0, Leader: 2, LeaderEpoch: 5}, {Partition: 1, Leader: 0}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other-cluster"}, Spec: v1alpha1.KafkaTopicSpec{Cluster: "d", Partitions: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "audit"}, Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 1},
			Status: v1alpha1.KafkaTopicStatus{TopicID: "not base64!"}},
	}
	st := &snapshotStore{}
	st.store(snapshotFrom("c", kc, topics))
	s := st.Snapshot()

	if !s.Synced || s.ClusterID != testClusterID || s.Brokers[0].ID != 0 || s.Brokers[1].ID != 2 {
		t.Fatalf("snapshot %+v", s)
	}
	var names []string
	for _, tp := range s.Topics {
		names = append(names, tp.Name)
	}
	if !slices.Equal(names, []string{"Orders_V2", "audit"}) {
		t.Fatalf("topics %v: want spec.topicName or the object name, other clusters' topics left out, sorted", names)
	}
	orders, _ := s.Topic("Orders_V2")
	want := []Partition{{0, 2, 5}, {1, 0, 0}, {2, -1, 0}}
	if orders.ID != id || !slices.Equal(orders.Partitions, want) {
		t.Fatalf("orders %+v, want id %x and partitions %v (unassigned partition has leader -1)", orders, id, want)
	}
	audit, _ := s.Topic("audit")
	if audit.ID != ([16]byte{}) {
		t.Fatalf("a malformed topicID must read as the zero id, got %x", audit.ID)
	}
	if empty := snapshotFrom("c", nil, nil); !empty.Synced || len(empty.Brokers) != 0 {
		t.Fatalf("missing cluster: %+v", empty)
	}
}

func TestSnapshotServesTheOldestClaimAndListsDeletingTopics(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Second))
	now := metav1.Now()
	topics := []v1alpha1.KafkaTopic{
		{ObjectMeta: metav1.ObjectMeta{Name: "a.b", CreationTimestamp: t0}, Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ab", CreationTimestamp: t1}, Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", TopicName: "a_b", Partitions: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "gone", DeletionTimestamp: &now, Finalizers: []string{v1alpha1.FinalizerData}},
			Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 2}, Status: v1alpha1.KafkaTopicStatus{Partitions: []v1alpha1.PartitionStatus{{Partition: 1}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{v1alpha1.FinalizerAssignment, v1alpha1.FinalizerData}},
			Spec: v1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 1}},
	}
	kc := &v1alpha1.KafkaCluster{Spec: v1alpha1.KafkaClusterSpec{Config: map[string]string{"num.partitions": "5", "log.segment.bytes": "1048576"}}}
	s := snapshotFrom("c", kc, topics)
	if len(s.Topics) != 1 || s.Topics[0].Name != "a.b" {
		t.Fatalf("served topics %+v, want only a.b (a_b collides with the older a.b; deleting topics are not served)", s.Topics)
	}
	if s.Topics[0].Config.SegmentBytes != 1048576 || s.Config.NumPartitions != 5 {
		t.Errorf("configs: topic %+v, cluster %+v; want the cluster's segment.bytes and num.partitions", s.Topics[0].Config, s.Config)
	}
	if len(s.Deleting) != 2 {
		t.Fatalf("deleting %+v, want gone and going", s.Deleting)
	}
	for _, d := range s.Deleting {
		switch d.Object {
		case "gone":
			if !d.AwaitsDataRemoval || d.Partitions != 2 {
				t.Errorf("gone %+v: unassigned (no assignment finalizer), data finalizer held: awaits removal of 2 partitions", d)
			}
		case "going":
			if d.AwaitsDataRemoval {
				t.Errorf("going %+v: still holds the assignment finalizer, so no broker may remove its data yet", d)
			}
		}
	}
}

// A KafkaTopic status row outside [0, spec.partitions) is ignored by the view: one bad status
// (2147483647 overflowed the partition count and panicked the rebuild of every broker; a large
// valid index allocated gigabytes) must not take the brokers down.
func TestSnapshotIgnoresPartitionRowsOutsideTheTopic(t *testing.T) {
	kt := v1alpha1.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{Name: "t"},
		Spec:       v1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 2},
		Status: v1alpha1.KafkaTopicStatus{Partitions: []v1alpha1.PartitionStatus{
			{Partition: 2147483647, Leader: 1}, {Partition: 50_000_000, Leader: 1}, {Partition: 2, Leader: 1},
			{Partition: -1, Leader: 1}, {Partition: 1, Leader: 0, LeaderEpoch: 3},
		}},
	}
	s := snapshotFrom("c", nil, []v1alpha1.KafkaTopic{kt})
	want := []Partition{{0, -1, 0}, {1, 0, 3}}
	if len(s.Topics) != 1 || !slices.Equal(s.Topics[0].Partitions, want) {
		t.Fatalf("topics %+v, want t with partitions %v", s.Topics, want)
	}
}

func TestSnapshotSaysWhetherSpecAuthorizationIsSet(t *testing.T) {
	kc := &v1alpha1.KafkaCluster{}
	if s := snapshotFrom("c", kc, nil); s.Authorization || s.SuperUsers != nil {
		t.Fatalf("without spec.authorization: Authorization %v, super users %v", s.Authorization, s.SuperUsers)
	}
	kc.Spec.Authorization = &v1alpha1.Authorization{Type: v1alpha1.AuthorizationSimple}
	if s := snapshotFrom("c", kc, nil); !s.Authorization {
		t.Fatal("spec.authorization without super users: Authorization false")
	}
	kc.Spec.Authorization.SuperUsers = []string{"User:admin"}
	if s := snapshotFrom("c", kc, nil); !s.Authorization || len(s.SuperUsers) != 1 {
		t.Fatalf("Authorization %v, super users %v", s.Authorization, s.SuperUsers)
	}
	if v := NewMemoryView(Snapshot{Authorization: true}); !v.Snapshot().Authorization {
		t.Fatal("MemoryView.Set dropped Authorization")
	}
	everyone := []v1alpha1.ACLRule{{Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLTopic, Name: "public-", PatternType: v1alpha1.ACLPrefix},
		Operations: []v1alpha1.ACLOperation{"Read"}}}
	kc.Spec.Authorization.ACLs = everyone
	if s := snapshotFrom("c", kc, nil); len(s.EveryoneACLs) != 1 || s.EveryoneACLs[0].Resource.Name != "public-" {
		t.Fatalf("spec.authorization.acls: the snapshot's User:* rules %+v, want %+v", s.EveryoneACLs, everyone)
	}
	if v := NewMemoryView(Snapshot{Authorization: true, EveryoneACLs: everyone}); len(v.Snapshot().EveryoneACLs) != 1 {
		t.Fatal("MemoryView.Set dropped the User:* rules")
	}
}
