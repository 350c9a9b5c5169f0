package registry

import (
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/paddock-dev/paddock/api/v1alpha1"
)

// acquiredAt is when the process holding the test Leases acquired them: 20 minutes before t0,
// at a fraction of a second (the kubelet's times are whole seconds, the Lease's microseconds).
var acquiredAt = t0.Add(-20*time.Minute + 300*time.Millisecond)

// heldLease is broker id's fresh Lease, held by pod c-broker-<id> of uid "uid" since acquiredAt.
func heldLease(id int32) coordinationv1.Lease {
	l := lease{id: id, age: time.Second}.build()
	l.Spec.AcquireTime = &metav1.MicroTime{Time: acquiredAt}
	return l
}

// brokerPod is pod c-broker-<id> of uid "uid" whose broker container is in state st (after
// last, when set).
func brokerPod(id int32, st corev1.ContainerState, last *corev1.ContainerStateTerminated) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.BrokerPodName("c", id), UID: types.UID("uid")}}
	cs := corev1.ContainerStatus{Name: v1alpha1.BrokerContainerName, State: st}
	if last != nil {
		cs.LastTerminationState.Terminated = last
	}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sidecar"}, cs}
	return p
}

// kubeletTime is t as the kubelet writes it: whole seconds.
func kubeletTime(t time.Time) metav1.Time { return metav1.Time{Time: t.Truncate(time.Second)} }

func running(since time.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: kubeletTime(since)}}
}

func terminated(at time.Time) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: kubeletTime(at)}
}

func TestSeenDeadTellsAnExitedOrReplacedHolderFromALiveOne(t *testing.T) {
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	for _, c := range []struct {
		name  string
		lease func(*coordinationv1.Lease)
		pods  []corev1.Pod
		want  string
	}{
		{name: "the holder's container runs the process that acquired the Lease",
			pods: []corev1.Pod{brokerPod(1, running(acquiredAt.Add(-2*time.Second)), nil)}},
		{name: "the holder's pod is not in the cache: absence is left to the session timeout"},
		{name: "the holder's pod was recreated with another uid", want: v1alpha1.ReasonPodGone,
			pods: func() []corev1.Pod {
				p := brokerPod(1, running(t0), nil)
				p.UID = "new-uid"
				return []corev1.Pod{p}
			}()},
		{name: "the container is terminated since the Lease was acquired", want: v1alpha1.ReasonProcessExited,
			pods: []corev1.Pod{brokerPod(1, corev1.ContainerState{Terminated: terminated(t0.Add(-2 * time.Second))}, nil)}},
		{name: "it terminated within the second of a later acquisition (kubelet seconds round down)", want: v1alpha1.ReasonProcessExited,
			lease: func(l *coordinationv1.Lease) {
				l.Spec.AcquireTime = &metav1.MicroTime{Time: t0.Add(-1500 * time.Millisecond)}
			},
			pods: []corev1.Pod{brokerPod(1, corev1.ContainerState{Terminated: terminated(t0.Add(-1900 * time.Millisecond))}, nil)}},
		{name: "a process acquired the Lease after the termination ended (the status lags a restart)",
			lease: func(l *coordinationv1.Lease) { l.Spec.AcquireTime = &metav1.MicroTime{Time: t0.Add(-time.Second)} },
			pods:  []corev1.Pod{brokerPod(1, corev1.ContainerState{Terminated: terminated(t0.Add(-5 * time.Second))}, nil)}},
		{name: "waiting to restart after a termination since the acquisition", want: v1alpha1.ReasonProcessExited,
			pods: []corev1.Pod{brokerPod(1, waiting, terminated(t0.Add(-3*time.Second)))}},
		{name: "waiting with no termination on record",
			pods: []corev1.Pod{brokerPod(1, waiting, nil)}},
		{name: "restarted: running a process started after the acquisition", want: v1alpha1.ReasonProcessExited,
			pods: []corev1.Pod{brokerPod(1, running(t0.Add(-time.Second)), terminated(t0.Add(-2*time.Second)))}},
		{name: "restarted within the second of the acquisition: left to the session timeout",
			pods: []corev1.Pod{brokerPod(1, running(acquiredAt.Add(200*time.Millisecond)), nil)}},
		{name: "the restarted process has acquired the Lease",
			lease: func(l *coordinationv1.Lease) {
				l.Spec.AcquireTime = &metav1.MicroTime{Time: t0.Add(-500 * time.Millisecond)}
			},
			pods: []corev1.Pod{brokerPod(1, running(t0.Add(-time.Second)), terminated(t0.Add(-2*time.Second)))}},
		{name: "no broker container status yet",
			pods: func() []corev1.Pod {
				p := brokerPod(1, running(t0), nil)
				p.Status.ContainerStatuses = p.Status.ContainerStatuses[:1]
				return []corev1.Pod{p}
			}()},
		{name: "a holder that is not <pod>_<uid> shows nothing",
			lease: func(l *coordinationv1.Lease) { l.Spec.HolderIdentity = ptr.To("c-broker-1") }},
		{name: "a Lease without acquireTime shows nothing",
			lease: func(l *coordinationv1.Lease) { l.Spec.AcquireTime = nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := heldLease(1)
			if c.lease != nil {
				c.lease(&l)
			}
			pods := map[string]*corev1.Pod{}
			for i := range c.pods {
				pods[c.pods[i].Name] = &c.pods[i]
			}
			if got := SeenDead(&l, pods); got != c.want {
				t.Fatalf("SeenDead = %q, want %q", got, c.want)
			}
		})
	}
}

// deathInput is a cluster of brokers 0..2, all serving with fresh Leases held since
// acquiredAt, whose pods are listed as given.
func deathInput(pods ...corev1.Pod) Input {
	return Input{
		Cluster: "c", PortName: "kafka", Replicas: 3, Now: t0, Registered: longAgo(3),
		Slices:     []discoveryv1.EndpointSlice{slice("s", serving(0), serving(1), serving(2))},
		Leases:     []coordinationv1.Lease{heldLease(0), heldLease(1), heldLease(2)},
		Pods:       pods,
		PodsListed: true,
	}
}

func livePods(ids ...int32) []corev1.Pod {
	var out []corev1.Pod
	for _, id := range ids {
		out = append(out, brokerPod(id, running(acquiredAt.Add(-time.Second)), nil))
	}
	return out
}

func TestRegistryAFreshLeaseWhosePodIsObservedGoneIsDeadAndFencedAtOnce(t *testing.T) {
	recreated := brokerPod(1, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}, nil)
	recreated.UID = "uid-of-the-new-pod"
	res := compute(deathInput(append(livePods(0, 2), recreated)...))
	if !slices.Equal(res.Alive, []int32{0, 2}) {
		t.Fatalf("alive = %v, want [0 2]: broker 1's pod is gone", res.Alive)
	}
	row := res.Rows[1]
	if row.Health != v1alpha1.BrokerDead || row.State != v1alpha1.BrokerFenced || row.Reason != v1alpha1.ReasonPodGone {
		t.Fatalf("broker 1 = %s/%s (%s), want Fenced/Dead for PodGone", row.State, row.Health, row.Reason)
	}
	if res.Reasons[1].Heartbeating() {
		t.Fatal("a broker whose pod is gone counts as heartbeating: its lastSeen would be settled as if beats still came")
	}
}

func TestRegistryABrokerContainerThatExitedIsDeadEvenWhileDraining(t *testing.T) {
	in := deathInput(append(livePods(0, 2), brokerPod(1, corev1.ContainerState{Terminated: terminated(t0.Add(-2 * time.Second))}, nil))...)
	in.Leases[1].Annotations[v1alpha1.AnnotationDraining] = "true"
	res := compute(in)
	if row := res.Rows[1]; row.Health != v1alpha1.BrokerDead || row.Reason != v1alpha1.ReasonProcessExited {
		t.Fatalf("broker 1 = %s (%s), want Dead for ProcessExited: its drain ended in its exit", row.Health, row.Reason)
	}
}

func TestRegistryARestartedBrokerIsAliveAgainAtItsFirstBeat(t *testing.T) {
	restarted := brokerPod(1, running(t0.Add(-3*time.Second)), terminated(t0.Add(-4*time.Second)))
	in := deathInput(append(livePods(0, 2), restarted)...)
	if res := compute(in); res.Rows[1].Health != v1alpha1.BrokerDead || res.Rows[1].Reason != v1alpha1.ReasonProcessExited {
		t.Fatalf("before the restarted process beats: %s (%s), want Dead for ProcessExited", res.Rows[1].Health, res.Rows[1].Reason)
	}
	in.Leases[1].Spec.AcquireTime = &metav1.MicroTime{Time: t0.Add(-2 * time.Second)} // its first beat
	if res := compute(in); res.Rows[1].Health != v1alpha1.BrokerAlive || !slices.Contains(res.Alive, 1) {
		t.Fatalf("after the restarted process beat: %s (%s), want Alive", res.Rows[1].Health, res.Rows[1].Reason)
	}
}

func TestRegistryJudgesNoDeathFromPodsItHasNotListed(t *testing.T) {
	in := deathInput()
	in.PodsListed = false
	if res := compute(in); len(res.Alive) != 3 {
		t.Fatalf("alive = %v, want every broker: no pods were listed, so none can be seen gone", res.Alive)
	}
}

func TestRegistryAnExpiredLeaseStaysHeartbeatExpiredWhenItsPodIsGone(t *testing.T) {
	in := deathInput(livePods(0, 2)...)
	in.Leases[1].Spec.RenewTime = &metav1.MicroTime{Time: t0.Add(-time.Minute)}
	if row := compute(in).Rows[1]; row.Reason != v1alpha1.ReasonHeartbeatExpired {
		t.Fatalf("broker 1 = %s, want HeartbeatExpired (an expired Lease keeps its reason across operator restarts)", row.Reason)
	}
}
