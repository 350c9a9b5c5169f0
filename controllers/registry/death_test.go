package registry

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The death-seen specs play the kubelet by hand: they create a broker's pod, write its broker
// container's status, and hold its Lease as that pod (holder <pod>_<uid>), with Leases long
// enough that only the pod's changes can turn a broker Dead within the spec.
var _ = Describe("Registry, death seen", Ordered, func() {
	const (
		c         = "demo"
		longLease = 60
	)
	var clk *testClock

	BeforeAll(func() {
		clk = &testClock{}
		_, _ = startRegistry(clk, nil)
	})

	It("puts a broker whose container exits out of the alive set at once, and back at its restarted process's first beat", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)
		pod := brokerPodObject(ctx, ns, c, 1)
		acquired := holdLeaseAs(ctx, clk, ns, c, pod)
		setBrokerContainer(ctx, pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(acquired.Add(-5 * time.Second))}}, nil)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))

		// kill -9: the kubelet reports the container terminated; the 60 s Lease is still fresh.
		start := time.Now()
		exit := &corev1.ContainerStateTerminated{ExitCode: 137, FinishedAt: metav1.NewTime(clk.Now())}
		setBrokerContainer(ctx, pod, corev1.ContainerState{Terminated: exit}, nil)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).WithPolling(20 * time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonProcessExited))
		GinkgoWriter.Printf("registry: broker Dead %v after its container was reported terminated\n", time.Since(start))
		Expect(readCluster(ctx, ns, c).Status.Counts.Alive).To(Equal(int32(2)))

		// The kubelet restarts it; the new process has not beaten yet: still Dead.
		restarted := metav1.NewTime(clk.Now().Add(2 * time.Second))
		setBrokerContainer(ctx, pod, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: restarted}}, exit)
		Consistently(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonProcessExited))

		// Its first beat acquires the Lease again: Alive.
		clk.Step(3 * time.Second)
		holdLeaseAs(ctx, clk, ns, c, pod)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
	})

	It("puts a broker whose pod was replaced out of the alive set at once", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)
		pod := brokerPodObject(ctx, ns, c, 2)
		holdLeaseAs(ctx, clk, ns, c, pod)
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Counts.Alive }).Should(Equal(int32(3)))

		Expect(env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
		brokerPodObject(ctx, ns, c, 2) // the StatefulSet's new pod: same name, another uid
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 2) }).WithPolling(20 * time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonPodGone))
	})
})

// brokerPodObject creates broker id's pod (no kubelet runs it: the spec writes its status).
func brokerPodObject(ctx context.Context, ns, cluster string, id int32) *corev1.Pod {
	GinkgoHelper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.BrokerPodName(cluster, id), Namespace: ns,
			Labels: kafkav1alpha1.BrokerLabels(cluster, id)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kafkav1alpha1.BrokerContainerName, Image: "paddock"}}},
	}
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	return pod
}

// holdLeaseAs makes pod's process (a new one) the holder of its broker's Lease, as the
// broker's first beat does, and returns the acquireTime.
func holdLeaseAs(ctx context.Context, clk *testClock, ns, cluster string, pod *corev1.Pod) time.Time {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod.Name}, l)).To(Succeed())
	now := metav1.NewMicroTime(clk.Now())
	l.Spec.HolderIdentity = ptr.To(pod.Name + "_" + string(pod.UID))
	l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
	Expect(env.Client.Update(ctx, l)).To(Succeed())
	return now.Time
}

// setBrokerContainer writes pod's broker container status as the kubelet would.
func setBrokerContainer(ctx context.Context, pod *corev1.Pod, st corev1.ContainerState, last *corev1.ContainerStateTerminated) {
	GinkgoHelper()
	cs := corev1.ContainerStatus{Name: kafkav1alpha1.BrokerContainerName, State: st, Image: "paddock", ImageID: "paddock"}
	if last != nil {
		cs.LastTerminationState.Terminated = last
		cs.RestartCount = 1
	}
	Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
	Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
}
