package kafkacluster

import (
	"context"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// bindClaim does what the PersistentVolume controller does for c-data: binds it to volume.
func bindClaim(ctx context.Context, ns, volume string) {
	GinkgoHelper()
	claim := readClaim(ctx, ns)
	claim.Spec.VolumeName = volume
	Expect(env.Client.Update(ctx, claim)).To(Succeed())
	claim.Status.Phase = corev1.ClaimBound
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
	Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
}

// readCheckJob waits for the storage check Job and returns it.
func readCheckJob(ctx context.Context, ns string) *batchv1.Job {
	GinkgoHelper()
	job := &batchv1.Job{}
	Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.StorageCheckJobName("c")}, job)
	}).Should(Succeed())
	return job
}

// finishCheckPod does what the Job controller and a kubelet do for index idx of job: a pod
// on node that ran and ended with message.
func finishCheckPod(ctx context.Context, job *batchv1.Job, idx, node string, exit int32, message string) {
	GinkgoHelper()
	labels := map[string]string{jobControllerUID: string(job.UID)}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: job.Name + "-" + idx + "-x", Labels: labels,
			Annotations:     map[string]string{jobCompletionIndex: idx},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = node
	Expect(env.Client.Create(ctx, pod)).To(Succeed())
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "check", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exit, Message: message}},
	}}}
	if exit != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
}

var _ = Describe("The storage check", Ordered, func() {
	var m *testManager
	var class *storagev1.StorageClass

	BeforeAll(func(ctx SpecContext) {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
		class = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{GenerateName: "shared-"}, Provisioner: "example.com/nfs", AllowVolumeExpansion: ptr.To(true)}
		Expect(env.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Client.Delete(ctx, class)).To(Succeed()) })
	})

	passed := kafkav1alpha1.FormatStorageCheckResults([]kafkav1alpha1.StorageCheckResult{
		{Property: "exclusive create races have one winner", OK: true, Detail: "node a won 26, node b 24"},
		{Property: "a rename replaces a file whole", OK: true, Detail: "812 reads on the other node, each a whole version"},
	})

	It("runs a Job of two pods on different nodes once the claim is bound, and is True from the checker's message", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.StorageClassName = ptr.To(class.Name) })
		waitForChildren(ctx, ns, 3)
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionStorageVerified).Message).To(ContainSubstring("bound"))

		bindClaim(ctx, ns, "pv-1")
		job := readCheckJob(ctx, ns)
		Expect(*job.Spec.CompletionMode).To(Equal(batchv1.IndexedCompletion))
		Expect(*job.Spec.Completions).To(Equal(int32(2)))
		Expect(job.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey).To(Equal(corev1.LabelHostname))
		Expect(job.Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("c-data"))
		Expect(*job.Spec.Template.Spec.AutomountServiceAccountToken).To(BeFalse())
		Expect(job.Annotations[kafkav1alpha1.AnnotationStorageDigest]).To(Equal(storageCheckDigest(readCluster(ctx, ns), readClaim(ctx, ns))))
		svc := &corev1.Service{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name}, svc)).To(Succeed())
		Expect(svc.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning)

		finishCheckPod(ctx, job, "1", "node-b", 0, "peer: served the checker\n")
		finishCheckPod(ctx, job, "0", "node-a", 0, passed)
		kc = waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionTrue, kafkav1alpha1.ReasonStorageVerified)
		msg := meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionStorageVerified).Message
		Expect(msg).To(ContainSubstring("from nodes node-a and node-b"))
		Expect(msg).To(ContainSubstring("exclusive create races have one winner"))
		Expect(*readStatefulSet(ctx, ns).Spec.Replicas).To(Equal(int32(3)))

		By("a storage change replaces the Job: the check runs again")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("20Gi")) })
		Eventually(func() bool {
			again := &batchv1.Job{}
			err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), again)
			return err == nil && again.UID != job.UID && again.Annotations[kafkav1alpha1.AnnotationStorageDigest] != job.Annotations[kafkav1alpha1.AnnotationStorageDigest]
		}).Should(BeTrue())
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionUnknown, kafkav1alpha1.ReasonCheckRunning)

		By("a change of what is done with a result does not")
		uid := readCheckJob(ctx, ns).UID
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Storage.Verification = kafkav1alpha1.StorageVerificationReport
		})
		Eventually(func() int64 { return readCluster(ctx, ns).Status.ObservedGeneration }).Should(Equal(readCluster(ctx, ns).Generation))
		Expect(readCheckJob(ctx, ns).UID).To(Equal(uid))
	})

	It("holds the brokers when a property failed under Enforce, and lets them run under Report", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.StorageClassName = ptr.To(class.Name) })
		waitForChildren(ctx, ns, 3)
		bindClaim(ctx, ns, "pv-2")
		job := readCheckJob(ctx, ns)
		failed := kafkav1alpha1.FormatStorageCheckResults([]kafkav1alpha1.StorageCheckResult{
			{Property: "exclusive create races have one winner", Detail: "round 3: 2 winners"},
			{Property: "a rename replaces a file whole", OK: true, Detail: "812 reads"},
		})
		finishCheckPod(ctx, job, "0", "node-a", 1, failed)
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionStorageVerified).Message).To(
			ContainSubstring("failed: exclusive create races have one winner (round 3: 2 winners)"))
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).Should(Equal(int32(0)))
		kc = waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonStorageCheckFailed)
		ready := meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionReady)
		Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		Expect(strings.Contains(ready.Message, "held")).To(BeTrue(), ready.Message)

		By("under Report the brokers run, and the failure is still reported")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Storage.Verification = kafkav1alpha1.StorageVerificationReport
		})
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).Should(Equal(int32(3)))
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionFalse, kafkav1alpha1.ReasonStorageCheckFailed)
	})

	It("says an unschedulable check pod at once: CheckNotRun, nothing held", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.StorageClassName = ptr.To(class.Name) })
		waitForChildren(ctx, ns, 3)
		bindClaim(ctx, ns, "pv-3")
		job := readCheckJob(ctx, ns)
		finishCheckPod(ctx, job, "1", "", 0, "")
		pod := &corev1.Pod{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name + "-1-x"}, pod)).To(Succeed())
		pod.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."}}}
		Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionStorageVerified, metav1.ConditionFalse, kafkav1alpha1.ReasonCheckNotRun)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionStorageVerified).Message).To(ContainSubstring("anti-affinity"))
		Expect(*readStatefulSet(ctx, ns).Spec.Replicas).To(Equal(int32(3)))
	})
})
