package kafkacluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// What a cluster exposes, as the API server holds it: external Services with only their
// listeners' ports and settings, a ClusterIP bootstrap Service for the internal listeners
// beside them, and the NetworkPolicy, on by default and gone when the spec opts out.
var _ = Describe("Listener exposure", Ordered, func() {
	var m *testManager

	BeforeAll(func() {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
	})

	service := func(ctx SpecContext, ns, name string) func() (*corev1.Service, error) {
		return func() (*corev1.Service, error) {
			svc := &corev1.Service{}
			return svc, env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc)
		}
	}
	portNames := func(svc *corev1.Service) []string {
		var names []string
		for _, p := range svc.Spec.Ports {
			names = append(names, p.Name)
		}
		return names
	}

	It("gives a NodePort listener Services of its own port and settings, and the internal listener its own bootstrap", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{}
		kc.Name, kc.Namespace, kc.Spec.Replicas = "c", ns, 2
		kc.Spec.Listeners = []kafkav1alpha1.Listener{
			{Name: "kafka", Port: 9092},
			{Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort, Service: &kafkav1alpha1.ListenerService{
				Annotations: map[string]string{"example.com/lb": "yes"}, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			}},
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())

		for _, name := range []string{"c-bootstrap", "c-broker-0", "c-broker-1"} {
			Eventually(service(ctx, ns, name)).Should(And(
				HaveField("Spec.Type", corev1.ServiceTypeNodePort),
				WithTransform(portNames, Equal([]string{"external"})),
				HaveField("Spec.ExternalTrafficPolicy", corev1.ServiceExternalTrafficPolicyLocal),
				HaveField("Annotations", HaveKeyWithValue("example.com/lb", "yes")),
			), name+" carries the external listener only")
		}
		Eventually(service(ctx, ns, "c-bootstrap-internal")).Should(And(
			HaveField("Spec.Type", corev1.ServiceTypeClusterIP),
			WithTransform(portNames, Equal([]string{"kafka"})),
		))
		Eventually(func() []kafkav1alpha1.ListenerStatus { return readCluster(ctx, ns).Status.Listeners }).Should(ContainElement(kafkav1alpha1.ListenerStatus{
			Name: "kafka", Type: kafkav1alpha1.ListenerInternal, Bootstrap: "c-bootstrap-internal." + ns + ".svc:9092"}))

		By("dropping the external listener, the internal bootstrap Service goes and c-bootstrap is the internal listener's again")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Listeners = s.Listeners[:1] })
		Eventually(func() bool {
			_, err := service(ctx, ns, "c-bootstrap-internal")()
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Eventually(service(ctx, ns, "c-bootstrap")).Should(And(
			HaveField("Spec.Type", corev1.ServiceTypeClusterIP),
			WithTransform(portNames, Equal([]string{"kafka"})),
		))
	})

	It("keeps a NetworkPolicy by default and deletes it when the spec opts out", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		policy := func() error {
			return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-broker"}, &networkingv1.NetworkPolicy{})
		}
		Eventually(policy).Should(Succeed())

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.NetworkPolicy.Enabled = ptr.To(false) })
		Eventually(func() bool { return apierrors.IsNotFound(policy()) }).Should(BeTrue())

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.NetworkPolicy.Enabled = nil })
		Eventually(policy).Should(Succeed(), "back on with the default")
	})
})
