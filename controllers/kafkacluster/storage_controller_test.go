package kafkacluster

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

var _ = Describe("Storage honesty", Ordered, func() {
	var m *testManager

	BeforeAll(func() {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
	})

	It("refuses a ReadWriteOnce claim for three brokers, and creates nothing", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.AccessMode = corev1.ReadWriteOnce })
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonStorageNotShared)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring("use accessMode ReadWriteMany"))
		Consistently(func() bool {
			return apierrors.IsNotFound(getChild(ctx, ns, "StatefulSet c-broker", &appsv1.StatefulSet{})) &&
				apierrors.IsNotFound(getChild(ctx, ns, "PersistentVolumeClaim c-data", &corev1.PersistentVolumeClaim{}))
		}).WithTimeout(time.Second).Should(BeTrue())

		By("one broker may have a ReadWriteOnce claim")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 1 })
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(readClaim(ctx, ns).Spec.AccessModes).To(Equal([]corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}))

		By("scaling it up is refused, and the cluster stays at one broker")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 3 })
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonStorageNotShared)
		Expect(*readStatefulSet(ctx, ns).Spec.Replicas).To(Equal(int32(1)))
	})

	It("reports a Pending claim as Degraded with the reason its latest Warning event gives", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.StorageClassName = ptr.To("nfs") })
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)

		// What the PersistentVolume controller does for a claim of a class that does not exist.
		claim := readClaim(ctx, ns)
		claim.Status.Phase = corev1.ClaimPending
		Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
		Expect(env.Client.Create(ctx, &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "c-data.", Namespace: ns},
			InvolvedObject: corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: "c-data", UID: claim.UID,
			},
			Type: corev1.EventTypeWarning, Reason: "ProvisioningFailed", Message: `storageclass.storage.k8s.io "nfs" not found`,
			Source: corev1.EventSource{Component: "persistentvolume-controller"}, LastTimestamp: metav1.Now(), FirstTimestamp: metav1.Now(), Count: 1,
		})).To(Succeed())
		// The event is not watched: the claim's status change brings the reconcile that reads it.
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonDataClaimPending)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(
			ContainSubstring(`its latest event says ProvisioningFailed: storageclass.storage.k8s.io "nfs" not found`))

		By("once bound, nothing is wrong")
		claim = readClaim(ctx, ns)
		claim.Status.Phase = corev1.ClaimBound
		claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
	})

	It("expands the claim when spec.storage.size grows and its class allows it", func(ctx SpecContext) {
		class := &storagev1.StorageClass{
			ObjectMeta:           metav1.ObjectMeta{GenerateName: "expandable-"},
			Provisioner:          "example.com/nfs",
			AllowVolumeExpansion: ptr.To(true),
		}
		Expect(env.Client.Create(ctx, class)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(env.Client.Delete(ctx, class)).To(Succeed()) })
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.StorageClassName = ptr.To(class.Name) })
		waitForChildren(ctx, ns, 3)
		claim := readClaim(ctx, ns)
		claim.Status.Phase = corev1.ClaimBound
		claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}
		Expect(env.Client.Status().Update(ctx, claim)).To(Succeed())

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("20Gi")) })
		Eventually(func() string { return readClaim(ctx, ns).Spec.Resources.Requests.Storage().String() }).
			Should(Equal("20Gi"))
		Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(readCluster(ctx, ns).Status.Conditions, kafkav1alpha1.ConditionProgressing)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(kafkav1alpha1.ReasonExpandingStorage), c.Message)
			g.Expect(c.Message).To(ContainSubstring("from 10Gi to 20Gi"))
		}).Should(Succeed())
		Expect(meta.FindStatusCondition(readCluster(ctx, ns).Status.Conditions, kafkav1alpha1.ConditionDegraded).Status).To(Equal(metav1.ConditionFalse))

		By("shrinking it back is refused by the API server: the claim asks for 20Gi now (status.storageSize)")
		Eventually(func() string { return readCluster(ctx, ns).Status.StorageSize.String() }).Should(Equal("20Gi"))
		kc := readCluster(ctx, ns)
		kc.Spec.Storage.Size = ptr.To(resource.MustParse("10Gi"))
		err := env.Client.Update(ctx, kc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.storage.size cannot be smaller than the data claim (status.storageSize)"))
		Expect(readClaim(ctx, ns).Spec.Resources.Requests.Storage().String()).To(Equal("20Gi"))
	})
})
