package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// landsButFails performs the next Lease create or update and then reports it failed, as a
// timeout after the apiserver committed the write does.
type landsButFails struct {
	client.Client
	armed bool
}

func (c *landsButFails) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	return c.fail(obj)
}

func (c *landsButFails) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.Client.Update(ctx, obj, opts...); err != nil {
		return err
	}
	return c.fail(obj)
}

func (c *landsButFails) fail(obj client.Object) error {
	if _, isLease := obj.(*coordinationv1.Lease); isLease && c.armed {
		c.armed = false
		return errors.New("injected: context deadline exceeded after the write landed")
	}
	return nil
}

func newTestHeartbeat(t *testing.T, c client.Client, ns, uid string) *Heartbeat {
	return &Heartbeat{
		Client: c, Cluster: "c",
		Identity: Identity{ID: 0, Pod: "c-broker-0", UID: uid, Namespace: ns},
		Interval: time.Second, SessionTimeout: 6 * time.Second,
		Healthy: func() bool { return true }, Draining: func() bool { return false },
		Log: testr.New(t),
	}
}

func leaseEpoch(t *testing.T, c client.Client, ns string) int32 {
	t.Helper()
	l, err := testenv.BrokerLease(c, ns, "c", 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.LeaseTransitions, -1)
}

// A beat whose write landed but answered with an error is this incarnation's: the retry must
// not count a second incarnation.
func TestHeartbeatFirstWriteThatLandsButFailsBumpsTheEpochOnce(t *testing.T) {
	c := apiServer(t)
	ctx := testkit.Context(t)
	t.Run("the Lease's creation", func(t *testing.T) {
		ns := newNamespace(t)
		hb := newTestHeartbeat(t, &landsButFails{Client: c, armed: true}, ns, "uid-a")
		if err := hb.Beat(ctx); err == nil {
			t.Fatal("the injected failure did not happen")
		}
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if got := leaseEpoch(t, c, ns); got != 0 {
			t.Fatalf("epoch %d after the first incarnation's beats, want 0", got)
		}
	})
	t.Run("a new incarnation's first renewal", func(t *testing.T) {
		ns := newNamespace(t)
		for _, uid := range []string{"uid-a", "uid-b"} { // two earlier incarnations: epoch 1
			if err := newTestHeartbeat(t, c, ns, uid).Beat(ctx); err != nil {
				t.Fatal(err)
			}
		}
		hb := newTestHeartbeat(t, &landsButFails{Client: c, armed: true}, ns, "uid-c")
		if err := hb.Beat(ctx); err == nil {
			t.Fatal("the injected failure did not happen")
		}
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if got := leaseEpoch(t, c, ns); got != 2 {
			t.Fatalf("epoch %d, want 2: the third incarnation is counted once", got)
		}
	})
}

// A deleted Lease is re-created at no lower epoch than the Broker object shows: the epoch only
// ever grows, or the assignment could not tell two incarnations apart.
func TestHeartbeatRecreatesADeletedLeaseWithoutLoweringTheEpoch(t *testing.T) {
	c := apiServer(t)
	ctx := testkit.Context(t)
	ns := newNamespace(t)
	b := &v1alpha1.Broker{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.BrokerObjectName("c", 0), Namespace: ns}}
	if err := c.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b.Status = v1alpha1.BrokerStatus{Cluster: "c", BrokerRow: v1alpha1.BrokerRow{ID: 0, State: v1alpha1.BrokerFenced,
		Health: v1alpha1.BrokerDead, Epoch: 5}}
	if err := c.Status().Update(ctx, b); err != nil {
		t.Fatal(err)
	}
	deleteLease := func() {
		t.Helper()
		if err := c.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: v1alpha1.LeaseName("c", 0)}}); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}

	hb := newTestHeartbeat(t, c, ns, "uid-a") // a new incarnation after incarnation 5
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseEpoch(t, c, ns); got != 6 {
		t.Fatalf("epoch %d on a Lease created after the Broker showed 5, want 6", got)
	}
	deleteLease()
	if err := hb.Beat(ctx); err != nil {
		t.Fatal(err)
	}
	if got := leaseEpoch(t, c, ns); got != 6 {
		t.Fatalf("epoch %d after the same incarnation re-created its deleted Lease, want 6", got)
	}
}

func TestHeartbeatLeaseFollowsTheContract(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	healthy, draining := true, false
	hb := &Heartbeat{
		Client: c, Cluster: "c",
		Identity:       Identity{ID: 1, Pod: "c-broker-1", UID: "uid-a", Namespace: ns},
		Interval:       time.Second,
		SessionTimeout: 6 * time.Second,
		Healthy:        func() bool { return healthy },
		Draining:       func() bool { return draining },
		Log:            testr.New(t),
		Now:            func() time.Time { return clock },
	}
	announced := []v1alpha1.ListenerAddress{
		{Name: "internal", Host: "c-broker-1.c-brokers." + ns + ".svc.cluster.local", Port: 9092},
		{Name: "external", Host: "10.1.2.3", Port: 9094},
	}
	hb.Listeners = func() []v1alpha1.ListenerAddress { return announced }
	claims := []v1alpha1.PartitionClaim{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 3, Epoch: 7}}
	hb.Claims = func() []v1alpha1.PartitionClaim { return claims }
	ctx := testkit.Context(t)
	if err := hb.Beat(ctx); err != nil {
		t.Fatalf("first beat: %v", err)
	}
	l, err := testenv.BrokerLease(c, ns, "c", 1)
	if err != nil {
		t.Fatal(err)
	}
	kc := &v1alpha1.KafkaCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, kc); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name": "paddock", "app.kubernetes.io/instance": "c",
		"kafka.paddock.dev/cluster": "c", "kafka.paddock.dev/broker-id": "1",
	}
	for k, v := range wantLabels {
		if l.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, l.Labels[k], v)
		}
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != kc.UID || l.OwnerReferences[0].Kind != "KafkaCluster" ||
		ptr.Deref(l.OwnerReferences[0].Controller, false) || l.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references %+v, want the KafkaCluster, not controller, no blockOwnerDeletion", l.OwnerReferences)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-a" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 6 ||
		ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 || l.Spec.AcquireTime == nil || !l.Spec.RenewTime.Time.Equal(clock) {
		t.Errorf("spec %+v: want holder c-broker-1_uid-a, 6s, transitions 0, acquired and renewed at %s", l.Spec, clock)
	}
	if l.Annotations[v1alpha1.AnnotationHealthy] != "true" || l.Annotations[v1alpha1.AnnotationDraining] != "false" {
		t.Errorf("annotations %v", l.Annotations)
	}
	if got := v1alpha1.ParseListeners(l.Annotations[v1alpha1.AnnotationListeners]); !slices.Equal(got, announced) {
		t.Errorf("the Lease announces listeners %+v, want every listener's advertised address %+v", got, announced)
	}
	if got, want := l.Annotations[v1alpha1.AnnotationClaimed], v1alpha1.FormatClaims(claims); got != want {
		t.Errorf("the Lease announces claims %q, want %q", got, want)
	}

	t.Run("storage announcements are written while there is something to say, and removed after", func(t *testing.T) {
		failed := []v1alpha1.PartitionFailure{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 3, Epoch: 7, Failures: 1}}
		refused := []string{"soft: a soft mount fails an fsync with EIO"}
		hb.Failed = func() []v1alpha1.PartitionFailure { return failed }
		hb.MountRefused = func() []string { return refused }
		defer func() { hb.Failed, hb.MountRefused = nil, nil }()
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		if got, err := v1alpha1.ReadFailures(l.Annotations[v1alpha1.AnnotationFailed]); err != nil || !slices.Equal(got, failed) {
			t.Fatalf("failed annotation %q reads %+v, %v; want %+v", l.Annotations[v1alpha1.AnnotationFailed], got, err, failed)
		}
		if got := l.Annotations[v1alpha1.AnnotationMountRefused]; got != refused[0] {
			t.Fatalf("mount-refused annotation %q, want %q", got, refused[0])
		}
		failed, refused = nil, nil
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if _, ok := l.Annotations[v1alpha1.AnnotationFailed]; ok {
			t.Fatalf("annotations %v: the failed partitions were not removed", l.Annotations)
		}
		if _, ok := l.Annotations[v1alpha1.AnnotationMountRefused]; ok {
			t.Fatalf("annotations %v: the mount refusal was not removed", l.Annotations)
		}
	})

	t.Run("the uncleanable partitions are written while a pass fails, and removed after", func(t *testing.T) {
		bad := []v1alpha1.UncleanablePartition{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 2, Cause: v1alpha1.CauseOffsetMapTooSmall}}
		hb.Uncleanable = func() []v1alpha1.UncleanablePartition { return bad }
		defer func() { hb.Uncleanable = nil }()
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		if got, err := v1alpha1.ReadUncleanable(l.Annotations[v1alpha1.AnnotationUncleanable]); err != nil || !slices.Equal(got, bad) {
			t.Fatalf("uncleanable annotation %q reads %+v, %v; want %+v", l.Annotations[v1alpha1.AnnotationUncleanable], got, err, bad)
		}
		bad = nil
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if _, ok := l.Annotations[v1alpha1.AnnotationUncleanable]; ok {
			t.Fatalf("annotations %v: the uncleanable partitions were not removed", l.Annotations)
		}
	})

	t.Run("the group counts are written while the broker coordinates groups, and removed after", func(t *testing.T) {
		counts := []v1alpha1.GroupCount{{Protocol: "consumer", State: "Stable", Count: 2}, {Protocol: "classic", State: "Empty", Count: 1}}
		hb.Groups = func() []v1alpha1.GroupCount { return counts }
		defer func() { hb.Groups = nil }()
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		want := []v1alpha1.GroupCount{{Protocol: "classic", State: "Empty", Count: 1}, {Protocol: "consumer", State: "Stable", Count: 2}}
		if got, err := v1alpha1.ReadGroupCounts(l.Annotations[v1alpha1.AnnotationGroups]); err != nil || !slices.Equal(got, want) {
			t.Fatalf("groups annotation %q reads %+v, %v; want %+v", l.Annotations[v1alpha1.AnnotationGroups], got, err, want)
		}
		counts = nil
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if _, ok := l.Annotations[v1alpha1.AnnotationGroups]; ok {
			t.Fatalf("annotations %v: the group counts were not removed", l.Annotations)
		}
	})

	t.Run("the ongoing transactions are written while some are open, and removed after", func(t *testing.T) {
		open := int32(3)
		hb.OngoingTransactions = func() int32 { return open }
		defer func() { hb.OngoingTransactions = nil }()
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		if got, err := v1alpha1.ReadOngoingTransactions(l.Annotations[v1alpha1.AnnotationOngoingTransactions]); err != nil || got != 3 {
			t.Fatalf("ongoing-transactions annotation %q reads %d, %v; want 3", l.Annotations[v1alpha1.AnnotationOngoingTransactions], got, err)
		}
		open = 0
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if v, ok := l.Annotations[v1alpha1.AnnotationOngoingTransactions]; ok {
			t.Fatalf("annotations %v: the ongoing transactions (%q) were not removed", l.Annotations, v)
		}
	})

	t.Run("renewed on every beat, same incarnation keeps its epoch", func(t *testing.T) {
		clock = clock.Add(time.Second)
		healthy = false
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		if !l.Spec.RenewTime.Time.Equal(clock) || ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 || l.Annotations[v1alpha1.AnnotationHealthy] != "false" {
			t.Fatalf("spec %+v annotations %v", l.Spec, l.Annotations)
		}
	})

	t.Run("a conflicting write is retried", func(t *testing.T) {
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		l.Annotations["someone"] = "else" // bumps resourceVersion under the heartbeat's feet
		if err := c.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Second)
		if err := hb.Beat(ctx); err != nil {
			t.Fatalf("beat after a conflicting write: %v", err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if !l.Spec.RenewTime.Time.Equal(clock) {
			t.Fatalf("renewTime %v, want %v", l.Spec.RenewTime, clock)
		}
	})

	t.Run("a new incarnation bumps leaseTransitions and acquireTime", func(t *testing.T) {
		clock = clock.Add(time.Minute)
		next := &Heartbeat{
			Client: c, Cluster: "c",
			Identity:       Identity{ID: 1, Pod: "c-broker-1", UID: "uid-b", Namespace: ns},
			Interval:       time.Second,
			SessionTimeout: 6 * time.Second,
			Healthy:        hb.Healthy, Draining: hb.Draining, Log: hb.Log, Now: hb.Now,
		}
		if err := next.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := testenv.BrokerLease(c, ns, "c", 1)
		if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-b" || ptr.Deref(l.Spec.LeaseTransitions, -1) != 1 || !l.Spec.AcquireTime.Time.Equal(clock) {
			t.Fatalf("spec %+v: want holder uid-b, transitions 1, acquired at %s", l.Spec, clock)
		}

		// The same pod's container restarted after a crash: same holder, new process.
		clock = clock.Add(time.Minute)
		restarted := &Heartbeat{
			Client: c, Cluster: "c", Identity: next.Identity, Interval: time.Second, SessionTimeout: 6 * time.Second,
			Healthy: hb.Healthy, Draining: hb.Draining, Log: hb.Log, Now: hb.Now,
		}
		if err := restarted.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = testenv.BrokerLease(c, ns, "c", 1)
		if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-b" || ptr.Deref(l.Spec.LeaseTransitions, -1) != 2 || !l.Spec.AcquireTime.Time.Equal(clock) {
			t.Fatalf("spec %+v: a restarted container must bump the epoch to 2, acquired at %s", l.Spec, clock)
		}
		clock = clock.Add(time.Second)
		if err := restarted.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if l, _ = testenv.BrokerLease(c, ns, "c", 1); ptr.Deref(l.Spec.LeaseTransitions, -1) != 2 {
			t.Fatalf("transitions %d after a renewal; the epoch moves only with a new incarnation", ptr.Deref(l.Spec.LeaseTransitions, -1))
		}
	})
}

func TestHeartbeatRunRenewsUntilStopped(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t)
	hb := &Heartbeat{
		Client: c, Cluster: "c",
		Identity: Identity{ID: 0, Pod: "c-broker-0", UID: "u", Namespace: ns},
		Interval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second,
		Healthy: func() bool { return true }, Draining: func() bool { return false },
		Log: testr.New(t),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hb.Run(ctx); close(done) }()
	var first time.Time
	testkit.Eventually(t, "the lease to exist", func() bool {
		l, err := testenv.BrokerLease(c, ns, "c", 0)
		if err == nil {
			first = l.Spec.RenewTime.Time
		}
		return err == nil
	})
	testkit.Eventually(t, "a renewal", func() bool {
		l, err := testenv.BrokerLease(c, ns, "c", 0)
		return err == nil && l.Spec.RenewTime.After(first)
	})
	// The heartbeat's last renewal came after the one first saw, so its age is below the
	// time since then: an order, whatever the machine's load.
	if age, since := hb.Age(), time.Since(first); age < 0 || age > since {
		t.Fatalf("heartbeat age %s, want between 0 and %s (since the renewal before the last)", age, since)
	}
	cancel()
	<-done
}

// slowAnswer performs a Lease update, then lets took pass on the test's clock before it
// answers, as a loaded API server does.
type slowAnswer struct {
	client.Client
	clock *time.Time
	took  time.Duration
}

func (c *slowAnswer) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	err := c.Client.Update(ctx, obj, opts...)
	*c.clock = c.clock.Add(c.took)
	return err
}

// TestTheSelfFenceClockStartsWhenTheBeatIsSent: a renewal whose answer takes 3 s leaves the
// Lease 3 s old as soon as it returns, not fresh — the self-fence counts the session timeout
// from the write, so a broker never thinks its Lease younger than the registry does (issue 23,
// defect 5: the clock used to start when the answer returned, up to 3 s late).
func TestTheSelfFenceClockStartsWhenTheBeatIsSent(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	slow := &slowAnswer{Client: c, clock: &clock, took: 3 * time.Second}
	hb := newTestHeartbeat(t, slow, ns, "uid-a")
	hb.Now = func() time.Time { return clock }
	ctx := testkit.Context(t)
	for i := range 2 { // the Lease's creation, then a renewal (an update)
		if err := hb.Beat(ctx); err != nil {
			t.Fatalf("beat %d: %v", i+1, err)
		}
	}
	if age := hb.Age(); age != 3*time.Second {
		t.Fatalf("the Lease's age right after a renewal answered in 3s: %s, want 3s (counted from the send)", age)
	}
}
