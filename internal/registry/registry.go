package registry

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// StartupGrace is how long a registered broker that has never heartbeated is reported as
// Starting rather than Dead: it covers scheduling, image pull and the start of the process, as
// the broker StatefulSet's startup probe allows five minutes for a broker to come up.
const StartupGrace = 5 * time.Minute

// Input is everything one recompute of a cluster's registry looks at.
type Input struct {
	// Cluster is the KafkaCluster's name. Broker pods and heartbeat Leases are named
	// <Cluster>-broker-<id>; names of any other shape are not brokers.
	Cluster string
	// Slices are the EndpointSlices of the cluster's headless Service, in any order. A Service
	// may be sharded over several slices; their union is the registration source.
	Slices []discoveryv1.EndpointSlice
	// Leases are the cluster's heartbeat Leases, in any order.
	Leases []coordinationv1.Lease
	// Observed is when the operator saw each Lease's current renewTime, by Lease name (see
	// Observer). A Lease without an entry counts as first seen at Now.
	Observed map[string]Observation
	// Written is the registry as last written (the cluster's status.brokers), in any order.
	// A Lease the operator has only found, not seen renewed (after an operator restart),
	// does not revive a broker whose written row says its heartbeat had expired; and a dead
	// broker keeps the lastSeen written for it.
	Written []v1alpha1.BrokerRow
	// Registered is when each registered broker's Broker object was created; a broker without
	// one is being registered at Now. It dates the start-up grace of a broker that has never
	// heartbeated.
	Registered map[int32]time.Time
	// Replicas is how many brokers the StatefulSet wants: it still wants every ordinal below
	// it. WantedReplicas computes it; 0 when the StatefulSet does not exist.
	Replicas int32
	// PortName is the name of the cluster's first listener; a row's port is the slice port
	// of that name, or the slice's first port when none has it. A broker whose Lease
	// announces no listeners is advertised on this one, at its endpoint's address.
	PortName string
	// ListenerNames are the names of the cluster's listeners (spec.listeners): a Lease that
	// announces an address on any other is not believed (Refused). Empty: PortName alone.
	ListenerNames []string
	// SessionTimeout is the cluster's spec.heartbeat.sessionTimeout. A Lease never stays
	// fresh longer than that after a renewal, whatever its leaseDurationSeconds says (a
	// longer one is Refused and capped). Zero leaves every Lease's own duration.
	SessionTimeout time.Duration
	// Pods are the cluster's broker pods as the cache shows them, in any order, when
	// PodsListed: a fresh Lease whose holder's pod is observed replaced (another uid), or whose
	// broker container is observed exited since the Lease was acquired, is Dead at once
	// (SeenDead). Without
	// PodsListed no death is judged from pods.
	Pods       []corev1.Pod
	PodsListed bool
	// Now is the time freshness is judged at, on the operator's clock.
	Now time.Time
}

// Result is the registry as of Input.Now.
type Result struct {
	// Rows has one row per registered broker, sorted by id.
	Rows []v1alpha1.BrokerRow
	// Reasons explains Rows, index for index. A row's own reason is only one of the two.
	Reasons []Reasons
	// Counts sums Rows.
	Counts v1alpha1.BrokerCounts
	// Groups sums the rows' group counts (v1alpha1.SumGroupCounts); Counts.Groups is their
	// total. Counts.OngoingTransactions sums the rows' (v1alpha1.SumOngoingTransactions).
	Groups []v1alpha1.GroupCount
	// Alive is the ids whose health is Alive, sorted. It may be empty: the caller must then
	// keep the current assignment (docs/assignment.md, "The rules", rule 1).
	Alive []int32
	// NextExpiry is the earliest time the registry will change without any object changing:
	// a fresh Lease going stale, or a starting broker's grace running out. Zero when nothing
	// will.
	NextExpiry time.Time
	// Refused lists what the brokers' Leases said and the rules did not believe, in broker id
	// order (docs/registry.md, "What a Lease may say"). The rows already reflect each refusal.
	Refused []Refusal
}

// Refusal is one thing a broker's Lease says that the registry does not believe, and what it
// believes instead.
type Refusal struct {
	// Broker is the broker id, Lease the Lease's name.
	Broker int32
	Lease  string
	// Problem says what is wrong and what is used instead, in a sentence.
	Problem string
}

// Reasons says why a registered broker is Fenced and why it is not Alive; each is empty when
// the broker is Serving or Alive, and is one of the registry row reasons of api/v1alpha1.
type Reasons struct {
	State, Health string
}

// Heartbeating reports whether the broker's Lease is fresh: it is Alive, Draining, or Dead only
// because it says it is unhealthy. Such a broker's lastSeen moves with every beat.
func (r Reasons) Heartbeating() bool {
	switch r.Health {
	case v1alpha1.ReasonHeartbeatExpired, v1alpha1.ReasonNoHeartbeat, v1alpha1.ReasonStarting,
		v1alpha1.ReasonPodGone, v1alpha1.ReasonProcessExited:
		return false
	}
	return true
}

// Registered is the ids of every registered broker (the coordinator divisor), sorted.
func (r Result) Registered() []int32 {
	ids := make([]int32, len(r.Rows))
	for i, row := range r.Rows {
		ids[i] = row.ID
	}
	return ids
}

// WantedReplicas is how many brokers the registry keeps registered while their pods are
// absent: the StatefulSet's spec.replicas (nil: the API default, 1), or 0 when it does not
// exist or is being deleted — but never more than the cluster's spec.replicas, which the
// operator reverts the StatefulSet to. So `kubectl scale sts --replicas=100000` cannot make
// the registry write a hundred thousand rows before the operator puts it back.
func WantedReplicas(stsReplicas *int32, stsExists bool, clusterReplicas int32) int32 {
	if !stsExists {
		return 0
	}
	want := int32(1)
	if stsReplicas != nil {
		want = *stsReplicas
	}
	return max(min(want, clusterReplicas), 0)
}

// endpoint is what the slices say about one broker.
type endpoint struct {
	pod, node, host, rack string
	port                  int32
	// listenerPort is the slice port named like the first listener; 0 when none is.
	listenerPort         int32
	serving, terminating bool
	slice                string // for a deterministic choice between duplicates
}

// heartbeat is what a Lease says about one broker as of now.
type heartbeat struct {
	fresh, healthy, draining bool
	// seen is lastSeen: when the last renewal was observed (operator clock), or the written
	// lastSeen of a broker whose Lease was only found, not seen renewed.
	seen      *metav1.Time
	expiry    time.Time
	epoch     int64
	listeners []v1alpha1.ListenerAddress // as the Lease announces them
	// failures and mountRefused are what the Lease says of the broker's storage.
	failures     []v1alpha1.PartitionFailure
	mountRefused string
	// uncleanable is what the Lease says of the compacted partitions its cleaner cannot clean.
	uncleanable []v1alpha1.UncleanablePartition
	// groups is what the Lease says of the consumer groups the broker coordinates.
	groups []v1alpha1.GroupCount
	// ongoingTransactions is what the Lease says of the transactions its coordinator holds
	// open.
	ongoingTransactions int32
	// seenDead is why the process holding the Lease is observed gone (SeenDead), or "".
	seenDead string
}

// Compute applies the registry rules (docs/registry.md) to in. It does not modify in.
func Compute(in Input) Result {
	listed := listedEndpoints(in)
	beats, refused := heartbeats(in)

	ids := make([]int32, 0, max(len(listed), int(in.Replicas))+len(beats)/8)
	for id := range listed {
		ids = append(ids, id)
	}
	for id := int32(0); id < in.Replicas; id++ {
		if _, ok := listed[id]; !ok {
			ids = append(ids, id) // the recreate gap: still wanted, so still registered
		}
	}
	for id, hb := range beats {
		_, isListed := listed[id]
		if hb.fresh && !isListed && id >= in.Replicas {
			ids = append(ids, id) // heartbeating but unlisted: never drop a live broker
		}
	}
	slices.Sort(ids)

	res := Result{
		Rows:    make([]v1alpha1.BrokerRow, 0, len(ids)),
		Reasons: make([]Reasons, 0, len(ids)),
		Alive:   []int32{},
		Refused: refused,
	}
	soonest := func(t time.Time) {
		if res.NextExpiry.IsZero() || t.Before(res.NextExpiry) {
			res.NextExpiry = t
		}
	}
	for _, id := range ids {
		ep, isListed := listed[id]
		hb, hasLease := beats[id]
		graceEnd := registeredAt(in, id).Add(StartupGrace)
		starting := !hasLease && in.Now.Before(graceEnd)
		row, why := makeRow(in, id, ep, isListed, hb, hasLease, starting)
		res.Rows = append(res.Rows, row)
		res.Reasons = append(res.Reasons, why)
		count(&res.Counts, row)
		if row.Health == v1alpha1.BrokerAlive {
			res.Alive = append(res.Alive, id)
		}
		if starting {
			soonest(graceEnd)
		}
	}
	for _, hb := range beats {
		if hb.fresh {
			soonest(hb.expiry)
		}
	}
	perBroker := make([][]v1alpha1.GroupCount, len(res.Rows))
	for i := range res.Rows {
		perBroker[i] = res.Rows[i].Groups
	}
	res.Groups, res.Counts.Groups = v1alpha1.SumGroupCounts(perBroker...)
	transactions := make([]int32, len(res.Rows))
	for i := range res.Rows {
		transactions[i] = res.Rows[i].OngoingTransactions
	}
	res.Counts.OngoingTransactions = v1alpha1.SumOngoingTransactions(transactions...)
	return res
}

// listedEndpoints is the union of every slice's brokers. A broker listed twice (slices are
// briefly inconsistent while the EndpointSlice controller rebalances them) is taken from the
// entry that serves, so a stale duplicate cannot fence it.
func listedEndpoints(in Input) map[int32]endpoint {
	n := 0
	for i := range in.Slices {
		n += len(in.Slices[i].Endpoints)
	}
	listed := make(map[int32]endpoint, n)
	prefix := podPrefix(in.Cluster)
	for i := range in.Slices {
		s := &in.Slices[i]
		port, listenerPort := slicePort(s.Ports, in.PortName)
		for j := range s.Endpoints {
			e := &s.Endpoints[j]
			name := endpointName(e)
			id, ok := ordinal(prefix, name)
			if !ok {
				continue
			}
			cand := endpoint{
				pod:          name,
				node:         deref(e.NodeName, ""),
				rack:         deref(e.Zone, ""),
				port:         port,
				listenerPort: listenerPort,
				serving:      isServing(e.Conditions),
				terminating:  deref(e.Conditions.Terminating, false),
				slice:        s.Name,
			}
			if len(e.Addresses) > 0 {
				cand.host = e.Addresses[0]
			}
			if old, dup := listed[id]; !dup || better(cand, old) {
				listed[id] = cand
			}
		}
	}
	return listed
}

// better reports whether a should win over b when both list the same broker: serving first,
// then not terminating, then the lower slice name (so the choice does not depend on list order).
func better(a, b endpoint) bool {
	if a.serving != b.serving {
		return a.serving
	}
	if a.terminating != b.terminating {
		return !a.terminating
	}
	return a.slice < b.slice
}

// endpointName is the name whose trailing ordinal is the broker id: the target Pod's name, or
// the endpoint's hostname when it has no target.
func endpointName(e *discoveryv1.Endpoint) string {
	if e.TargetRef != nil && e.TargetRef.Name != "" {
		return e.TargetRef.Name
	}
	return deref(e.Hostname, "")
}

// isServing reads conditions.serving, falling back to conditions.ready: serving reflects the
// pod's readiness even when the headless Service publishes not-ready addresses (which forces
// ready to true). The API says an unset condition means true.
func isServing(c discoveryv1.EndpointConditions) bool {
	if c.Serving != nil {
		return *c.Serving
	}
	return deref(c.Ready, true)
}

// slicePort is the port named name, or the first port, or 0 when the slice has none; named is
// the port named name, 0 when there is none.
func slicePort(ports []discoveryv1.EndpointPort, name string) (port, named int32) {
	for _, p := range ports {
		if p.Name != nil && *p.Name == name && p.Port != nil {
			return *p.Port, *p.Port
		}
	}
	if len(ports) > 0 && ports[0].Port != nil {
		return *ports[0].Port, 0
	}
	return 0, 0
}

// heartbeats reads each broker's Lease as of now, judged on the operator's clock, and what of
// it the rules did not believe (sorted by broker id).
func heartbeats(in Input) (map[int32]heartbeat, []Refusal) {
	beats := make(map[int32]heartbeat, len(in.Leases))
	var refused []Refusal
	prefix := podPrefix(in.Cluster)
	written := make(map[int32]*v1alpha1.BrokerRow, len(in.Written))
	for i := range in.Written {
		written[in.Written[i].ID] = &in.Written[i]
	}
	known := in.ListenerNames
	if len(known) == 0 && in.PortName != "" {
		known = []string{in.PortName}
	}
	seen := make([]metav1.Time, len(in.Leases)) // one allocation for every row's lastSeen
	var pods map[string]*corev1.Pod
	if in.PodsListed {
		pods = make(map[string]*corev1.Pod, len(in.Pods))
		for i := range in.Pods {
			pods[in.Pods[i].Name] = &in.Pods[i]
		}
	}
	for i := range in.Leases {
		l := &in.Leases[i]
		id, ok := ordinal(prefix, l.Name)
		if !ok {
			continue
		}
		said := readLease(l, known, in.SessionTimeout)
		for _, p := range said.problems {
			refused = append(refused, Refusal{Broker: id, Lease: l.Name, Problem: p})
		}
		w := written[id]
		hb := heartbeat{healthy: said.healthy, draining: said.draining, epoch: said.epoch, listeners: said.listeners,
			failures: said.failures, mountRefused: said.mountRefused, uncleanable: said.uncleanable, groups: said.groups,
			ongoingTransactions: said.ongoingTransactions}
		if said.listenersRefused && w != nil {
			hb.listeners = slices.Clone(w.Listeners) // the addresses last believed stand
		}
		if in.PodsListed {
			hb.seenDead = SeenDead(l, pods)
		}
		obs, observed := in.Observed[l.Name]
		if !observed {
			obs = Observation{At: in.Now}
		}
		hb.expiry, hb.fresh = leaseFresh(said.duration, said.hasDuration, obs, w, in.Now)
		switch {
		case l.Spec.RenewTime == nil:
		case !obs.Changed && w != nil && w.LastSeen != nil && !hb.fresh:
			hb.seen = w.LastSeen.DeepCopy() // still the time it was last heard from
		default:
			// metav1.Time keeps whole seconds on the wire; truncating here keeps a row equal
			// to what the apiserver stores, so a comparison never sees a phantom change.
			seen[i] = metav1.Time{Time: obs.At.Truncate(time.Second)}
			hb.seen = &seen[i]
		}
		beats[id] = hb
	}
	slices.SortStableFunc(refused, func(a, b Refusal) int { return int(a.Broker) - int(b.Broker) })
	return beats, refused
}

// leaseSays is what the registry believes of one Lease (readLease).
type leaseSays struct {
	healthy, draining bool
	epoch             int64
	// listeners as announced (nil: not announced); listenersRefused when the announcement
	// did not read strictly and listeners is nil for it.
	listeners        []v1alpha1.ListenerAddress
	listenersRefused bool
	// failures and mountRefused as announced (none when not announced or refused).
	failures     []v1alpha1.PartitionFailure
	mountRefused string
	// uncleanable as announced (none when not announced or refused).
	uncleanable []v1alpha1.UncleanablePartition
	// groups as announced (none when not announced or refused).
	groups []v1alpha1.GroupCount
	// ongoingTransactions as announced (0 when not announced or refused).
	ongoingTransactions int32
	// duration is how long a renewal keeps the Lease fresh, capped at the session timeout;
	// hasDuration is false when the Lease has no renewTime or duration (never fresh).
	duration    time.Duration
	hasDuration bool
	problems    []string
}

// readLease reads what a broker says on its Lease, strictly (docs/registry.md, "What a Lease
// may say"): it is the broker's to write, and the operator believes only what reads as the
// broker's protocol. The listeners announcement must read by v1alpha1.ReadListeners over the
// cluster's listener names known; healthy and draining are "true" or "false" (absent: healthy,
// not draining, as a broker older than the annotation); the duration is capped at
// sessionTimeout; the epoch is not negative; the failed partitions and the mount refusal read
// by v1alpha1.ReadFailures and ReadMountRefused, the group counts and the ongoing transactions
// by v1alpha1.ReadGroupCounts and ReadOngoingTransactions. What is refused gets a problem and the
// conservative reading: unhealthy, draining, the capped duration, epoch 0, no announcement
// (no failed partition: a failure not believed moves nothing).
func readLease(l *coordinationv1.Lease, known []string, sessionTimeout time.Duration) leaseSays {
	var says leaseSays
	refuse := func(format string, args ...any) { says.problems = append(says.problems, fmt.Sprintf(format, args...)) }
	says.healthy = readFlag(l.Annotations, v1alpha1.AnnotationHealthy, true, false, refuse)
	says.draining = readFlag(l.Annotations, v1alpha1.AnnotationDraining, false, true, refuse)
	says.epoch = int64(deref(l.Spec.LeaseTransitions, 0))
	if says.epoch < 0 {
		refuse("leaseTransitions %d is negative: epoch 0 is used", says.epoch)
		says.epoch = 0
	}
	if v, ok := l.Annotations[v1alpha1.AnnotationListeners]; ok {
		ls, err := v1alpha1.ReadListeners(v, known)
		if err != nil {
			refuse("annotation %s is not believed (%v): the addresses last believed are kept", v1alpha1.AnnotationListeners, err)
			says.listenersRefused = true
		}
		says.listeners = ls
	}
	if v := l.Annotations[v1alpha1.AnnotationFailed]; v != "" {
		fs, err := v1alpha1.ReadFailures(v)
		if err != nil {
			refuse("annotation %s is not believed (%v): no partition counts as failed", v1alpha1.AnnotationFailed, err)
		}
		says.failures = fs
	}
	if v := l.Annotations[v1alpha1.AnnotationUncleanable]; v != "" {
		us, err := v1alpha1.ReadUncleanable(v)
		if err != nil {
			refuse("annotation %s is not believed (%v): no partition counts as uncleanable", v1alpha1.AnnotationUncleanable, err)
		}
		says.uncleanable = us
	}
	if v := l.Annotations[v1alpha1.AnnotationGroups]; v != "" {
		gs, err := v1alpha1.ReadGroupCounts(v)
		if err != nil {
			refuse("annotation %s is not believed (%v): no group is counted for the broker", v1alpha1.AnnotationGroups, err)
		}
		says.groups = gs
	}
	if v := l.Annotations[v1alpha1.AnnotationOngoingTransactions]; v != "" {
		n, err := v1alpha1.ReadOngoingTransactions(v)
		if err != nil {
			refuse("annotation %s is not believed (%v): no transaction is counted for the broker", v1alpha1.AnnotationOngoingTransactions, err)
		}
		says.ongoingTransactions = n
	}
	if v := l.Annotations[v1alpha1.AnnotationMountRefused]; v != "" {
		m, err := v1alpha1.ReadMountRefused(v)
		if err != nil {
			refuse("annotation %s is not believed (%v): the mount counts as accepted", v1alpha1.AnnotationMountRefused, err)
		}
		says.mountRefused = m
	}
	says.duration, says.hasDuration = FreshFor(l)
	switch {
	case says.hasDuration && says.duration <= 0:
		refuse("leaseDurationSeconds %d is not positive: the Lease is never fresh", *l.Spec.LeaseDurationSeconds)
	case says.hasDuration && sessionTimeout > 0 && says.duration > sessionTimeout:
		refuse("leaseDurationSeconds %d is longer than the cluster's session timeout %s: %s is used", *l.Spec.LeaseDurationSeconds, sessionTimeout, sessionTimeout)
		says.duration = sessionTimeout
	}
	return says
}

// readFlag reads a "true"/"false" annotation: absent when it is not there, refused (with a
// problem) when it is anything else.
func readFlag(annotations map[string]string, key string, absent, refused bool, refuse func(string, ...any)) bool {
	v, ok := annotations[key]
	switch {
	case !ok:
		return absent
	case v == "true":
		return true
	case v == "false":
		return false
	}
	refuse("annotation %s is %.20q, not \"true\" or \"false\": %t is used", key, v, refused)
	return refused
}

// leaseFresh reports whether a Lease renewed at obs, for duration d (hasDuration false: it has
// no renewTime or no duration), is fresh at now, and when it stops being fresh: while the last
// observed renewal is younger than d, on the operator's clock. A Lease the operator has only
// found (it was running before the operator started) counts as renewed when found — unless
// the row last written for the broker says its heartbeat had expired: an operator restart
// must not bring a dead broker back to life for a lease duration. A Lease without a renewTime
// or a duration is never fresh.
func leaseFresh(d time.Duration, hasDuration bool, obs Observation, written *v1alpha1.BrokerRow, now time.Time) (expiry time.Time, ok bool) {
	if !hasDuration || !obs.Changed && written != nil && written.Reason == v1alpha1.ReasonHeartbeatExpired {
		return time.Time{}, false
	}
	return Fresh(obs.At, d, now)
}

// registeredAt is when broker id's Broker object was created, or now when it has none yet.
func registeredAt(in Input, id int32) time.Time {
	if t, ok := in.Registered[id]; ok {
		return t
	}
	return in.Now
}

// makeRow builds one registered broker's row. The reason says why it is Fenced when it is;
// otherwise why it is not Alive; it is empty for a Serving, Alive broker.
//
// A broker that has never heartbeated and is within its start-up grace is Starting: that is
// its reason for being fenced and for not being alive, rather than PodMissing and NoHeartbeat
// — it is not dead, it has not started yet. A broker whose heartbeat is Dead is fenced even
// while its endpoint says serving: an endpoint is only as fresh as its node's kubelet (40 s or
// more for a lost node), while the Lease expires within the session timeout.
func makeRow(in Input, id int32, ep endpoint, listed bool, hb heartbeat, hasLease, starting bool) (v1alpha1.BrokerRow, Reasons) {
	row := v1alpha1.BrokerRow{
		ID: id, Pod: ep.pod,
		Node: ep.node, Host: ep.host, Port: ep.port, Rack: ep.rack,
		Listeners: advertised(in.PortName, ep, listed, hb),
		State:     v1alpha1.BrokerFenced, Epoch: hb.epoch, LastSeen: hb.seen,
		FailedPartitions: hb.failures, MountRefused: hb.mountRefused, Groups: hb.groups,
		UncleanablePartitions: hb.uncleanable,
		OngoingTransactions:   hb.ongoingTransactions,
	}
	if !listed {
		row.Pod = v1alpha1.BrokerPodName(in.Cluster, id)
	}
	var why Reasons
	row.Health, why.Health = health(hb, hasLease, starting)
	if row.Health == v1alpha1.BrokerDead {
		// A dead broker coordinates nothing: its groups and transactional ids are claimed
		// elsewhere, and its last announcement would count them twice.
		row.Groups = nil
		row.OngoingTransactions = 0
		row.UncleanablePartitions = nil // its partitions are cleaned, or not, by their next leader
	}
	switch {
	case starting && (!listed || ep.terminating || !ep.serving || row.Health == v1alpha1.BrokerDead):
		why.State = v1alpha1.ReasonStarting
	case !listed && id < in.Replicas:
		why.State = v1alpha1.ReasonPodMissing
	case !listed:
		why.State = v1alpha1.ReasonNotListed
	case ep.terminating:
		why.State = v1alpha1.ReasonTerminating
	case !ep.serving:
		why.State = v1alpha1.ReasonNotServing
	case row.Health == v1alpha1.BrokerDead:
		why.State = why.Health
	default:
		row.State = v1alpha1.BrokerServing
	}
	row.Reason = why.State
	if row.Reason == "" {
		row.Reason = why.Health
	}
	return row, why
}

// advertised is where clients reach the broker on each listener: what its Lease announces
// (the broker's own advertised hosts, so every broker tells clients what each broker tells
// about itself). A Lease that announces nothing — a broker older than the announcement —
// leaves the first listener at the endpoint's address, as rows had before; with neither, the
// broker has no address and answers leave it out.
func advertised(firstListener string, ep endpoint, listed bool, hb heartbeat) []v1alpha1.ListenerAddress {
	if hb.listeners != nil {
		if len(hb.listeners) == 0 {
			return nil // announced: no address anywhere yet
		}
		return hb.listeners
	}
	if !listed || ep.host == "" || ep.listenerPort == 0 || firstListener == "" {
		return nil
	}
	return []v1alpha1.ListenerAddress{{Name: firstListener, Host: ep.host, Port: ep.listenerPort}}
}

// health is Dead if the Lease's process is observed gone (death seen outranks draining: a
// broker whose drain ended in its exit holds nothing), else Draining if the fresh Lease says
// draining (draining outranks alive), else Alive if the Lease is fresh and healthy, else Dead,
// with the reason it is not Alive.
func health(hb heartbeat, hasLease, starting bool) (v1alpha1.BrokerHealth, string) {
	switch {
	case starting:
		return v1alpha1.BrokerDead, v1alpha1.ReasonStarting
	case !hasLease:
		return v1alpha1.BrokerDead, v1alpha1.ReasonNoHeartbeat
	case !hb.fresh:
		return v1alpha1.BrokerDead, v1alpha1.ReasonHeartbeatExpired
	case hb.seenDead != "":
		return v1alpha1.BrokerDead, hb.seenDead
	case hb.draining:
		return v1alpha1.BrokerDraining, v1alpha1.ReasonDraining
	case !hb.healthy:
		return v1alpha1.BrokerDead, v1alpha1.ReasonUnhealthy
	default:
		return v1alpha1.BrokerAlive, ""
	}
}

func count(c *v1alpha1.BrokerCounts, row v1alpha1.BrokerRow) {
	c.Registered++
	if row.State == v1alpha1.BrokerServing {
		c.Serving++
	} else {
		c.Fenced++
	}
	switch row.Health {
	case v1alpha1.BrokerAlive:
		c.Alive++
	case v1alpha1.BrokerDraining:
		c.Draining++
	default:
		c.Dead++
	}
}

// Ordinal parses the broker id out of a pod or Lease name of the form <cluster>-broker-<id>.
// Names of another shape (another StatefulSet's pod that the Service happens to select, a
// non-numeric or zero-padded suffix, an id beyond int32) are not brokers.
func Ordinal(cluster, name string) (int32, bool) {
	return ordinal(podPrefix(cluster), name)
}

// podPrefix is what every broker pod and Lease name of cluster starts with.
func podPrefix(cluster string) string { return v1alpha1.StatefulSetName(cluster) + "-" }

func ordinal(prefix, name string) (int32, bool) {
	digits, ok := strings.CutPrefix(name, prefix)
	if !ok || digits == "" || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(digits, 10, 32)
	if err != nil {
		return 0, false
	}
	return int32(id), true
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
