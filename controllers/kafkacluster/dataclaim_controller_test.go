package kafkacluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// labelledClaimsOnly caches claims as the manager does (controllers.CacheByObject, which this
// package cannot import): only those with the kafka.paddock.dev/cluster label, so a claim
// paddock did not make is invisible to the cache in these specs too.
func labelledClaimsOnly() map[client.Object]cache.ByObject {
	belongs, err := labels.NewRequirement(kafkav1alpha1.LabelCluster, selection.Exists, nil)
	Expect(err).NotTo(HaveOccurred())
	return map[client.Object]cache.ByObject{
		&corev1.PersistentVolumeClaim{}: {Label: labels.NewSelector().Add(*belongs)},
	}
}

// createClusterWith creates the cluster newCluster creates, with mutate applied to its spec.
func createClusterWith(ctx context.Context, ns string, mutate func(*kafkav1alpha1.KafkaClusterSpec)) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	kc := &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
		Spec:       kafkav1alpha1.KafkaClusterSpec{Replicas: 3, DrainTimeout: &metav1.Duration{Duration: 30 * time.Second}},
	}
	mutate(&kc.Spec)
	Expect(env.Client.Create(ctx, kc)).To(Succeed())
	return kc
}

// readClaim reads c-data in ns.
func readClaim(ctx context.Context, ns string) *corev1.PersistentVolumeClaim {
	GinkgoHelper()
	pvc := &corev1.PersistentVolumeClaim{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-data"}, pvc)).To(Succeed())
	return pvc
}

// deleteCluster deletes c in ns and waits until it is gone. Nothing holds it: the reconciler
// sets no finalizer.
func deleteCluster(ctx context.Context, ns string) {
	GinkgoHelper()
	Expect(env.Client.Delete(ctx, readCluster(ctx, ns))).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, &kafkav1alpha1.KafkaCluster{}))
	}).Should(BeTrue(), "the cluster is deleted at once")
}

// clusterEvents are the events.k8s.io Events in ns about the KafkaCluster with uid, as
// "Reason: note".
func clusterEvents(ctx context.Context, ns string, uid types.UID) []string {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "KafkaCluster" && e.Regarding.UID == uid {
			out = append(out, e.Reason+": "+e.Note)
		}
	}
	return out
}

// removeClaim deletes c-data in ns and, playing the pvc-protection controller envtest does
// not run, removes the finalizers that would keep it terminating; it waits until it is gone.
func removeClaim(ctx context.Context, ns string) {
	GinkgoHelper()
	Expect(env.Client.Delete(ctx, readClaim(ctx, ns))).To(Succeed())
	Eventually(func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-data"}, pvc); err != nil {
			return client.IgnoreNotFound(err)
		}
		pvc.Finalizers = nil
		return env.Client.Update(ctx, pvc)
	}).Should(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-data"}, &corev1.PersistentVolumeClaim{}))
	}).Should(BeTrue())
}

// Envtest runs no garbage collector, so no spec here can watch a claim being collected: what
// decides it in a real cluster is the claim's owner reference — a controller reference to the
// KafkaCluster with blockOwnerDeletion is collected with it, a claim without one never is —
// and that is what the specs assert.
var _ = Describe("The data claim", Ordered, func() {
	BeforeAll(func() { startTestManager() })

	It("outlives a deleted cluster by default: no owner reference, labelled, annotated with the clusterID, and an Event says so", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID

		claim := readClaim(ctx, ns)
		Expect(claim.OwnerReferences).To(BeEmpty())
		Expect(claim.Labels).To(Equal(kafkav1alpha1.ClusterLabels("c")))
		Expect(claim.Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, id))
		Eventually(func() []string { return clusterEvents(ctx, ns, kc.UID) }).Should(ContainElement(
			"DataClaimRetained: Claim c-data has no owner: it is retained, with its data, when this cluster is deleted (spec.storage.deleteClaim is false); " +
				"delete the claim to delete the data, or re-create a cluster called c to use it again"))

		deleteCluster(ctx, ns)
		Consistently(func(g Gomega) {
			kept := &corev1.PersistentVolumeClaimList{}
			g.Expect(env.Client.List(ctx, kept, client.InNamespace(ns), client.MatchingLabels{kafkav1alpha1.LabelCluster: "c"})).To(Succeed())
			g.Expect(kept.Items).To(HaveLen(1), "the claim is found by its cluster label")
			g.Expect(kept.Items[0].UID).To(Equal(claim.UID))
			g.Expect(kept.Items[0].OwnerReferences).To(BeEmpty(), "nothing for the garbage collector to follow")
			g.Expect(kept.Items[0].Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, id))
		}).WithTimeout(time.Second).Should(Succeed())
		Expect(clusterEvents(ctx, ns, kc.UID)).To(ContainElement(HavePrefix(kafkav1alpha1.EventDataClaimRetained)), "the Event outlives the cluster too")
	})

	It("is deleted with the cluster when spec.storage.deleteClaim is true: a controller owner reference with blockOwnerDeletion", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.DeleteClaim = true })
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID

		claim := readClaim(ctx, ns)
		Expect(claim.OwnerReferences).To(ConsistOf(metav1.OwnerReference{
			APIVersion: "kafka.paddock.dev/v1alpha1", Kind: "KafkaCluster", Name: "c", UID: kc.UID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}))
		Expect(claim.Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, id))
		Eventually(func() []string { return clusterEvents(ctx, ns, kc.UID) }).Should(ContainElement(
			"DataClaimOwned: Claim c-data is owned by this cluster: it is deleted, with its data, when this cluster is deleted (spec.storage.deleteClaim is true)"))
	})

	It("follows spec.storage.deleteClaim both ways on an existing cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		uid := readClaim(ctx, ns).UID

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.DeleteClaim = true })
		Eventually(func() *metav1.OwnerReference { return metav1.GetControllerOf(readClaim(ctx, ns)) }).Should(And(
			HaveField("UID", kc.UID), HaveField("BlockOwnerDeletion", ptr.To(true))))
		Eventually(func() []string { return clusterEvents(ctx, ns, kc.UID) }).
			Should(ContainElement(HavePrefix(kafkav1alpha1.EventDataClaimOwned)))

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.DeleteClaim = false })
		Eventually(func() []metav1.OwnerReference { return readClaim(ctx, ns).OwnerReferences }).Should(BeEmpty())
		Expect(readClaim(ctx, ns).UID).To(Equal(uid), "the same claim throughout")
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
	})

	It("loses the owner reference an earlier paddock gave it, and gains the clusterID annotation", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID

		By("applying the claim as the operator did before deleteClaim existed: owned, no annotation, same field owner")
		old := desiredDataClaim(kc)
		old.ObjectMeta = childMeta(kc, "c-data")
		Expect(apply(ctx, env.Client, old)).To(Succeed())

		Eventually(func(g Gomega) {
			claim := readClaim(ctx, ns)
			g.Expect(claim.OwnerReferences).To(BeEmpty())
			g.Expect(claim.Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, id))
		}).Should(Succeed())
	})

	It("is adopted, with its clusterID, by a cluster re-created with the same name", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		first := newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID
		uid := readClaim(ctx, ns).UID
		deleteCluster(ctx, ns)

		again := newCluster(ctx, ns)
		Expect(again.UID).NotTo(Equal(first.UID))
		got := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(got.Status.ClusterID).To(Equal(id), "the same cluster comes back, so its brokers find <data>/<clusterID>/")
		claim := readClaim(ctx, ns)
		Expect(claim.UID).To(Equal(uid), "the retained claim itself, not a new one")
		Expect(claim.OwnerReferences).To(BeEmpty())
		Expect(claim.Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, id))
		Expect(readStatefulSet(ctx, ns).Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("c-data"))
		Eventually(func() []string { return clusterEvents(ctx, ns, again.UID) }).Should(ContainElement(
			"DataClaimAdopted: Adopted the existing claim c-data and its cluster id " + id + "; it is retained, with its data, when this cluster is deleted " +
				"(spec.storage.deleteClaim is false); delete the claim to delete the data, or re-create a cluster called c to use it again"))
	})

	It("is refused when it carries another cluster's id: Degraded, nothing adopted, nothing applied", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID
		before := settledVersions(ctx, ns, 3)

		By("swapping in another cluster's data: the claim now names another cluster id")
		setClusterIDAnnotation(ctx, ns, otherID)
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonDataClaimOfAnotherCluster)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring(
			"claim c-data holds the data of cluster id " + otherID + ", and this cluster's id is " + id))
		Expect(kc.Status.ClusterID).To(Equal(id))
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 4 })
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonDataClaimOfAnotherCluster)
		Consistently(func(g Gomega) {
			g.Expect(readClaim(ctx, ns).Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationClusterID, otherID), "the claim is not rewritten")
			g.Expect(readClaim(ctx, ns).OwnerReferences).To(BeEmpty())
			for key, version := range resourceVersions(ctx, ns, 3) {
				if key != "PersistentVolumeClaim c-data" {
					g.Expect(version).To(Equal(before[key]), key+" is not applied")
				}
			}
			g.Expect(apierrors.IsNotFound(getChild(ctx, ns, "Service c-broker-3", &corev1.Service{}))).To(BeTrue())
		}).WithTimeout(time.Second).Should(Succeed())

		By("restoring the annotation, the cluster goes on")
		setClusterIDAnnotation(ctx, ns, id)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		waitForChildren(ctx, ns, 4)
	})

	It("is refused when paddock did not make it: Degraded, the claim untouched, no child created", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		stranger := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "c-data", Namespace: ns, Labels: map[string]string{"app": "postgres"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}},
			},
		}
		Expect(env.Client.Create(ctx, stranger)).To(Succeed())
		newCluster(ctx, ns)

		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonDataClaimForeign)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring(
			"claim c-data exists but paddock did not make it for this cluster"))
		Expect(kc.Status.ClusterID).To(BeEmpty(), "no id is minted for a cluster that provisions nothing")
		Consistently(func(g Gomega) {
			claim := readClaim(ctx, ns)
			g.Expect(claim.ResourceVersion).To(Equal(stranger.ResourceVersion), "the claim is untouched")
			g.Expect(apierrors.IsNotFound(getChild(ctx, ns, "StatefulSet c-broker", &appsv1.StatefulSet{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(getChild(ctx, ns, "Service c-bootstrap", &corev1.Service{}))).To(BeTrue())
		}).WithTimeout(time.Second).Should(Succeed())

		By("labelling it for the cluster and naming its cluster id, the user hands it over")
		claim := readClaim(ctx, ns)
		claim.Labels = kafkav1alpha1.ClusterLabels("c")
		claim.Annotations = map[string]string{kafkav1alpha1.AnnotationClusterID: otherID}
		Expect(env.Client.Update(ctx, claim)).To(Succeed())
		kc = waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(kc.Status.ClusterID).To(Equal(otherID))
		waitForChildren(ctx, ns, 3)
	})

	It("of an earlier cluster with deleteClaim waits for the garbage collector, then a new claim is made", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.DeleteClaim = true })
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID
		deleteCluster(ctx, ns)

		By("re-creating the cluster before the (absent) garbage collector has deleted the old claim")
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.DeleteClaim = true })
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonDataClaimForeign)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring("belongs to an earlier KafkaCluster c"))

		By("playing the garbage collector")
		removeClaim(ctx, ns)
		kc = waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(kc.Status.ClusterID).NotTo(Equal(id), "the old data was deleted with the old cluster: a new cluster id")
		Eventually(func() *metav1.OwnerReference { return metav1.GetControllerOf(readClaim(ctx, ns)) }).
			Should(HaveField("UID", kc.UID))
	})
})

// setClusterIDAnnotation sets c-data's cluster-id annotation in ns to id, as a user would
// (a merge patch under another field manager).
func setClusterIDAnnotation(ctx context.Context, ns, id string) {
	GinkgoHelper()
	claim := readClaim(ctx, ns)
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Annotations[kafkav1alpha1.AnnotationClusterID] = id
	Expect(env.Client.Patch(ctx, claim, patch, client.FieldOwner("kubectl-annotate"))).To(Succeed())
}
