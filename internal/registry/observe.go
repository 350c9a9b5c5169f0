package registry

import (
	"maps"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// Observation is when the operator saw a Lease's current renewTime, on the operator's own
// clock. Freshness is judged from it, never from renewTime itself, so a broker whose clock is
// off by minutes is still judged correctly — as the node-lifecycle controller judges node
// Leases (docs/registry.md, "Health, on the operator's clock").
type Observation struct {
	// RenewTime is the renewTime seen, on the broker's clock: only ever compared with the
	// next one, never with the operator's clock.
	RenewTime time.Time
	// At is when RenewTime was first seen, on the operator's clock.
	At time.Time
	// Changed is true when At is a renewal the operator saw happen, false when it is only
	// the state the operator found when it started watching (after a restart, say).
	Changed bool
}

// Observer records an Observation per Lease. The watch handler calls Observe on every Lease
// event, so a renewal is dated when it arrives even though it triggers no reconcile; the
// reconciler calls it too, for a renewal its cache shows before the handler ran. Safe for
// concurrent use.
type Observer struct {
	mu   sync.Mutex
	seen map[string]Observation // by namespace/name; guarded by mu
	// caps bound how long a renewal keeps a Lease fresh (Cap), by namespace/name; guarded by mu.
	caps map[string]time.Duration
}

// Cap makes ObserveUpdate judge the Lease namespace/name fresh for at most d after a
// renewal, whatever its leaseDurationSeconds says: the reconciler sets the cluster's session
// timeout (docs/registry.md, "What a Lease may say"), so a Lease claiming a longer duration
// cannot keep its renewals quiet past it.
func (o *Observer) Cap(namespace, name string, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.caps == nil {
		o.caps = map[string]time.Duration{}
	}
	o.caps[namespace+"/"+name] = d
}

// capOf is the Cap of the Lease key, or 0 when none was set.
func (o *Observer) capOf(key string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.caps[key]
}

// Observe records l as seen at now and returns the observation before (had is false the first
// time l is seen) and the current one. A renewTime equal to the last one changes nothing; any
// other value — later, or earlier for a new incarnation on another clock — is a renewal seen
// at now.
func (o *Observer) Observe(l *coordinationv1.Lease, now time.Time) (prev Observation, had bool, cur Observation) {
	var renewed time.Time
	if l.Spec.RenewTime != nil {
		renewed = l.Spec.RenewTime.Time
	}
	key := l.Namespace + "/" + l.Name
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.seen == nil {
		o.seen = map[string]Observation{}
	}
	prev, had = o.seen[key]
	switch {
	case !had:
		cur = Observation{RenewTime: renewed, At: now}
	case !renewed.Equal(prev.RenewTime):
		cur = Observation{RenewTime: renewed, At: now, Changed: true}
	default:
		return prev, had, prev
	}
	o.seen[key] = cur
	return prev, had, cur
}

// Forget drops the observation of the Lease namespace/name (it was deleted).
func (o *Observer) Forget(namespace, name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.seen, namespace+"/"+name)
	delete(o.caps, namespace+"/"+name)
}

// FreshFor is how long after obs a Lease whose leaseDurationSeconds is l's stays fresh; ok is
// false for a Lease without a duration or a renewTime, which is never fresh.
func FreshFor(l *coordinationv1.Lease) (d time.Duration, ok bool) {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return 0, false
	}
	return time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second, true
}

// Fresh is the expiry rule every reader of heartbeat Leases applies: a Lease whose last
// renewal the operator observed at renewedAt (an Observation's At, on the operator's clock)
// stays fresh for d after it — its leaseDurationSeconds, or the session timeout it is set
// from — and is stale from renewedAt+d on. It returns that instant and whether now is before
// it. The broker's renewTime never enters: a broker whose clock is off is judged correctly.
func Fresh(renewedAt time.Time, d time.Duration, now time.Time) (expiry time.Time, fresh bool) {
	expiry = renewedAt.Add(d)
	return expiry, expiry.After(now)
}

// Update is what one update of a Lease tells its watch, once observed (ObserveUpdate).
type Update struct {
	// RenewalOnly is true when the update changed nothing but renewTime: the same holder,
	// duration, transitions, labels and annotations.
	RenewalOnly bool
	// WasFresh is true when the renewal before this one was seen happen (not only found when
	// the operator started watching) and was still fresh at the update, by the old Lease's
	// duration: the broker was alive all along, not coming back.
	WasFresh bool
}

// ObserveUpdate records cur as Observe does, at now, and says what the update from old
// changed. The Lease watches of the registry and recovery reconcilers call it for every
// update, so a renewal is dated when it arrives even when it enqueues nothing. Freshness is
// judged with the old Lease's duration, capped by Cap.
func (o *Observer) ObserveUpdate(old, cur *coordinationv1.Lease, now time.Time) Update {
	prev, had, _ := o.Observe(cur, now)
	d, ok := FreshFor(old)
	if c := o.capOf(old.Namespace + "/" + old.Name); c > 0 {
		d = min(d, c)
	}
	_, fresh := Fresh(prev.At, d, now)
	return Update{RenewalOnly: renewalOnly(old, cur), WasFresh: had && prev.Changed && ok && fresh}
}

// renewalOnly reports whether cur differs from old in renewTime alone.
func renewalOnly(old, cur *coordinationv1.Lease) bool {
	o, n := old.Spec.DeepCopy(), cur.Spec.DeepCopy()
	o.RenewTime, n.RenewTime = nil, nil
	return equality.Semantic.DeepEqual(o, n) &&
		maps.Equal(old.Annotations, cur.Annotations) && maps.Equal(old.Labels, cur.Labels)
}
