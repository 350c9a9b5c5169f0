package registry

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestMapFunctionsFindTheCluster(t *testing.T) {
	meta := func(name string, labels map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels}
	}
	for _, tc := range []struct {
		name string
		fn   func(client.Object) string
		obj  client.Object
		want string // "" = no request
	}{
		{"a slice of the headless Service maps to its cluster", sliceCluster,
			&discoveryv1.EndpointSlice{ObjectMeta: meta("demo-brokers-x7k", map[string]string{discoveryv1.LabelServiceName: "demo-brokers"})}, "demo"},
		{"a slice of another Service maps to nothing", sliceCluster,
			&discoveryv1.EndpointSlice{ObjectMeta: meta("demo-bootstrap-1", map[string]string{discoveryv1.LabelServiceName: "demo-bootstrap"})}, ""},
		{"a slice named -brokers of no cluster maps to nothing", sliceCluster,
			&discoveryv1.EndpointSlice{ObjectMeta: meta("x", map[string]string{discoveryv1.LabelServiceName: "-brokers"})}, ""},
		{"a labelled Lease maps to its cluster", leaseCluster,
			&coordinationv1.Lease{ObjectMeta: meta("demo-broker-0", map[string]string{kafkav1alpha1.LabelCluster: "demo"})}, "demo"},
		{"a node Lease maps to nothing", leaseCluster,
			&coordinationv1.Lease{ObjectMeta: meta("node-1", nil)}, ""},
		{"the broker StatefulSet maps to its cluster", stsCluster,
			&appsv1.StatefulSet{ObjectMeta: meta("demo-broker", nil)}, "demo"},
		{"another StatefulSet maps to nothing", stsCluster,
			&appsv1.StatefulSet{ObjectMeta: meta("postgres", nil)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.fn(tc.obj); got != tc.want {
				t.Fatalf("cluster = %q, want %q", got, tc.want)
			}
		})
	}
}

func sliceCluster(o client.Object) string {
	return onlyRequest(endpointSliceToCluster(context.Background(), o))
}
func leaseCluster(o client.Object) string {
	return onlyRequest(leaseToCluster(context.Background(), o))
}
func stsCluster(o client.Object) string {
	return onlyRequest(statefulSetToCluster(context.Background(), o))
}

func onlyRequest(reqs []reconcile.Request) string {
	switch len(reqs) {
	case 0:
		return ""
	case 1:
		if reqs[0].Namespace != "ns" {
			return "wrong namespace " + reqs[0].Namespace
		}
		return reqs[0].Name
	default:
		return "several requests"
	}
}

func TestLeaseWatchSkipsOnlyRenewalsOfFreshLeasesSeenRenewed(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	lease := func(renewed time.Time, mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-broker-0", Annotations: map[string]string{kafkav1alpha1.AnnotationDraining: "false"}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("c-broker-0_u1"), LeaseDurationSeconds: ptr.To[int32](6),
				RenewTime: &metav1.MicroTime{Time: renewed}, LeaseTransitions: ptr.To[int32](1),
			},
		}
		if mutate != nil {
			mutate(l)
		}
		return l
	}
	// The broker's clock is an hour behind the operator's: only observation times count.
	brokerClock := now.Add(-time.Hour)
	for _, tc := range []struct {
		name     string
		seenAgo  time.Duration // when old's renewal was observed, before now
		seenLive bool          // old's renewal was seen happen, not found at start
		cur      func(*coordinationv1.Lease)
		want     bool // skipped
	}{
		{"a renewal of a Lease renewed 1 s ago is skipped", time.Second, true, nil, true},
		{"a renewal of a stale Lease passes: the broker is back", 7 * time.Second, true, nil, false},
		{"the first renewal seen after the operator started passes", time.Second, false, nil, false},
		{"a draining beat passes", time.Second, true, func(l *coordinationv1.Lease) { l.Annotations[kafkav1alpha1.AnnotationDraining] = "true" }, false},
		{"a new incarnation passes", time.Second, true, func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](2) }, false},
		{"a changed duration passes", time.Second, true, func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](9) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{Clock: clk}
			old := lease(brokerClock, nil)
			if tc.seenLive {
				r.leases.Observe(lease(brokerClock.Add(-time.Second), nil), now.Add(-tc.seenAgo-time.Second))
			}
			r.leases.Observe(old, now.Add(-tc.seenAgo))
			cur := lease(brokerClock.Add(time.Second), tc.cur)
			if got := r.renewalOnly(old, cur); got != tc.want {
				t.Fatalf("skipped = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRequeueAfterIsTheNextExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	if got := requeueAfter(time.Time{}, now); got != 0 {
		t.Fatalf("nothing expires: requeue %v, want none", got)
	}
	if got := requeueAfter(now.Add(4*time.Second), now); got != 4*time.Second+time.Millisecond {
		t.Fatalf("requeue %v, want just past 4s", got)
	}
}

// A failed reconcile's backoff never waits past the next Lease expiry it computed: the
// requeue a successful reconcile would ask for is dropped with its error.
func TestErrorBackoffIsCappedAtTheNextExpiry(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	l := newExpiryLimiter(workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Minute, time.Hour), clk)
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "demo"}}
	if got := l.When(req); got != time.Minute {
		t.Fatalf("no expiry recorded: backoff %v, want the base's 1m", got)
	}
	l.failedBefore(req, now.Add(3*time.Second))
	if got := l.When(req); got != 3*time.Second+time.Millisecond {
		t.Fatalf("backoff %v, want just past the expiry 3s away", got)
	}
	l.Forget(req)
	if got := l.When(req); got != time.Minute {
		t.Fatalf("after a success: backoff %v, want the base's first step again", got)
	}
	l.failedBefore(req, time.Time{})
	if got := l.When(req); got != 2*time.Minute {
		t.Fatalf("nothing expires: backoff %v, want the base's 2m", got)
	}
}
