package kafkacluster

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// brokerEnv is the broker container's environment as name → value.
func brokerEnv(sts *appsv1.StatefulSet) map[string]string {
	out := map[string]string{}
	for _, e := range sts.Spec.Template.Spec.Containers[0].Env {
		out[e.Name] = e.Value
	}
	return out
}

// renderLikeAnOlderOperator applies the StatefulSet as another operator version could have
// rendered the same inputs — an environment variable this one does not set — under the
// operator's field owner, keeping or dropping the inputs digest, as an upgrade leaves it for
// the new operator.
func renderLikeAnOlderOperator(ctx context.Context, ns string, keepDigest bool) {
	GinkgoHelper()
	sts := readStatefulSet(ctx, ns)
	sts.ManagedFields, sts.ResourceVersion, sts.UID, sts.Generation = nil, "", "", 0
	sts.TypeMeta = metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet"}
	sts.Spec.Template.Spec.Containers[0].Env = append(sts.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: "RENDERED_BY", Value: "an-older-operator"})
	if !keepDigest {
		delete(sts.Annotations, kafkav1alpha1.AnnotationPodTemplateInputs)
	}
	Expect(apply(ctx, env.Client, sts)).To(Succeed())
}

var _ = Describe("The broker pod template", Ordered, func() {
	var m *testManager

	BeforeAll(func() {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
	})

	It("carries spec.template's scheduling, pull secrets, security contexts and metadata to the StatefulSet", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		createClusterWith(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Template = goldenTemplateCluster().Spec.Template })
		waitForChildren(ctx, ns, 3)

		sts := readStatefulSet(ctx, ns)
		pod := sts.Spec.Template
		want := goldenTemplateCluster().Spec.Template
		Expect(pod.Labels).To(HaveKeyWithValue("team", "streaming"))
		Expect(pod.Labels).To(HaveKeyWithValue(kafkav1alpha1.LabelCluster, "c"), "the selector's labels cannot be overridden")
		Expect(pod.Annotations).To(HaveKeyWithValue("prometheus.io/scrape", "true"))
		Expect(pod.Spec.NodeSelector).To(Equal(want.NodeSelector))
		Expect(pod.Spec.Tolerations).To(Equal(want.Tolerations))
		Expect(pod.Spec.Affinity).To(Equal(want.Affinity))
		Expect(pod.Spec.TopologySpreadConstraints).To(Equal(want.TopologySpreadConstraints))
		Expect(pod.Spec.PriorityClassName).To(Equal("kafka-critical"))
		Expect(pod.Spec.ImagePullSecrets).To(Equal(want.ImagePullSecrets))
		Expect(pod.Spec.SecurityContext.FSGroup).To(Equal(ptr.To[int64](2000)))
		Expect(pod.Spec.SecurityContext.RunAsUser).To(BeNil(), "the template's security context replaces the default whole")
		Expect(pod.Spec.Containers[0].SecurityContext.Capabilities).To(BeNil())
	})

	It("gives brokers without resources the default ones and GOMEMLIMIT at 90% of the memory limit", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		sts := readStatefulSet(ctx, ns)
		res := sts.Spec.Template.Spec.Containers[0].Resources
		Expect(res.Requests.Cpu().String()).To(Equal("500m"))
		Expect(res.Limits.Memory().String()).To(Equal("1Gi"))
		Expect(brokerEnv(sts)).To(HaveKeyWithValue("GOMEMLIMIT", "966367620"))

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Resources = corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}}
		})
		Eventually(func() map[string]string { return brokerEnv(readStatefulSet(ctx, ns)) }).
			Should(HaveKeyWithValue("GOMEMLIMIT", "1932735240"))
	})

	It("keeps the pod template another operator version rendered until the image or the pod's spec changes", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		// The operator upgraded from is gone before this one starts: stopped around the write,
		// no reconcile that read the StatefulSet before it can apply after it.
		upgradeFrom := func(keepDigest bool) {
			GinkgoHelper()
			m.Stop()
			renderLikeAnOlderOperator(ctx, ns, keepDigest)
			m = startTestManager()
		}

		By("the same inputs: the running template stays, though this operator renders it otherwise")
		upgradeFrom(true)
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 4 }) // a reconcile that touches the StatefulSet
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).Should(Equal(int32(4)))
		Consistently(func() map[string]string { return brokerEnv(readStatefulSet(ctx, ns)) }).
			WithTimeout(2 * time.Second).Should(HaveKeyWithValue("RENDERED_BY", "an-older-operator"))

		By("a new broker image: the template is rendered anew")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Image = "example.com/paddock:v2" })
		Eventually(func(g Gomega) {
			sts := readStatefulSet(ctx, ns)
			g.Expect(sts.Spec.Template.Spec.Containers[0].Image).To(Equal("example.com/paddock:v2"))
			g.Expect(brokerEnv(sts)).NotTo(HaveKey("RENDERED_BY"))
		}).Should(Succeed())

		By("a StatefulSet without the digest (an operator before it) that runs the same image and arguments is adopted as it is")
		upgradeFrom(false)
		Eventually(func() map[string]string { return readStatefulSet(ctx, ns).Annotations }).
			Should(HaveKey(kafkav1alpha1.AnnotationPodTemplateInputs))
		Expect(brokerEnv(readStatefulSet(ctx, ns))).To(HaveKeyWithValue("RENDERED_BY", "an-older-operator"))

		By("a field that reaches the pod changes: rendered anew")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Template.PriorityClassName = "high" })
		Eventually(func(g Gomega) {
			sts := readStatefulSet(ctx, ns)
			g.Expect(sts.Spec.Template.Spec.PriorityClassName).To(Equal("high"))
			g.Expect(brokerEnv(sts)).NotTo(HaveKey("RENDERED_BY"))
		}).Should(Succeed())
	})
})
