package registry

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// The expiry rule: fresh while the observed renewal is younger than the duration, stale from
// the instant renewal+duration on.
func TestALeaseIsFreshUntilItsDurationAfterTheObservedRenewal(t *testing.T) {
	const d = 6 * time.Second
	for _, tc := range []struct {
		rule      string
		renewedAt time.Time
		wantFresh bool
	}{
		{"renewed just now: fresh", t0, true},
		{"renewed a nanosecond short of the duration ago: fresh", t0.Add(-d + time.Nanosecond), true},
		{"renewed exactly the duration ago: stale from that instant on", t0.Add(-d), false},
		{"renewed long ago: stale", t0.Add(-time.Hour), false},
		{"observed in the future (a clock stepped back): fresh, until its own expiry", t0.Add(time.Second), true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			expiry, fresh := Fresh(tc.renewedAt, d, t0)
			if fresh != tc.wantFresh || !expiry.Equal(tc.renewedAt.Add(d)) {
				t.Fatalf("Fresh = %v, %v; want %v, %v", expiry, fresh, tc.renewedAt.Add(d), tc.wantFresh)
			}
		})
	}
}

// What a Lease update tells a watch: whether it changed anything but renewTime, and whether
// the broker was beating all along (its previous renewal seen live and still fresh).
func TestALeaseUpdateIsARenewalOnlyWhenNothingButRenewTimeChanged(t *testing.T) {
	brokerClock := t0.Add(-time.Hour) // the broker's clock is irrelevant: only observations count
	build := func(renewed time.Time, mutate func(*coordinationv1.Lease)) *coordinationv1.Lease {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c-broker-0",
				Labels: map[string]string{v1alpha1.LabelCluster: "c"}, Annotations: map[string]string{v1alpha1.AnnotationDraining: "false"}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("c-broker-0_u1"), LeaseDurationSeconds: ptr.To[int32](leaseSeconds),
				RenewTime: &metav1.MicroTime{Time: renewed}, LeaseTransitions: ptr.To[int32](1),
			},
		}
		if mutate != nil {
			mutate(l)
		}
		return l
	}
	for _, tc := range []struct {
		rule      string
		seenAgo   time.Duration // when old's renewal was observed, before t0
		seenLive  bool          // old's renewal was seen happen, not found at start
		oldHasDur bool
		cur       func(*coordinationv1.Lease)
		want      Update
	}{
		{"a beat 1 s after a live one: a renewal of a fresh Lease", time.Second, true, true, nil, Update{RenewalOnly: true, WasFresh: true}},
		{"a beat after the duration passed: the broker is back", leaseSeconds * time.Second, true, true, nil, Update{RenewalOnly: true}},
		{"the first beat seen after the operator started: not known fresh", time.Second, false, true, nil, Update{RenewalOnly: true}},
		{"a Lease without a duration was never fresh", time.Second, true, false, nil, Update{RenewalOnly: true}},
		{"a draining beat changes an annotation", time.Second, true, true, func(l *coordinationv1.Lease) { l.Annotations[v1alpha1.AnnotationDraining] = "true" }, Update{WasFresh: true}},
		{"a new incarnation changes the transitions", time.Second, true, true, func(l *coordinationv1.Lease) { l.Spec.LeaseTransitions = ptr.To[int32](2) }, Update{WasFresh: true}},
		{"a new holder", time.Second, true, true, func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("c-broker-0_u2") }, Update{WasFresh: true}},
		{"a changed duration", time.Second, true, true, func(l *coordinationv1.Lease) { l.Spec.LeaseDurationSeconds = ptr.To[int32](9) }, Update{WasFresh: true}},
		{"a changed label", time.Second, true, true, func(l *coordinationv1.Lease) { l.Labels["x"] = "y" }, Update{WasFresh: true}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var o Observer
			old := build(brokerClock, nil)
			if !tc.oldHasDur {
				old.Spec.LeaseDurationSeconds = nil
			}
			if tc.seenLive {
				o.Observe(build(brokerClock.Add(-time.Second), nil), t0.Add(-tc.seenAgo-time.Second))
			}
			o.Observe(old, t0.Add(-tc.seenAgo))
			cur := build(brokerClock.Add(time.Second), tc.cur)
			if !tc.oldHasDur {
				cur.Spec.LeaseDurationSeconds = nil
			}
			if got := o.ObserveUpdate(old, cur, t0); got != tc.want {
				t.Fatalf("update %+v, want %+v", got, tc.want)
			}
			if _, _, obs := o.Observe(cur, t0.Add(time.Minute)); !obs.At.Equal(t0) || !obs.Changed {
				t.Fatalf("the update was not dated at t0 as a renewal: %+v", obs)
			}
		})
	}
}
