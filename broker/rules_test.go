package broker

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestDrainedOnlyWhenTheViewGivesNoPartitionAndNoGroup(t *testing.T) {
	alive := v1alpha1.BrokerRow{ID: 3, Health: v1alpha1.BrokerAlive}
	draining := v1alpha1.BrokerRow{ID: 3, Health: v1alpha1.BrokerDraining}
	ledHere := []Topic{{Name: "t", Partitions: []Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: 3}}}}
	ledElsewhere := []Topic{{Name: "t", Partitions: []Partition{{Index: 0, Leader: 1}, {Index: 1, Leader: -1}}}}
	for _, tt := range []struct {
		name string
		s    Snapshot
		want bool
	}{
		{"alive in the registry still coordinates groups", Snapshot{Brokers: []v1alpha1.BrokerRow{alive}, Topics: ledElsewhere}, false},
		{"draining but still leading a partition", Snapshot{Brokers: []v1alpha1.BrokerRow{draining}, Topics: ledHere}, false},
		{"draining and leading nothing", Snapshot{Brokers: []v1alpha1.BrokerRow{draining}, Topics: ledElsewhere}, true},
		{"not registered and leading nothing", Snapshot{Topics: ledElsewhere}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := NewMemoryView(tt.s)
			if got := drained(v.Snapshot(), 3); got != tt.want {
				t.Fatalf("drained = %v, want %v", got, tt.want)
			}
		})
	}
}

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

func TestConfigFromFlagsAndEnvironment(t *testing.T) {
	env := map[string]string{
		"POD_NAME": "prod-broker-12", "POD_NAMESPACE": "kafka", "POD_UID": "u", "POD_IP": "10.1.2.3",
		"PADDOCK_CLUSTER": "prod", "PADDOCK_DRAIN_TIMEOUT": "90s", "PADDOCK_HEALTH_PORT": "9000",
	}
	getenv := func(k string) string { return env[k] }
	parse := func(args ...string) (Config, error) {
		var cfg Config
		var listeners, templates string
		fs, envErrs := newFlagSet(&cfg, &listeners, &templates, getenv)
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse(args); err != nil {
			return cfg, err
		}
		return cfg, parseConfig(&cfg, listeners, templates, *envErrs, getenv)
	}

	cfg, err := parse("--listeners=internal:9092:PodDNS,external:9094:PodIP", "--health-port=9644", "--cluster-domain=example.org")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Identity.ID != 12 || cfg.Cluster != "prod" || cfg.DrainTimeout != 90*time.Second || cfg.HealthPort != 9644 {
		t.Fatalf("config %+v: want id 12 from POD_NAME, cluster and drain timeout from env, flag health port", cfg)
	}
	wantListeners := []ListenerSpec{
		{Name: "internal", Port: 9092, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodDNS, Host: "prod-broker-12.prod-brokers.kafka.svc.example.org"},
		{Name: "external", Port: 9094, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.2.3"},
	}
	if !slices.Equal(cfg.Listeners, wantListeners) {
		t.Fatalf("listeners %+v, want %+v", cfg.Listeners, wantListeners)
	}
	if cfg.Identity.HolderIdentity() != "prod-broker-12_u" {
		t.Fatalf("holder %q", cfg.Identity.HolderIdentity())
	}

	for _, bad := range [][]string{
		{"--listeners=kafka:0:PodDNS"},
		{"--listeners=kafka:9092:Public"},
		{"--listeners=a:1,a:2"},
		{"--session-timeout=1500ms"},
		{"--heartbeat-interval=10s"},
		{"--max-frame-bytes=4"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	env["POD_NAME"] = "no-ordinal"
	if _, err := parse(); err == nil {
		t.Error("a pod name without an ordinal was accepted")
	}
}

// The broker takes its id by the registry's own rule (internal/registry.Ordinal), so it can
// never claim an id the registry refuses to register.
func TestBrokerIDIsTheRegistrysOrdinal(t *testing.T) {
	for _, tc := range []struct {
		pod    string
		id     int32
		wantOK bool
	}{
		{"prod-broker-0", 0, true},
		{"prod-broker-12", 12, true},
		{"prod-broker-012", 0, false},       // zero-padded: the registry ignores it
		{"other-broker-3", 0, false},        // another cluster's StatefulSet
		{"prod-broker-1-debug-7", 0, false}, // a trailing number is not enough
		{"prod-7", 0, false},
		{"prod-broker-2147483648", 0, false},
	} {
		env := map[string]string{"POD_NAME": tc.pod, "POD_NAMESPACE": "kafka"}
		var cfg Config
		var listeners, templates string
		fs, envErrs := newFlagSet(&cfg, &listeners, &templates, func(k string) string { return env[k] })
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse([]string{"--cluster=prod"}); err != nil {
			t.Fatal(err)
		}
		err := parseConfig(&cfg, listeners, templates, *envErrs, func(k string) string { return env[k] })
		if ok := err == nil; ok != tc.wantOK || (ok && cfg.Identity.ID != tc.id) {
			t.Errorf("POD_NAME=%s: id %d, err %v; want id %d accepted=%v", tc.pod, cfg.Identity.ID, err, tc.id, tc.wantOK)
		}
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

// --listeners gives an external listener's type in place of the mode, and
// --advertised-host-templates its host template, expanded with the pod identity except for
// {nodeAddress}, which only the node answers.
func TestListenerFlagsCarryTheTypeAndTheTemplate(t *testing.T) {
	env := map[string]string{"POD_NAME": "c-broker-3", "POD_NAMESPACE": "kafka", "POD_IP": "10.1.2.3", "NODE_NAME": "n7"}
	parse := func(args ...string) (Config, error) {
		var cfg Config
		var listeners, templates string
		fs, envErrs := newFlagSet(&cfg, &listeners, &templates, func(k string) string { return env[k] })
		fs.SetOutput(&strings.Builder{})
		if err := fs.Parse(append([]string{"--cluster=c"}, args...)); err != nil {
			return cfg, err
		}
		return cfg, parseConfig(&cfg, listeners, templates, *envErrs, func(k string) string { return env[k] })
	}
	cfg, err := parse("--listeners=kafka:9092:PodIP,np:9094:NodePort,lb:9095:LoadBalancer",
		"--advertised-host-templates=np={nodeAddress}.{namespace}.example.com,lb=kafka-{id}.{node}.example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := []ListenerSpec{
		{Name: "kafka", Port: 9092, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.2.3"},
		{Name: "np", Port: 9094, Type: v1alpha1.ListenerNodePort, Template: "{nodeAddress}.{namespace}.example.com", Host: "{nodeAddress}.kafka.example.com"},
		{Name: "lb", Port: 9095, Type: v1alpha1.ListenerLoadBalancer, Template: "kafka-{id}.{node}.example.com", Host: "kafka-3.n7.example.com"},
	}
	if !slices.Equal(cfg.Listeners, want) {
		t.Fatalf("listeners %+v, want %+v", cfg.Listeners, want)
	}
	if !cfg.Listeners[1].NeedsNodeAddress() || cfg.Listeners[2].NeedsNodeAddress() || !cfg.Listeners[0].Static() || cfg.Listeners[2].Static() {
		t.Error("only the {nodeAddress} listener needs the node; only the internal one is static")
	}
	for _, bad := range [][]string{
		{"--listeners=kafka:9092:NodePorts"},
		{"--advertised-host-templates=nope=x"},
		{"--advertised-host-templates=kafka"},
		{"--advertised-host-templates=kafka=a,kafka=b"},
	} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}
