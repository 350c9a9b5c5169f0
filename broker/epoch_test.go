package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
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
	l, err := getLease(t, c, ns, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ptr.Deref(l.Spec.LeaseTransitions, -1)
}

// A beat whose write landed but answered with an error is this incarnation's: the retry must
// not count a second incarnation.
func TestHeartbeatFirstWriteThatLandsButFailsBumpsTheEpochOnce(t *testing.T) {
	c := apiServer(t)
	ctx := testCtx(t)
	t.Run("the Lease's creation", func(t *testing.T) {
		ns := newNamespaceWithCluster(t, c, nil)
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
		ns := newNamespaceWithCluster(t, c, nil)
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
	ctx := testCtx(t)
	ns := newNamespaceWithCluster(t, c, nil)
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
