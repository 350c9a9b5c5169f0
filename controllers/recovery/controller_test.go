package recovery

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

const topicID = "AAAAAAAAAAAAAAAAAAAAAQ"

// world is one spec's cluster "c": broker 0 alive on a Ready node and leading partition t-0
// (claimed), broker 1 on node lost, Dead, leading nothing.
type world struct {
	ns, ready, lost string
}

// startRecovery runs the recovery reconciler in a manager of its own until the spec ends.
func startRecovery() {
	GinkgoHelper()
	env.StartManager(func(mgr ctrl.Manager) error {
		return (&Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("recovery")}).
			SetupWithManager(mgr)
	})
}

func makeNode(ctx context.Context, name string, ready corev1.ConditionStatus) {
	GinkgoHelper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Expect(env.Client.Create(ctx, n)).To(Succeed())
	DeferCleanup(func(ctx SpecContext) { _ = env.Client.Delete(ctx, n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	Expect(env.Client.Status().Update(ctx, n)).To(Succeed())
}

func makePod(ctx context.Context, ns string, id int32, node string, volumes ...corev1.Volume) *corev1.Pod {
	GinkgoHelper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.BrokerPodName("c", id), Namespace: ns, Labels: kafkav1alpha1.ClusterLabels("c")},
		Spec: corev1.PodSpec{NodeName: node, Volumes: volumes,
			Containers: []corev1.Container{{Name: "broker", Image: "paddock"}}},
	}
	Expect(env.Client.Create(ctx, p)).To(Succeed())
	return p
}

func makeLease(ctx context.Context, ns string, id int32, renewed time.Time, claims ...kafkav1alpha1.PartitionClaim) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.LeaseName("c", id), Namespace: ns, Labels: kafkav1alpha1.BrokerLabels("c", id),
			Annotations: map[string]string{kafkav1alpha1.AnnotationClaimed: kafkav1alpha1.FormatClaims(claims)}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(fmt.Sprintf("c-broker-%d_uid", id)), LeaseDurationSeconds: ptr.To[int32](1),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
	Expect(env.Client.Create(ctx, l)).To(Succeed())
	return l
}

func makeBroker(ctx context.Context, ns string, id int32, health kafkav1alpha1.BrokerHealth) {
	GinkgoHelper()
	b := &kafkav1alpha1.Broker{ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.BrokerObjectName("c", id), Namespace: ns, Labels: kafkav1alpha1.BrokerLabels("c", id)}}
	Expect(env.Client.Create(ctx, b)).To(Succeed())
	state := kafkav1alpha1.BrokerServing
	if health != kafkav1alpha1.BrokerAlive {
		state = kafkav1alpha1.BrokerFenced
	}
	b.Status = kafkav1alpha1.BrokerStatus{Cluster: "c", BrokerRow: kafkav1alpha1.BrokerRow{ID: id, State: state, Health: health}}
	Expect(env.Client.Status().Update(ctx, b)).To(Succeed())
}

// setUp makes the world; renewLost says when broker 1's Lease was last renewed.
func setUp(ctx context.Context, renewLost time.Time) world {
	GinkgoHelper()
	w := world{ns: newNamespace(ctx), ready: "ready-" + rand.String(5), lost: "lost-" + rand.String(5)}
	makeNode(ctx, w.ready, corev1.ConditionTrue)
	makeNode(ctx, w.lost, corev1.ConditionUnknown)
	kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: w.ns}}
	kc.Spec.NodeLossTimeout = &metav1.Duration{Duration: time.Second}
	kc.Spec.Heartbeat.SessionTimeout = &metav1.Duration{Duration: time.Second}
	kc.Spec.Heartbeat.Interval = &metav1.Duration{Duration: 300 * time.Millisecond}
	Expect(env.Client.Create(ctx, kc)).To(Succeed())
	kc.Status.Brokers = []kafkav1alpha1.BrokerRow{
		{ID: 0, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerAlive},
		{ID: 1, State: kafkav1alpha1.BrokerFenced, Health: kafkav1alpha1.BrokerDead, Reason: kafkav1alpha1.ReasonHeartbeatExpired},
	}
	kc.Status.CoordinatorEpoch = 2
	kc.Status.CoordinatorBrokers = &kafkav1alpha1.CoordinatorBrokers{Registered: []int32{0, 1}, Alive: []int32{0}}
	Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
	kt := &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: w.ns}, Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: "c", Partitions: 1}}
	Expect(env.Client.Create(ctx, kt)).To(Succeed())
	kt.Status.TopicID, kt.Status.TopicName = topicID, "t"
	kt.Status.Partitions = []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: 0, LeaderEpoch: 2}}
	Expect(env.Client.Status().Update(ctx, kt)).To(Succeed())
	makeBroker(ctx, w.ns, 0, kafkav1alpha1.BrokerAlive)
	makeBroker(ctx, w.ns, 1, kafkav1alpha1.BrokerDead)
	makePod(ctx, w.ns, 0, w.ready)
	makeLease(ctx, w.ns, 0, time.Now(), kafkav1alpha1.PartitionClaim{TopicID: topicID, Partition: 0, Epoch: 2})
	makeLease(ctx, w.ns, 1, renewLost)
	return w
}

// counted is paddock_recovery_decisions_total for cluster c of namespace ns and reason.
func counted(ns, reason string) float64 {
	GinkgoHelper()
	m := &dto.Metric{}
	Expect(decisions.WithLabelValues(ns, "c", reason).Write(m)).To(Succeed())
	return m.GetCounter().GetValue()
}

func recoveryCondition(ctx context.Context, ns string, id int32) *metav1.Condition {
	b := &kafkav1alpha1.Broker{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.BrokerObjectName("c", id)}, b); err != nil {
		return nil
	}
	return meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery)
}

func reasonOf(ctx context.Context, ns string, id int32) string {
	if c := recoveryCondition(ctx, ns, id); c != nil {
		return c.Reason
	}
	return ""
}

func podUID(ctx context.Context, ns, name string) string {
	p := &corev1.Pod{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		if apierrors.IsNotFound(err) {
			return "gone"
		}
		return err.Error()
	}
	return string(p.UID)
}

var _ = Describe("Node loss", func() {
	It("force-deletes the pod of a broker on a NotReady node whose Lease expired and that leads nothing", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		victim := makePod(ctx, w.ns, 1, w.lost)
		startRecovery()
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonPodForceDeleted))
		Expect(recoveryCondition(ctx, w.ns, 1).Status).To(Equal(metav1.ConditionTrue))
		Expect(podUID(ctx, w.ns, kafkav1alpha1.BrokerPodName("c", 0))).NotTo(Equal("gone"), "the broker on the Ready node is left alone")
		Expect(recoveryCondition(ctx, w.ns, 0)).To(BeNil(), "a broker on a Ready node gets no condition")
		Eventually(func() ([]string, error) { return testenv.EventReasons(ctx, env.Client, w.ns, "c") }).
			Should(ContainElement(kafkav1alpha1.EventPodForceDeleted), "an Event on the cluster")
		Eventually(func() ([]string, error) {
			return testenv.EventReasons(ctx, env.Client, w.ns, kafkav1alpha1.BrokerObjectName("c", 1))
		}).
			Should(ContainElement(kafkav1alpha1.EventPodForceDeleted), "an Event on the Broker")
		Expect(counted(w.ns, kafkav1alpha1.ReasonPodForceDeleted)).To(Equal(1.0), "the metric counts the decision once")
		Expect(counted(w.ns, kafkav1alpha1.ReasonHeartbeatFresh)).To(BeNumerically("<=", 1),
			"a held-back decision is counted when it changes, not at every reconcile")

		By("the recreated pod lands on a Ready node and the broker comes back Alive: Recovered")
		makePod(ctx, w.ns, 1, w.ready)
		b := &kafkav1alpha1.Broker{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: kafkav1alpha1.BrokerObjectName("c", 1)}, b)).To(Succeed())
		kc := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "c"}, kc)).To(Succeed())
		kc.Status.Brokers[1].Health, kc.Status.Brokers[1].State = kafkav1alpha1.BrokerAlive, kafkav1alpha1.BrokerServing
		Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonRecovered))
	})

	It("does not delete the pod of a broker whose Lease is still renewed", func(ctx SpecContext) {
		w := setUp(ctx, time.Now())
		// A session of 10 s, not setUp's 1 s: a beat that a loaded apiserver holds up for a
		// second must not count as a broker gone silent.
		kc := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "c"}, kc)).To(Succeed())
		kc.Spec.Heartbeat.SessionTimeout = &metav1.Duration{Duration: 10 * time.Second}
		Expect(env.Client.Update(ctx, kc)).To(Succeed())
		victim := makePod(ctx, w.ns, 1, w.lost)
		// The broker keeps beating although its node is NotReady (a kubelet problem, say).
		beat, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() {
			defer GinkgoRecover()
			for beat.Err() == nil {
				l := &coordinationv1.Lease{}
				if env.Client.Get(beat, client.ObjectKey{Namespace: w.ns, Name: kafkav1alpha1.LeaseName("c", 1)}, l) == nil {
					l.Spec.RenewTime = ptr.To(metav1.NowMicro())
					_ = env.Client.Update(beat, l)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}()
		startRecovery()
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonHeartbeatFresh))
		Consistently(func() string { return podUID(ctx, w.ns, victim.Name) }).WithTimeout(3 * time.Second).Should(Equal(string(victim.UID)))
		Expect(reasonOf(ctx, w.ns, 1)).To(Equal(kafkav1alpha1.ReasonHeartbeatFresh))
		Expect(recoveryCondition(ctx, w.ns, 1).Status).To(Equal(metav1.ConditionFalse))

		By("once it stops beating, the pod is force-deleted")
		stop()
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
	})

	It("holds back, and says so, while the new leader has not claimed the lost broker's partition", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		l := &coordinationv1.Lease{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: kafkav1alpha1.LeaseName("c", 0)}, l)).To(Succeed())
		l.Annotations[kafkav1alpha1.AnnotationClaimed] = kafkav1alpha1.FormatClaims(nil) // taking over, not claimed yet
		Expect(env.Client.Update(ctx, l)).To(Succeed())
		victim := makePod(ctx, w.ns, 1, w.lost)
		startRecovery()
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonPartitionsNotClaimed))
		Expect(podUID(ctx, w.ns, victim.Name)).To(Equal(string(victim.UID)))

		By("the claim lands on the new leader's Lease")
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: kafkav1alpha1.LeaseName("c", 0)}, l)).To(Succeed())
		l.Annotations[kafkav1alpha1.AnnotationClaimed] = kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: topicID, Partition: 0, Epoch: 2}})
		Expect(env.Client.Update(ctx, l)).To(Succeed())
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
	})

	It("honours the out-of-service taint on a node that still says Ready", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		tainted := "tainted-" + rand.String(5)
		makeNode(ctx, tainted, corev1.ConditionTrue)
		n := &corev1.Node{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: tainted}, n)).To(Succeed())
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: corev1.TaintNodeOutOfService, Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute})
		Expect(env.Client.Update(ctx, n)).To(Succeed())
		victim := makePod(ctx, w.ns, 1, tainted)
		startRecovery()
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonPodForceDeleted))
	})

	It("respects the opt-out annotation", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		kc := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "c"}, kc)).To(Succeed())
		kc.Annotations = map[string]string{kafkav1alpha1.AnnotationAutoRecover: "false"}
		Expect(env.Client.Update(ctx, kc)).To(Succeed())
		victim := makePod(ctx, w.ns, 1, w.lost)
		startRecovery()
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonAutoRecoverDisabled))
		Consistently(func() string { return podUID(ctx, w.ns, victim.Name) }).WithTimeout(2 * time.Second).Should(Equal(string(victim.UID)))
	})
})

var _ = Describe("Zombie claims", func() {
	// stuck makes broker 1's pod Pending on claim, bound to a no-provisioner volume of a node
	// that no longer exists, as the scheduler reports it.
	stuck := func(ctx context.Context, w world, claim string) *corev1.Pod {
		GinkgoHelper()
		class := "local-" + rand.String(5)
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: NoProvisioner}
		Expect(env.Client.Create(ctx, sc)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = env.Client.Delete(ctx, sc) })
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + rand.String(5)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:       class,
				PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}},
				NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"terminated-node"}}},
				}}}},
			},
		}
		Expect(env.Client.Create(ctx, pv)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { _ = env.Client.Delete(ctx, pv) })
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: w.ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class), VolumeName: pv.Name,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		}
		Expect(env.Client.Create(ctx, pvc)).To(Succeed())
		pod := makePod(ctx, w.ns, 1, "", corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		pod.Status.Phase = corev1.PodPending
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/2 nodes are available: 1 node(s) had volume node affinity conflict, 1 node(s) didn't match pod anti-affinity rules."}}
		Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		return pod
	}
	claimState := func(ctx context.Context, ns, name string) string {
		pvc := &corev1.PersistentVolumeClaim{}
		switch err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pvc); {
		case apierrors.IsNotFound(err):
			return "gone"
		case err != nil:
			return err.Error()
		case pvc.DeletionTimestamp != nil:
			return "deleting"
		}
		return "kept"
	}

	It("deletes a local claim bound to a node that is gone, and its Pending pod", func(ctx SpecContext) {
		w := setUp(ctx, time.Now())
		pod := stuck(ctx, w, "scratch-c-broker-1")
		startRecovery()
		Eventually(func() string { return claimState(ctx, w.ns, "scratch-c-broker-1") }).Should(BeElementOf("gone", "deleting"))
		Eventually(func() string { return podUID(ctx, w.ns, pod.Name) }).Should(Equal("gone"))
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonZombieClaimDeleted))
		Eventually(func() ([]string, error) { return testenv.EventReasons(ctx, env.Client, w.ns, "c") }).
			Should(ContainElement(kafkav1alpha1.EventZombieClaimDeleted))
	})

	It("never deletes the cluster's data claim: it reports the conflict instead", func(ctx SpecContext) {
		w := setUp(ctx, time.Now())
		pod := stuck(ctx, w, kafkav1alpha1.DataClaimName("c"))
		startRecovery()
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonVolumeNodeAffinityConflict))
		Consistently(func() string { return claimState(ctx, w.ns, kafkav1alpha1.DataClaimName("c")) }).WithTimeout(2 * time.Second).Should(Equal("kept"))
		Expect(podUID(ctx, w.ns, pod.Name)).To(Equal(string(pod.UID)))
		Expect(recoveryCondition(ctx, w.ns, 1).Message).To(ContainSubstring("data claim is never deleted"))
	})
})
