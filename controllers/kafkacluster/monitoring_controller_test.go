package kafkacluster

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// readPodMonitor reads c's PodMonitor in ns from the API server.
func readPodMonitor(ctx context.Context, ns string) (*unstructured.Unstructured, error) {
	pm := &unstructured.Unstructured{}
	pm.SetGroupVersionKind(podMonitorGVK())
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.PodMonitorName("c")}, pm)
	return pm, err
}

// The CRDs are installed in the middle of the container and removed at its end: the suite's
// other specs run on an API server without them, as most clusters are.
var _ = Describe("The operator's PodMonitor", Ordered, func() {
	var m *testManager
	var ns string

	BeforeAll(func(ctx SpecContext) {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
		ns = newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec: kafkav1alpha1.KafkaClusterSpec{
				Replicas:   1,
				Monitoring: &kafkav1alpha1.Monitoring{PodMonitor: &kafkav1alpha1.PodMonitorSpec{Enabled: true}},
			},
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
	})

	It("is reported missing, and the brokers provisioned, while the API server has no PodMonitor kind", func(ctx SpecContext) {
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionMonitored, metav1.ConditionFalse, kafkav1alpha1.ReasonPrometheusOperatorMissing)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionMonitored).Message).To(ContainSubstring("install the Prometheus Operator's CRDs"))
		Expect(kc.Spec.Monitoring.PodMonitor.Interval).To(Equal(&metav1.Duration{Duration: defaultScrapeInterval}), "the CRD's default interval")
		waitForChildren(ctx, ns, 1)
	})

	It("is applied once the Prometheus Operator's CRDs exist, with the spec's labels and interval", func(ctx SpecContext) {
		uninstall, err := env.InstallMonitoringCRDs()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(uninstall()).To(Succeed()) })

		// A missing CRD sends no event; the operator looks again every five minutes. A spec
		// change is a reconcile now.
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Monitoring.PodMonitor.Labels = map[string]string{"release": "kube-prometheus"}
			s.Monitoring.PodMonitor.Interval = &metav1.Duration{Duration: 30e9}
		})
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionMonitored, metav1.ConditionTrue, kafkav1alpha1.ReasonPodMonitorApplied)
		pm, err := readPodMonitor(ctx, ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(metav1.IsControlledBy(pm, readCluster(ctx, ns))).To(BeTrue(), "owners %v", pm.GetOwnerReferences())
		Expect(pm.GetLabels()).To(HaveKeyWithValue("release", "kube-prometheus"))
		endpoints, _, err := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
		Expect(err).NotTo(HaveOccurred())
		Expect(endpoints).To(HaveLen(1))
		Expect(endpoints[0]).To(HaveKeyWithValue("interval", "30s"))
		Expect(endpoints[0]).To(HaveKeyWithValue("port", kafkav1alpha1.HealthPortName))
	})

	It("is deleted, and the condition removed, when the spec turns it off", func(ctx SpecContext) {
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Monitoring.PodMonitor.Enabled = false })
		Eventually(func(g Gomega) {
			_, err := readPodMonitor(ctx, ns)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "PodMonitor still there: %v", err)
			kc := readCluster(ctx, ns)
			g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
			g.Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionMonitored)).To(BeNil())
		}).Should(Succeed())
	})
})
