package registry

import (
	"fmt"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// t0 is "now" in every case; leases last 6 s like the default session timeout.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const leaseSeconds = 6

// ep is an endpoint as the EndpointSlice controller writes it for pod c-broker-<id>.
type ep struct {
	id                          int32
	name                        string // overrides the pod name when set
	ready, serving, terminating *bool
	noTarget                    bool // only a hostname, no targetRef
	addr, node, zone            string
}

func slice(name string, eps ...ep) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: "c-brokers"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("health"), Port: ptr.To[int32](9644)},
			{Name: ptr.To("kafka"), Port: ptr.To[int32](9092)},
		},
	}
	for _, e := range eps {
		pod := e.name
		if pod == "" {
			pod = fmt.Sprintf("c-broker-%d", e.id)
		}
		addr := e.addr
		if addr == "" {
			addr = fmt.Sprintf("10.0.0.%d", e.id+1)
		}
		out := discoveryv1.Endpoint{
			Addresses:  []string{addr},
			Hostname:   ptr.To(pod),
			NodeName:   ptr.To(cmp(e.node, "node-a")),
			Zone:       ptr.To(cmp(e.zone, "zone-a")),
			Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating},
		}
		if !e.noTarget {
			out.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: pod}
		}
		s.Endpoints = append(s.Endpoints, out)
	}
	return s
}

func serving(id int32) ep { return ep{id: id, ready: ptr.To(true), serving: ptr.To(true)} }
func notServing(id int32) ep {
	return ep{id: id, ready: ptr.To(false), serving: ptr.To(false)}
}

// lease is broker id's heartbeat renewed age ago.
type lease struct {
	id               int32
	name             string // overrides c-broker-<id> when set
	age              time.Duration
	healthy          string // "" = "true"
	draining         bool
	transitions      int32
	noRenew, noAnnot bool
	listeners        string // the listeners annotation, when set
	noAddresses      bool   // the listeners annotation is set and empty
	seconds          int32  // leaseDurationSeconds; 0 = leaseSeconds
	drainingValue    string // the draining annotation's value, when set (overrides draining)
}

func (l lease) build() coordinationv1.Lease {
	out := coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: cmp(l.name, fmt.Sprintf("c-broker-%d", l.id))},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(fmt.Sprintf("c-broker-%d_uid", l.id)),
			LeaseDurationSeconds: ptr.To[int32](leaseSeconds),
			LeaseTransitions:     ptr.To(l.transitions),
		},
	}
	if !l.noRenew {
		out.Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(-l.age)}
	}
	if l.seconds != 0 {
		out.Spec.LeaseDurationSeconds = ptr.To(l.seconds)
	}
	if !l.noAnnot {
		out.Annotations = map[string]string{
			v1alpha1.AnnotationHealthy:  cmp(l.healthy, "true"),
			v1alpha1.AnnotationDraining: cmp(l.drainingValue, fmt.Sprint(l.draining)),
		}
		if l.listeners != "" || l.noAddresses {
			out.Annotations[v1alpha1.AnnotationListeners] = l.listeners
		}
	}
	return out
}

func leases(ls ...lease) []coordinationv1.Lease {
	out := make([]coordinationv1.Lease, len(ls))
	for i, l := range ls {
		out[i] = l.build()
	}
	return out
}

func fresh(ids ...int32) []lease {
	out := make([]lease, len(ids))
	for i, id := range ids {
		out[i] = lease{id: id, age: time.Second}
	}
	return out
}

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// summary is the part of a row most rules are about.
type summary struct {
	ID     int32
	State  v1alpha1.BrokerState
	Health v1alpha1.BrokerHealth
	Reason string
}

func summarize(rows []v1alpha1.BrokerRow) []summary {
	out := make([]summary, len(rows))
	for i, r := range rows {
		out[i] = summary{r.ID, r.State, r.Health, r.Reason}
	}
	return out
}

const (
	S  = v1alpha1.BrokerServing
	F  = v1alpha1.BrokerFenced
	A  = v1alpha1.BrokerAlive
	Dr = v1alpha1.BrokerDraining
	D  = v1alpha1.BrokerDead
)

func TestRegistryRules(t *testing.T) {
	for _, tc := range []struct {
		rule     string
		slices   []discoveryv1.EndpointSlice
		leases   []lease
		replicas int32
		// registered dates the Broker objects; unset, every broker registered long ago (its
		// start-up grace is over).
		registered map[int32]time.Time
		want       []summary
	}{
		{
			rule:     "every serving, heartbeating broker is Serving and Alive",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1), serving(2))},
			leases:   fresh(0, 1, 2),
			replicas: 3,
			want:     []summary{{0, S, A, ""}, {1, S, A, ""}, {2, S, A, ""}},
		},
		{
			rule: "registration is the union over the Service's sharded slices",
			slices: []discoveryv1.EndpointSlice{
				slice("s1", serving(0), serving(2)),
				slice("s2", serving(1)),
				slice("s3", serving(3)),
			},
			leases:   fresh(0, 1, 2, 3),
			replicas: 4,
			want:     []summary{{0, S, A, ""}, {1, S, A, ""}, {2, S, A, ""}, {3, S, A, ""}},
		},
		{
			rule:     "a broker missing from one slice is still registered when another slice lists it",
			slices:   []discoveryv1.EndpointSlice{slice("s1"), slice("s2", serving(5))},
			leases:   fresh(5),
			replicas: 0,
			want:     []summary{{5, S, A, ""}},
		},
		{
			rule:     "a not-ready endpoint is kept as Fenced",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), notServing(1))},
			leases:   fresh(0, 1),
			replicas: 2,
			want:     []summary{{0, S, A, ""}, {1, F, A, v1alpha1.ReasonNotServing}},
		},
		{
			rule: "serving is preferred over ready (publishNotReadyAddresses forces ready true)",
			slices: []discoveryv1.EndpointSlice{slice("s1",
				ep{id: 0, ready: ptr.To(true), serving: ptr.To(false)},
				ep{id: 1, ready: ptr.To(false), serving: ptr.To(true)},
			)},
			leases:   fresh(0, 1),
			replicas: 2,
			want:     []summary{{0, F, A, v1alpha1.ReasonNotServing}, {1, S, A, ""}},
		},
		{
			rule: "ready is the fallback when serving is unset, and unset means true",
			slices: []discoveryv1.EndpointSlice{slice("s1",
				ep{id: 0, ready: ptr.To(false)},
				ep{id: 1, ready: ptr.To(true)},
				ep{id: 2},
			)},
			leases:   fresh(0, 1, 2),
			replicas: 3,
			want:     []summary{{0, F, A, v1alpha1.ReasonNotServing}, {1, S, A, ""}, {2, S, A, ""}},
		},
		{
			rule: "a terminating endpoint is Fenced even while still serving",
			slices: []discoveryv1.EndpointSlice{slice("s1",
				ep{id: 0, ready: ptr.To(false), serving: ptr.To(true), terminating: ptr.To(true)},
			)},
			leases:   fresh(0),
			replicas: 1,
			want:     []summary{{0, F, A, v1alpha1.ReasonTerminating}},
		},
		{
			rule: "unparseable ordinals are skipped",
			slices: []discoveryv1.EndpointSlice{slice("s1",
				serving(0),
				ep{name: "c-broker-x", serving: ptr.To(true)},
				ep{name: "c-broker-", serving: ptr.To(true)},
				ep{name: "c-broker-01", serving: ptr.To(true)},
				ep{name: "c-broker-99999999999", serving: ptr.To(true)},
				ep{name: "other-broker-4", serving: ptr.To(true)},
				ep{name: "c-broker-1-debug", serving: ptr.To(true)},
			)},
			leases:   fresh(0),
			replicas: 1,
			want:     []summary{{0, S, A, ""}},
		},
		{
			rule:     "the hostname names the broker when the endpoint has no targetRef",
			slices:   []discoveryv1.EndpointSlice{slice("s1", ep{id: 0, serving: ptr.To(true), noTarget: true})},
			leases:   fresh(0),
			replicas: 1,
			want:     []summary{{0, S, A, ""}},
		},
		{
			rule:     "scale-down deregisters: an unlisted ordinal at or above replicas with a stale lease is gone",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
			leases:   append(fresh(0, 1), lease{id: 2, age: time.Minute}),
			replicas: 2,
			want:     []summary{{0, S, A, ""}, {1, S, A, ""}},
		},
		{
			rule:     "a gone StatefulSet wants nothing: unlisted, silent brokers are deregistered",
			slices:   nil,
			leases:   []lease{{id: 0, age: time.Minute}, {id: 1, age: time.Minute}},
			replicas: 0,
			want:     []summary{},
		},
		{
			rule:     "the recreate gap (ordinal below replicas, pod absent) stays registered as Fenced/PodMissing",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(2))},
			leases:   append(fresh(0, 2), lease{id: 1, age: time.Minute}),
			replicas: 3,
			want:     []summary{{0, S, A, ""}, {1, F, D, v1alpha1.ReasonPodMissing}, {2, S, A, ""}},
		},
		{
			rule:       "a wanted broker that never heartbeated is Starting, not dead, within its start-up grace",
			slices:     []discoveryv1.EndpointSlice{slice("s1", notServing(1))},
			leases:     nil,
			replicas:   2,
			registered: map[int32]time.Time{0: t0.Add(-time.Minute), 1: t0.Add(-StartupGrace + time.Second)},
			want:       []summary{{0, F, D, v1alpha1.ReasonStarting}, {1, F, D, v1alpha1.ReasonStarting}},
		},
		{
			rule:     "a wanted broker that never heartbeated is Fenced/PodMissing and Dead once its start-up grace is over",
			slices:   nil,
			leases:   nil,
			replicas: 2,
			want:     []summary{{0, F, D, v1alpha1.ReasonPodMissing}, {1, F, D, v1alpha1.ReasonPodMissing}},
		},
		{
			rule:     "a broker whose heartbeat expired is Fenced even while its endpoint still says serving",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
			leases:   []lease{{id: 0, age: time.Second}, {id: 1, age: time.Minute}},
			replicas: 2,
			want:     []summary{{0, S, A, ""}, {1, F, D, v1alpha1.ReasonHeartbeatExpired}},
		},
		{
			rule:     "a heartbeating broker no slice lists yet is registered",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   fresh(0, 1),
			replicas: 1,
			want:     []summary{{0, S, A, ""}, {1, F, A, v1alpha1.ReasonNotListed}},
		},
		{
			rule:     "draining outranks alive",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, age: time.Second, draining: true}},
			replicas: 1,
			want:     []summary{{0, S, Dr, v1alpha1.ReasonDraining}},
		},
		{
			rule:     "draining outranks unhealthy: a draining broker is handing over, not dead",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, age: time.Second, draining: true, healthy: "false"}},
			replicas: 1,
			want:     []summary{{0, S, Dr, v1alpha1.ReasonDraining}},
		},
		{
			rule:     "a stale draining lease is Dead",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, age: leaseSeconds * time.Second, draining: true}},
			replicas: 1,
			want:     []summary{{0, F, D, v1alpha1.ReasonHeartbeatExpired}},
		},
		{
			rule:     "fresh is renewTime + leaseDuration after now; at exactly the expiry it is stale",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
			leases:   []lease{{id: 0, age: leaseSeconds*time.Second - time.Millisecond}, {id: 1, age: leaseSeconds * time.Second}},
			replicas: 2,
			want:     []summary{{0, S, A, ""}, {1, F, D, v1alpha1.ReasonHeartbeatExpired}},
		},
		{
			rule:     "healthy=false is Dead",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, age: time.Second, healthy: "false"}},
			replicas: 1,
			want:     []summary{{0, F, D, v1alpha1.ReasonUnhealthy}},
		},
		{
			rule:     "a lease without annotations is healthy and not draining",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, age: time.Second, noAnnot: true}},
			replicas: 1,
			want:     []summary{{0, S, A, ""}},
		},
		{
			rule:     "a lease never renewed is Dead",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   []lease{{id: 0, noRenew: true}},
			replicas: 1,
			want:     []summary{{0, F, D, v1alpha1.ReasonHeartbeatExpired}},
		},
		{
			rule:     "a listed broker without a lease is Dead for lack of a heartbeat, and fenced",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			replicas: 1,
			want:     []summary{{0, F, D, v1alpha1.ReasonNoHeartbeat}},
		},
		{
			rule:     "a listed broker beyond replicas stays registered while its endpoint lasts",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0), ep{id: 1, ready: ptr.To(false), serving: ptr.To(false), terminating: ptr.To(true)})},
			leases:   []lease{{id: 0, age: time.Second}, {id: 1, age: time.Minute}},
			replicas: 1,
			want:     []summary{{0, S, A, ""}, {1, F, D, v1alpha1.ReasonTerminating}},
		},
		{
			rule: "an endpoint listed twice across slices is taken from the serving entry",
			slices: []discoveryv1.EndpointSlice{
				slice("a-old", notServing(0), notServing(1)),
				slice("b-new", serving(0), serving(1)),
			},
			leases:   fresh(0, 1),
			replicas: 2,
			want:     []summary{{0, S, A, ""}, {1, S, A, ""}},
		},
		{
			rule:     "a lease of another cluster's broker is ignored",
			slices:   []discoveryv1.EndpointSlice{slice("s1", serving(0))},
			leases:   append(fresh(0), lease{name: "d-broker-1", age: time.Second}),
			replicas: 1,
			want:     []summary{{0, S, A, ""}},
		},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			in := Input{Cluster: "c", Slices: tc.slices, Leases: leases(tc.leases...), Replicas: tc.replicas, PortName: "kafka", Now: t0,
				Registered: tc.registered}
			if in.Registered == nil {
				in.Registered = longAgo(tc.replicas + 10)
			}
			got := compute(in)
			if s := summarize(got.Rows); !slices.Equal(s, tc.want) {
				t.Fatalf("rows:\n got %+v\nwant %+v", s, tc.want)
			}
		})
	}
}

func TestRegistryRowsAreSortedByNumericID(t *testing.T) {
	got := compute(Input{
		Cluster: "c", Replicas: 0, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(10), serving(2)), slice("s2", serving(1))},
	})
	if ids := got.Registered(); !slices.Equal(ids, []int32{1, 2, 10}) {
		t.Fatalf("ids = %v, want [1 2 10]", ids)
	}
}

func TestRegistryNotReadyBrokerKeepsItsHostNodeRackAndPort(t *testing.T) {
	got := compute(Input{
		Cluster: "c", Replicas: 1, PortName: "kafka", Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", ep{id: 0, serving: ptr.To(false), addr: "10.1.2.3", node: "n7", zone: "eu-1b"})},
		Leases: leases(lease{id: 0, age: time.Second, transitions: 4}),
	})
	want := v1alpha1.BrokerRow{
		ID: 0, Pod: "c-broker-0", Node: "n7", Host: "10.1.2.3", Port: 9092, Rack: "eu-1b",
		Listeners: []v1alpha1.ListenerAddress{{Name: "kafka", Host: "10.1.2.3", Port: 9092}},
		State:     F, Health: A, Reason: v1alpha1.ReasonNotServing, Epoch: 4,
		LastSeen: &metav1.Time{Time: t0.Add(-time.Second)},
	}
	if len(got.Rows) != 1 || !Equal(got.Rows[0], want) {
		t.Fatalf("row:\n got %+v\nwant %+v", got.Rows, want)
	}
}

func TestRegistryPortIsTheFirstListenersOrTheSlicesFirstPort(t *testing.T) {
	for _, tc := range []struct {
		name     string
		portName string
		want     int32
	}{
		{"named like the first listener", "kafka", 9092},
		{"no port of that name: the first port", "external", 9644},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compute(Input{Cluster: "c", Replicas: 1, PortName: tc.portName, Now: t0,
				Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}})
			if got.Rows[0].Port != tc.want {
				t.Fatalf("port = %d, want %d", got.Rows[0].Port, tc.want)
			}
		})
	}
}

func TestRegistryLastSeenIsTheLeaseRenewTimeAndIsNeverRefreshedForADeadBroker(t *testing.T) {
	renewed := t0.Add(-time.Minute).Add(300 * time.Millisecond)
	l := lease{id: 0}.build()
	l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	in := Input{Cluster: "c", Replicas: 1, Now: t0, Leases: []coordinationv1.Lease{l},
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}}
	for _, now := range []time.Time{t0, t0.Add(time.Hour)} {
		in.Now = now
		row := compute(in).Rows[0]
		if row.Health != D {
			t.Fatalf("at %v: health %s, want Dead", now, row.Health)
		}
		// Whole seconds: what metav1.Time keeps on the wire.
		if want := renewed.Truncate(time.Second); row.LastSeen == nil || !row.LastSeen.Time.Equal(want) {
			t.Fatalf("at %v: lastSeen %v, want the last renewTime %v", now, row.LastSeen, want)
		}
	}
}

func TestRegistryEpochIsLeaseTransitions(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 2, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
		Leases: leases(lease{id: 0, age: time.Second, transitions: 0}, lease{id: 1, age: time.Second, transitions: 7})})
	if got.Rows[0].Epoch != 0 || got.Rows[1].Epoch != 7 {
		t.Fatalf("epochs = %d, %d; want 0, 7", got.Rows[0].Epoch, got.Rows[1].Epoch)
	}
}

func TestRegistryAliveSetAndCounts(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 5, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), notServing(1), serving(2), serving(3))},
		Leases: leases(
			lease{id: 0, age: time.Second},
			lease{id: 1, age: time.Second}, // booting: fenced, yet alive (readiness never gates the alive set)
			lease{id: 2, age: time.Second, draining: true},
			lease{id: 3, age: time.Minute},
		)})
	if !slices.Equal(got.Alive, []int32{0, 1}) {
		t.Fatalf("alive = %v, want [0 1]", got.Alive)
	}
	// Broker 3's endpoint serves, but its heartbeat expired: fenced.
	want := v1alpha1.BrokerCounts{Registered: 5, Serving: 2, Fenced: 3, Alive: 2, Draining: 1, Dead: 2}
	if got.Counts != want {
		t.Fatalf("counts = %+v, want %+v", got.Counts, want)
	}
}

func TestRegistryEmptyAliveSetIsReportedAsSuch(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 2, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0), serving(1))},
		Leases: leases(lease{id: 0, age: time.Minute}, lease{id: 1, age: time.Second, draining: true})})
	if got.Alive == nil || len(got.Alive) != 0 || got.Counts.Alive != 0 {
		t.Fatalf("alive = %#v (count %d), want an empty, non-nil set", got.Alive, got.Counts.Alive)
	}
	if len(got.Rows) != 2 {
		t.Fatalf("rows = %d, want both brokers still registered", len(got.Rows))
	}
}

func TestRegistryNextExpiryIsTheEarliestFreshLeaseExpiry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		leases []lease
		want   time.Time
	}{
		{"earliest of the fresh leases", []lease{{id: 0, age: time.Second}, {id: 1, age: 4 * time.Second}, {id: 2, age: time.Minute}},
			t0.Add(2 * time.Second)},
		{"an unlisted heartbeating broker's expiry counts: it deregisters then", []lease{{id: 0, age: time.Second}, {id: 9, age: 5 * time.Second}},
			t0.Add(time.Second)},
		{"no fresh lease: nothing will expire", []lease{{id: 0, age: time.Minute}}, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := compute(Input{Cluster: "c", Replicas: 3, Now: t0, Leases: leases(tc.leases...), Registered: longAgo(10)})
			if !got.NextExpiry.Equal(tc.want) {
				t.Fatalf("next expiry = %v, want %v", got.NextExpiry, tc.want)
			}
		})
	}
}

func TestRegistryUnlistedHeartbeatingBrokerBeyondReplicasDeregistersWhenItsLeaseExpires(t *testing.T) {
	in := Input{Cluster: "c", Replicas: 1, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))},
		Leases: leases(lease{id: 0, age: time.Second}, lease{id: 1, age: time.Second})}
	before := compute(in)
	if !slices.Equal(before.Registered(), []int32{0, 1}) {
		t.Fatalf("before expiry: registered %v, want [0 1]", before.Registered())
	}
	in.Now = before.NextExpiry
	in.Leases = leases(lease{id: 0, age: 0}, lease{id: 1, age: leaseSeconds * time.Second})
	if after := compute(in); !slices.Equal(after.Registered(), []int32{0}) {
		t.Fatalf("after expiry: registered %v, want [0]", after.Registered())
	}
}

func TestOrdinal(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   int32
		ok   bool
	}{
		{"c-broker-0", 0, true},
		{"c-broker-12", 12, true},
		{"c-broker-2147483647", 2147483647, true},
		{"c-broker-2147483648", 0, false},
		{"c-broker-007", 0, false},
		{"c-broker--1", 0, false},
		{"c-broker-", 0, false},
		{"c-broker-1a", 0, false},
		{"d-broker-1", 0, false},
		{"c-1", 0, false},
	} {
		id, ok := Ordinal("c", tc.name)
		if id != tc.id || ok != tc.ok {
			t.Errorf("Ordinal(%q) = %d, %v; want %d, %v", tc.name, id, ok, tc.id, tc.ok)
		}
	}
}

func TestRegistryReasonsExplainBothFencingAndHealth(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 2, Now: t0,
		Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))},
		Leases: leases(lease{id: 0, age: time.Second, healthy: "false"}, lease{id: 1, age: time.Minute})})
	want := []Reasons{
		{State: v1alpha1.ReasonUnhealthy, Health: v1alpha1.ReasonUnhealthy},
		{State: v1alpha1.ReasonPodMissing, Health: v1alpha1.ReasonHeartbeatExpired},
	}
	if !slices.Equal(got.Reasons, want) {
		t.Fatalf("reasons = %+v, want %+v", got.Reasons, want)
	}
	// The row's single reason: why it is Fenced first, else why it is not Alive. A serving
	// endpoint whose broker says it is unhealthy is fenced for that.
	if got.Rows[0].Reason != v1alpha1.ReasonUnhealthy || got.Rows[1].Reason != v1alpha1.ReasonPodMissing {
		t.Fatalf("row reasons = %q, %q", got.Rows[0].Reason, got.Rows[1].Reason)
	}
}

func TestRegistryRowsCarryEveryListenerTheBrokerAnnounces(t *testing.T) {
	announced := "internal=c-broker-0.c-brokers.kafka.svc.cluster.local:9092,external=10.0.0.1:9094"
	for _, tc := range []struct {
		rule   string
		slices []discoveryv1.EndpointSlice
		lease  *lease
		want   []v1alpha1.ListenerAddress
	}{
		{"the Lease's listeners annotation gives every listener's advertised host and port",
			[]discoveryv1.EndpointSlice{slice("s1", serving(0))}, &lease{id: 0, age: time.Second, listeners: announced},
			[]v1alpha1.ListenerAddress{
				{Name: "internal", Host: "c-broker-0.c-brokers.kafka.svc.cluster.local", Port: 9092},
				{Name: "external", Host: "10.0.0.1", Port: 9094},
			}},
		{"a heartbeating broker no slice lists yet is reachable at what it announces",
			nil, &lease{id: 0, age: time.Second, listeners: announced},
			[]v1alpha1.ListenerAddress{
				{Name: "internal", Host: "c-broker-0.c-brokers.kafka.svc.cluster.local", Port: 9092},
				{Name: "external", Host: "10.0.0.1", Port: 9094},
			}},
		{"a Lease that announces nothing (an older broker): the first listener at the endpoint's address",
			[]discoveryv1.EndpointSlice{slice("s1", serving(0))}, &lease{id: 0, age: time.Second},
			[]v1alpha1.ListenerAddress{{Name: "kafka", Host: "10.0.0.1", Port: 9092}}},
		{"no announcement and no endpoint: no address",
			nil, &lease{id: 0, age: time.Second}, nil},
		{"an empty announcement (no listener has an address yet) is no address, not the endpoint's",
			[]discoveryv1.EndpointSlice{slice("s1", serving(0))}, &lease{id: 0, age: time.Second, noAddresses: true}, nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			in := Input{Cluster: "c", Replicas: 1, PortName: "kafka", ListenerNames: []string{"kafka", "internal", "external"},
				Now: t0, Slices: tc.slices, Leases: leases(*tc.lease)}
			got := compute(in).Rows
			if len(got) != 1 || !slices.Equal(got[0].Listeners, tc.want) {
				t.Fatalf("listeners %+v, want %+v", got, tc.want)
			}
		})
	}
}

// compute is Compute with every Lease's renewal observed at its renewTime, as if the broker's
// clock and the operator's agreed — what most rules assume. The clock-skew rules pass their
// own observations.
func compute(in Input) Result {
	if in.Observed == nil {
		in.Observed = map[string]Observation{}
		for _, l := range in.Leases {
			if l.Spec.RenewTime != nil {
				in.Observed[l.Name] = Observation{RenewTime: l.Spec.RenewTime.Time, At: l.Spec.RenewTime.Time, Changed: true}
			}
		}
	}
	return Compute(in)
}

// longAgo registers brokers 0..n-1 long before t0: their start-up grace is over.
func longAgo(n int32) map[int32]time.Time {
	m := make(map[int32]time.Time, n)
	for id := range n {
		m[id] = t0.Add(-time.Hour)
	}
	return m
}

func TestRegistryNextExpiryCoversTheEndOfAStartupGrace(t *testing.T) {
	got := compute(Input{Cluster: "c", Replicas: 1, Now: t0, Registered: map[int32]time.Time{0: t0.Add(-time.Minute)}})
	if want := t0.Add(-time.Minute + StartupGrace); !got.NextExpiry.Equal(want) {
		t.Fatalf("next expiry %v, want the grace's end %v: the broker turns Dead then without any object changing", got.NextExpiry, want)
	}
}

// Freshness is judged on the operator's clock: when it observed each renewal, never the
// broker's renewTime (docs/registry.md, "Health, on the operator's clock").
func TestRegistryFreshnessIsJudgedOnTheOperatorsClock(t *testing.T) {
	behind := lease{id: 0, age: 10 * time.Second} // renewTime 10 s behind the operator's clock
	ahead := lease{id: 0, age: -time.Hour}        // a clock an hour ahead
	expiredRow := v1alpha1.BrokerRow{ID: 0, State: F, Health: D, Reason: v1alpha1.ReasonHeartbeatExpired,
		LastSeen: &metav1.Time{Time: t0.Add(-time.Hour)}}
	aliveRow := v1alpha1.BrokerRow{ID: 0, State: S, Health: A, LastSeen: &metav1.Time{Time: t0.Add(-time.Minute)}}
	for _, tc := range []struct {
		rule     string
		lease    lease
		obs      Observation
		written  []v1alpha1.BrokerRow
		want     summary
		wantSeen time.Time
	}{
		{"a broker whose clock is 10 s behind is Alive while its renewals keep being observed",
			behind, Observation{At: t0.Add(-time.Second), Changed: true}, nil, summary{0, S, A, ""}, t0.Add(-time.Second)},
		{"a clock an hour ahead does not keep a silent broker alive",
			ahead, Observation{At: t0.Add(-leaseSeconds * time.Second), Changed: true}, nil,
			summary{0, F, D, v1alpha1.ReasonHeartbeatExpired}, t0.Add(-leaseSeconds * time.Second)},
		{"a Lease first found after an operator restart counts as observed then",
			lease{id: 0, age: time.Hour}, Observation{At: t0.Add(-time.Second)}, []v1alpha1.BrokerRow{aliveRow},
			summary{0, S, A, ""}, t0.Add(-time.Second)},
		{"a restart does not revive a broker whose written row had expired, and its lastSeen is kept",
			lease{id: 0, age: time.Hour}, Observation{At: t0.Add(-time.Second)}, []v1alpha1.BrokerRow{expiredRow},
			summary{0, F, D, v1alpha1.ReasonHeartbeatExpired}, t0.Add(-time.Hour)},
		{"a renewal observed after the restart brings it back",
			lease{id: 0, age: time.Hour}, Observation{At: t0.Add(-time.Second), Changed: true}, []v1alpha1.BrokerRow{expiredRow},
			summary{0, S, A, ""}, t0.Add(-time.Second)},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			in := Input{Cluster: "c", Replicas: 1, PortName: "kafka", Now: t0, Registered: longAgo(1),
				Slices: []discoveryv1.EndpointSlice{slice("s1", serving(0))}, Leases: leases(tc.lease),
				Observed: map[string]Observation{"c-broker-0": tc.obs}, Written: tc.written}
			got := Compute(in)
			if s := summarize(got.Rows); len(s) != 1 || s[0] != tc.want {
				t.Fatalf("row %+v, want %+v", s, tc.want)
			}
			if seen := got.Rows[0].LastSeen; seen == nil || !seen.Time.Equal(tc.wantSeen.Truncate(time.Second)) {
				t.Fatalf("lastSeen %v, want %v (operator clock, whole seconds)", seen, tc.wantSeen)
			}
		})
	}
}

func TestObserverDatesEachChangeOfRenewTimeOnTheOperatorsClock(t *testing.T) {
	var o Observer
	l := lease{id: 0, age: time.Hour}.build() // the broker's clock says an hour ago
	l.Namespace = "ns"
	_, had, first := o.Observe(&l, t0)
	if had || first.Changed || !first.At.Equal(t0) {
		t.Fatalf("first sight %+v (had %v), want observed at t0, not a change", first, had)
	}
	if _, _, again := o.Observe(&l, t0.Add(5*time.Second)); again != first {
		t.Fatalf("the same renewTime seen again moved the observation: %+v", again)
	}
	l.Spec.RenewTime.Time = l.Spec.RenewTime.Add(-time.Minute) // a new incarnation on a slower clock
	if prev, _, cur := o.Observe(&l, t0.Add(6*time.Second)); prev != first || !cur.Changed || !cur.At.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("a changed renewTime: %+v, want a change observed at t0+6s", cur)
	}
	o.Forget("ns", l.Name)
	if _, had, _ := o.Observe(&l, t0); had {
		t.Fatal("a forgotten Lease is still known")
	}
}

func TestWantedReplicas(t *testing.T) {
	for _, tc := range []struct {
		rule            string
		sts             *int32
		exists          bool
		cluster, wanted int32
	}{
		{"the StatefulSet's replicas", ptr.To[int32](3), true, 3, 3},
		{"a StatefulSet scaled by hand to 100000 wants no more than the cluster asks for", ptr.To[int32](100000), true, 3, 3},
		{"a scale-down the StatefulSet already has", ptr.To[int32](2), true, 3, 2},
		{"a scale-down the StatefulSet does not have yet", ptr.To[int32](3), true, 2, 2},
		{"unset replicas are the API default, 1", nil, true, 3, 1},
		{"a gone StatefulSet wants nothing", nil, false, 3, 0},
	} {
		if got := WantedReplicas(tc.sts, tc.exists, tc.cluster); got != tc.wanted {
			t.Errorf("%s: %d, want %d", tc.rule, got, tc.wanted)
		}
	}
}
