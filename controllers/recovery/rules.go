package recovery

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
)

// The recovery rules (docs/recovery.md): pure functions of what the reconciler gathered. No
// client, no clock reads — every instant is in the input.

// RecoveryWindow is how long a force-deleted broker counts as being recovered (blocking the
// recovery of any other broker of its cluster) while it is not Alive again: the registry's
// start-up grace, the startup probe's budget. A replacement that has not come up by then is
// not going to because of anything another recovery would disturb.
const RecoveryWindow = 5 * time.Minute

// Partition is one partition of the current assignment (a KafkaTopic's status.partitions).
type Partition struct {
	Topic   string
	TopicID string
	Index   int32
	Leader  int32
	Epoch   int32
	// Incarnation is the leader's incarnation the assignment gave the partition to
	// (status.partitions[].leaderIncarnation): the epoch of its Lease at the time.
	Incarnation int64
}

// Facts is everything the recovery of one broker is decided from.
type Facts struct {
	// Now is the operator's clock at this decision.
	Now time.Time
	// Broker is the broker id.
	Broker int32
	// AutoRecover is false when the cluster is annotated kafka.paddock.dev/auto-recover: "false".
	AutoRecover bool

	// Pod is the broker pod's name; empty when there is no pod (nothing to delete).
	Pod string
	// NodeName is the node the pod is bound to; empty while unscheduled.
	NodeName string
	// NodeExists is false when the Node object is gone: a deleted node is lost.
	NodeExists bool
	// NodeNotReadySince is when the operator first saw the node's Ready condition False or
	// Unknown (its own clock); zero while the node is Ready.
	NodeNotReadySince time.Time
	// OutOfService is true when the node has the node.kubernetes.io/out-of-service taint: a
	// person or a tool has declared it down, which meets the node gate at once.
	OutOfService bool
	// NodeLossTimeout is spec.nodeLossTimeout.
	NodeLossTimeout time.Duration

	// LeaseRenewedAt is when the operator last observed a renewal of the broker's Lease (or
	// first saw it, after a restart), on its own clock; zero when it has no Lease.
	LeaseRenewedAt time.Time
	// SessionTimeout is the Lease's duration (spec.heartbeat.sessionTimeout).
	SessionTimeout time.Duration

	// Alive is the cluster's alive set (registry rows whose health is Alive).
	Alive []int32
	// Partitions is the current assignment of every topic of the cluster.
	Partitions []Partition
	// Claimed maps a broker id to its Lease's kafka.paddock.dev/claimed value, when that
	// reads as a claims digest (ReadClaims); ClaimedBy to the incarnation of that Lease (its
	// leaseTransitions). A digest is believed only from the incarnation the assignment gave
	// the partitions to.
	Claimed   map[int32]string
	ClaimedBy map[int32]int64
	// CoordinatorAlive is status.coordinatorBrokers.alive: the alive set the coordinator
	// epoch was last bumped for. nil when the assignment has not set it yet.
	CoordinatorAlive []int32
	// Recovering are the other brokers of the cluster whose recovery is under way.
	Recovering []int32
}

// Verdict is what to do about one broker, and why.
type Verdict struct {
	// Delete is true when every gate holds: force-delete the pod.
	Delete bool
	// Reason is ReasonPodForceDeleted when Delete, else the first gate that held it back
	// (or ReasonNodeReady when there is nothing to recover).
	Reason string
	// Message says it in a sentence for `kubectl describe`.
	Message string
}

// Lost reports whether the verdict is about a broker whose node is in trouble: anything but
// NodeReady. Only those get Events and a condition.
func (v Verdict) Lost() bool { return v.Reason != kafkav1alpha1.ReasonNodeReady }

// gate is one check: it returns a verdict that holds the recovery back, or ok.
type gate func(f *Facts) (Verdict, bool)

// gates run in order; the first that holds back wins. The order puts first what a person
// most needs to know: whether anything is wrong, then the node, the heartbeat, the cluster,
// the assignment and the fence, then the one-at-a-time rule.
var gates = []gate{
	nodeIsLost,
	autoRecoverIsOn,
	nodeLossTimeoutPassed,
	heartbeatExpired,
	someBrokerIsAlive,
	leadsNoPartition,
	coordinatesNoGroup,
	everyPartitionClaimed,
	noOtherRecovery,
}

// Decide runs the gates over f: force-delete the pod when all hold.
func Decide(f Facts) Verdict {
	for _, g := range gates {
		if v, ok := g(&f); !ok {
			return v
		}
	}
	return Verdict{Delete: true, Reason: kafkav1alpha1.ReasonPodForceDeleted, Message: fmt.Sprintf(
		"Node %s is lost, broker %d's heartbeat expired and its partitions are claimed by their new leaders: pod %s force-deleted so the StatefulSet recreates it on another node",
		f.NodeName, f.Broker, f.Pod)}
}

func held(reason, format string, args ...any) (Verdict, bool) {
	return Verdict{Reason: reason, Message: fmt.Sprintf(format, args...)}, false
}

var pass = Verdict{}

// nodeIsLost: a pod on a Ready node, or not on a node at all, needs no recovery.
func nodeIsLost(f *Facts) (Verdict, bool) {
	if f.Pod == "" || f.NodeName == "" {
		return held(kafkav1alpha1.ReasonNodeReady, "Broker %d's pod is not bound to a node", f.Broker)
	}
	if f.NodeExists && f.NodeNotReadySince.IsZero() && !f.OutOfService {
		return held(kafkav1alpha1.ReasonNodeReady, "Broker %d's node %s is Ready", f.Broker, f.NodeName)
	}
	return pass, true
}

func autoRecoverIsOn(f *Facts) (Verdict, bool) {
	if !f.AutoRecover {
		return held(kafkav1alpha1.ReasonAutoRecoverDisabled,
			"Node %s of broker %d is not Ready, and the cluster is annotated %s: \"false\": delete pod %s by hand once the node is known to be down",
			f.NodeName, f.Broker, kafkav1alpha1.AnnotationAutoRecover, f.Pod)
	}
	return pass, true
}

// nodeLossTimeoutPassed: NotReady for the whole timeout, or declared out of service, or gone.
func nodeLossTimeoutPassed(f *Facts) (Verdict, bool) {
	if !f.NodeExists || f.OutOfService {
		return pass, true
	}
	if lost := f.NodeNotReadySince.Add(f.NodeLossTimeout); f.Now.Before(lost) {
		return held(kafkav1alpha1.ReasonNodeLossPending, "Node %s is not Ready since %s; it counts as lost at %s (node loss timeout %s)",
			f.NodeName, stamp(f.NodeNotReadySince), stamp(lost), f.NodeLossTimeout)
	}
	return pass, true
}

// heartbeatExpired: the broker's Lease has not been renewed for a session timeout, on the
// operator's clock (the registry's expiry rule, rules.Fresh). A broker that still beats is
// alive, whatever its node's kubelet says.
func heartbeatExpired(f *Facts) (Verdict, bool) {
	if f.LeaseRenewedAt.IsZero() {
		return pass, true
	}
	if _, fresh := rules.Fresh(f.LeaseRenewedAt, f.SessionTimeout, f.Now); fresh {
		return held(kafkav1alpha1.ReasonHeartbeatFresh, "Broker %d still renews its heartbeat (session timeout %s): it is alive, whatever node %s says",
			f.Broker, f.SessionTimeout, f.NodeName)
	}
	return pass, true
}

func someBrokerIsAlive(f *Facts) (Verdict, bool) {
	if len(f.Alive) == 0 {
		return held(kafkav1alpha1.ReasonNoAliveBrokersToRecover,
			"No broker of the cluster is alive: the control plane or the network is more likely at fault than node %s, so no pod is deleted", f.NodeName)
	}
	return pass, true
}

func leadsNoPartition(f *Facts) (Verdict, bool) {
	var led []string
	for _, p := range f.Partitions {
		if p.Leader == f.Broker {
			led = append(led, fmt.Sprintf("%s-%d", p.Topic, p.Index))
		}
	}
	if len(led) > 0 {
		return held(kafkav1alpha1.ReasonLeadsPartitions, "The assignment still gives broker %d %d partitions (%s)",
			f.Broker, len(led), summary(led))
	}
	return pass, true
}

// coordinatesNoGroup: the coordinator epoch stands for an alive set without the broker, so
// by the coordinator rule no group lives on it.
func coordinatesNoGroup(f *Facts) (Verdict, bool) {
	if f.CoordinatorAlive == nil || slices.Contains(f.CoordinatorAlive, f.Broker) {
		return held(kafkav1alpha1.ReasonCoordinatesGroups,
			"The coordinator epoch has not been bumped for an alive set without broker %d yet", f.Broker)
	}
	return pass, true
}

// everyPartitionClaimed: every led partition's current leader announces, on its Lease, that
// it holds the fence of exactly the partitions the assignment gives it, at their epochs —
// and announces it as the incarnation the assignment gave them to, so a claim is believed
// only for partitions the assignment gave that broker at that epoch: a digest left by an
// earlier process, or copied from the assignment by a process the partitions were not given
// to, releases nothing. Partitions without a leader or a topic id are led by no one and
// claimed by no one.
func everyPartitionClaimed(f *Facts) (Verdict, bool) {
	byLeader := map[int32][]kafkav1alpha1.PartitionClaim{}
	incarnations := map[int32][]int64{}
	for _, p := range f.Partitions {
		if p.Leader < 0 || p.TopicID == "" {
			continue
		}
		byLeader[p.Leader] = append(byLeader[p.Leader], kafkav1alpha1.PartitionClaim{TopicID: p.TopicID, Partition: p.Index, Epoch: p.Epoch})
		if !slices.Contains(incarnations[p.Leader], p.Incarnation) {
			incarnations[p.Leader] = append(incarnations[p.Leader], p.Incarnation)
		}
	}
	var behind []string
	for _, id := range sortedKeys(byLeader) {
		want := kafkav1alpha1.FormatClaims(byLeader[id])
		got, ok := f.Claimed[id]
		switch {
		case !ok || got != want:
			behind = append(behind, fmt.Sprintf("broker %d (claims %q, assignment %q)", id, f.Claimed[id], want))
		case len(incarnations[id]) != 1 || incarnations[id][0] != f.ClaimedBy[id]:
			behind = append(behind, fmt.Sprintf("broker %d (claims as incarnation %d, assigned to incarnation %v)", id, f.ClaimedBy[id], incarnations[id]))
		}
	}
	if len(behind) > 0 {
		return held(kafkav1alpha1.ReasonPartitionsNotClaimed,
			"Not every partition has been claimed by its new leader yet: %s", summary(behind))
	}
	return pass, true
}

func noOtherRecovery(f *Facts) (Verdict, bool) {
	if others := slices.DeleteFunc(slices.Clone(f.Recovering), func(id int32) bool { return id == f.Broker }); len(others) > 0 {
		return held(kafkav1alpha1.ReasonRecoveryInProgress,
			"Broker %d is being recovered; one broker per cluster at a time", others[0])
	}
	return pass, true
}

// ReadAutoRecover reads the cluster's kafka.paddock.dev/auto-recover annotation: absent or
// "true" is on, "false" off; anything else is refused — recovery stays at its default, on —
// with a problem saying so.
func ReadAutoRecover(annotations map[string]string) (on bool, problem string) {
	switch v, ok := annotations[kafkav1alpha1.AnnotationAutoRecover]; {
	case !ok || v == "true":
		return true, ""
	case v == "false":
		return false, ""
	default:
		return true, fmt.Sprintf("annotation %s is %.20q, not \"true\" or \"false\": node-loss recovery stays on (the default)",
			kafkav1alpha1.AnnotationAutoRecover, v)
	}
}

// ReadClaims checks a kafka.paddock.dev/claimed value against what a digest of a cluster of
// partitions partitions (with topic ids) can be: "<count>/<hex digest>" as FormatClaims writes
// it, count at most partitions. A value that is not is no claim at all, and the problem says
// why: no broker can hold more fences than the cluster has partitions.
func ReadClaims(value string, partitions int) (problem string) {
	countStr, digest, ok := strings.Cut(value, "/")
	count, err := strconv.Atoi(countStr)
	switch {
	case !ok || err != nil || count < 0 || countStr != strconv.Itoa(count):
		return fmt.Sprintf("annotation %s is %.40q, not <count>/<digest>: no partition counts as claimed", kafkav1alpha1.AnnotationClaimed, value)
	case len(digest) == 0 || len(digest) > 16 || strings.Trim(digest, "0123456789abcdef") != "":
		return fmt.Sprintf("annotation %s has digest %.40q, not 1 to 16 hex digits: no partition counts as claimed", kafkav1alpha1.AnnotationClaimed, digest)
	case count > partitions:
		return fmt.Sprintf("annotation %s claims %d partitions, and the cluster has %d: no partition counts as claimed", kafkav1alpha1.AnnotationClaimed, count, partitions)
	}
	return ""
}

// Recovering reports whether a broker whose BrokerRecovery condition says reason, set at
// since, is still being recovered at now: its pod was force-deleted (or its zombie claim
// deleted) less than RecoveryWindow ago and it is not Alive again.
func Recovering(reason string, since, now time.Time, alive bool) bool {
	return (reason == kafkav1alpha1.ReasonPodForceDeleted || reason == kafkav1alpha1.ReasonZombieClaimDeleted) &&
		!alive && now.Sub(since) < RecoveryWindow
}

// NextChange is the earliest instant after f.Now at which a time gate of f may open: the
// node counting as lost, the Lease expiring. Zero when none will. The reconciler asks it only
// about brokers whose node is in trouble.
func NextChange(f Facts) time.Time {
	var next time.Time
	leaseExpiry, _ := rules.Fresh(f.LeaseRenewedAt, f.SessionTimeout, f.Now)
	for _, t := range []time.Time{f.NodeNotReadySince.Add(f.NodeLossTimeout), leaseExpiry} {
		if t.After(f.Now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

// stamp is how instants are written in messages: UTC, whole seconds, so a message does not
// change from one reconcile to the next.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func sortedKeys[V any](m map[int32]V) []int32 {
	keys := make([]int32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// summary lists at most five items.
func summary(items []string) string {
	if len(items) > 5 {
		return strings.Join(items[:5], ", ") + fmt.Sprintf(" and %d more", len(items)-5)
	}
	return strings.Join(items, ", ")
}
