package v1alpha1_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// What the provisioning reconciler used to find only at reconcile time (the health-port
// clash, the NodePort/LoadBalancer mix, a storage change, a claim made to shrink) is refused by the API server when
// the spec is written, with the reconciler's own words (docs/security.md, "Strict inputs").
var _ = Describe("Admission-time validation of a KafkaCluster", func() {
	external := func(name string, port int32, typ kafkav1alpha1.ListenerType, svc *kafkav1alpha1.ListenerService) kafkav1alpha1.Listener {
		return kafkav1alpha1.Listener{Name: name, Port: port, Type: typ, Service: svc}
	}

	DescribeTable("refuses a listener spec the brokers could not serve",
		func(ctx SpecContext, listeners []kafkav1alpha1.Listener, message string) {
			kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: newNamespace(ctx)}}
			kc.Spec.Listeners = listeners
			err := env.Client.Create(ctx, kc)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("a listener on the health port", []kafkav1alpha1.Listener{{Name: "kafka", Port: kafkav1alpha1.HealthPort}},
			"listener port 9644 is the health port"),
		Entry("a listener named like the health port", []kafkav1alpha1.Listener{{Name: kafkav1alpha1.HealthPortName, Port: 9092}},
			"listener name health is reserved"),
		Entry("NodePort and LoadBalancer listeners mixed", []kafkav1alpha1.Listener{
			external("np", 9094, kafkav1alpha1.ListenerNodePort, nil), external("lb", 9095, kafkav1alpha1.ListenerLoadBalancer, nil),
		}, "listeners mix NodePort and LoadBalancer types"),
		Entry("service settings on an Internal listener", []kafkav1alpha1.Listener{
			external("kafka", 9092, kafkav1alpha1.ListenerInternal, &kafkav1alpha1.ListenerService{ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal}),
		}, "service applies to NodePort and LoadBalancer listeners only"),
		Entry("source ranges on a NodePort listener", []kafkav1alpha1.Listener{
			external("np", 9094, kafkav1alpha1.ListenerNodePort, &kafkav1alpha1.ListenerService{LoadBalancerSourceRanges: []string{"10.0.0.0/8"}}),
		}, "loadBalancerSourceRanges applies to LoadBalancer listeners only"),
		Entry("a source range that is no CIDR", []kafkav1alpha1.Listener{
			external("lb", 9094, kafkav1alpha1.ListenerLoadBalancer, &kafkav1alpha1.ListenerService{LoadBalancerSourceRanges: []string{"10.0.0.1"}}),
		}, "loadBalancerSourceRanges must be CIDRs"),
		Entry("an unknown external traffic policy", []kafkav1alpha1.Listener{
			external("np", 9094, kafkav1alpha1.ListenerNodePort, &kafkav1alpha1.ListenerService{ExternalTrafficPolicy: "Nearest"}),
		}, "externalTrafficPolicy"),
		Entry("two external listeners with different service settings", []kafkav1alpha1.Listener{
			external("a", 9094, kafkav1alpha1.ListenerLoadBalancer, &kafkav1alpha1.ListenerService{LoadBalancerSourceRanges: []string{"10.0.0.0/8"}}),
			external("b", 9095, kafkav1alpha1.ListenerLoadBalancer, nil),
		}, "every NodePort or LoadBalancer listener must give the same service settings"),
	)

	It("accepts per-listener exposure settings and network peers, and enables the NetworkPolicy by default", func(ctx SpecContext) {
		svc := &kafkav1alpha1.ListenerService{
			Annotations:              map[string]string{"service.beta.kubernetes.io/aws-load-balancer-internal": "true"},
			LoadBalancerSourceRanges: []string{"203.0.113.0/24", "2001:db8::/32"},
			ExternalTrafficPolicy:    corev1.ServiceExternalTrafficPolicyLocal,
		}
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "exposed", Namespace: newNamespace(ctx)}}
		kc.Spec.Listeners = []kafkav1alpha1.Listener{
			{Name: "kafka", Port: 9092, AllowFrom: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "orders"}}}}},
			external("a", 9094, kafkav1alpha1.ListenerLoadBalancer, svc),
			external("b", 9095, kafkav1alpha1.ListenerLoadBalancer, svc.DeepCopy()),
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
		got := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), got)).To(Succeed())
		Expect(got.Spec.Listeners[1].Service).To(Equal(svc))
		Expect(got.Spec.NetworkPolicy.Enabled).To(Equal(ptr.To(true)))
	})

	// A cluster holds data once status.clusterID is set; before that its storage may change
	// (a spec being fixed to match a retained claim it adopts).
	DescribeTable("refuses a storage change once the cluster holds data",
		func(ctx SpecContext, from kafkav1alpha1.Storage, change func(*kafkav1alpha1.Storage), message string) {
			kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: newNamespace(ctx)}}
			kc.Spec.Storage = from
			Expect(env.Client.Create(ctx, kc)).To(Succeed())

			edited := kc.DeepCopy()
			change(&edited.Spec.Storage)
			Expect(env.Client.Update(ctx, edited)).To(Succeed(), "no clusterID yet: the spec may still change")
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
			kc.Spec.Storage = *from.DeepCopy()
			Expect(env.Client.Update(ctx, kc)).To(Succeed())

			kc.Status.ClusterID = "AAAAAAAAAAAAAAAAAAAAAA"
			Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
			change(&kc.Spec.Storage)
			err := env.Client.Update(ctx, kc)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("class", kafkav1alpha1.Storage{StorageClassName: ptr.To("nfs")},
			func(s *kafkav1alpha1.Storage) { s.StorageClassName = ptr.To("ceph") }, "spec.storage.storageClassName cannot change"),
		Entry("class removed", kafkav1alpha1.Storage{StorageClassName: ptr.To("nfs")},
			func(s *kafkav1alpha1.Storage) { s.StorageClassName = nil }, "spec.storage.storageClassName cannot change"),
		Entry("access mode", kafkav1alpha1.Storage{},
			func(s *kafkav1alpha1.Storage) { s.AccessMode = corev1.ReadWriteOnce }, "spec.storage.accessMode cannot change"),
		Entry("type", kafkav1alpha1.Storage{},
			func(s *kafkav1alpha1.Storage) { s.Type = kafkav1alpha1.StorageEphemeral }, "spec.storage.type cannot change"),
	)

	It("lets a cluster with data keep its storage, name a class it had none for, change deleteClaim, or resize ephemeral storage", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		withData := func(kc *kafkav1alpha1.KafkaCluster) {
			GinkgoHelper()
			Expect(env.Client.Create(ctx, kc)).To(Succeed())
			kc.Status.ClusterID = "AAAAAAAAAAAAAAAAAAAAAA"
			Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
		}
		claim := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "claim", Namespace: ns}}
		claim.Spec.Storage.Size = ptr.To(resource.MustParse("1Gi"))
		withData(claim)
		claim.Spec.Storage.Size = ptr.To(resource.MustParse("1024Mi")) // the same quantity, written otherwise
		claim.Spec.Storage.StorageClassName = ptr.To("standard")
		claim.Spec.Storage.DeleteClaim = true
		claim.Spec.Replicas = 5
		Expect(env.Client.Update(ctx, claim)).To(Succeed())

		ephemeral := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "ephemeral", Namespace: ns}}
		ephemeral.Spec.Storage = kafkav1alpha1.Storage{Type: kafkav1alpha1.StorageEphemeral, Size: ptr.To(resource.MustParse("1Gi"))}
		withData(ephemeral)
		ephemeral.Spec.Storage.Size = ptr.To(resource.MustParse("2Gi"))
		ephemeral.Spec.Heartbeat.SessionTimeout = &metav1.Duration{Duration: 9 * time.Second}
		Expect(env.Client.Update(ctx, ephemeral)).To(Succeed())
	})

	// status.storageSize is what the data claim asks for; growing spec.storage.size is an
	// expansion, setting it below the claim a shrink no claim can do.
	It("refuses a storage size below the data claim's, and lets it grow or go back to the claim's", func(ctx SpecContext) {
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: newNamespace(ctx)}}
		kc.Spec.Storage.Size = ptr.To(resource.MustParse("10Gi"))
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
		kc.Spec.Storage.Size = ptr.To(resource.MustParse("1Gi"))
		Expect(env.Client.Update(ctx, kc)).To(Succeed(), "no claim yet: any size")

		kc.Status.StorageSize = ptr.To(resource.MustParse("1Gi"))
		Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
		kc.Spec.Storage.Size = ptr.To(resource.MustParse("2Gi"))
		Expect(env.Client.Update(ctx, kc)).To(Succeed(), "growing is an expansion")
		kc.Spec.Storage.Size = ptr.To(resource.MustParse("1024Mi"))
		Expect(env.Client.Update(ctx, kc)).To(Succeed(), "back to the claim's size (an expansion the class refused)")

		kc.Spec.Storage.Size = ptr.To(resource.MustParse("512Mi"))
		err := env.Client.Update(ctx, kc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.storage.size cannot be smaller than the data claim (status.storageSize)"))

		By("a status write never trips the rule, whatever the spec says")
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), kc)).To(Succeed())
		kc.Status.StorageSize = ptr.To(resource.MustParse("4Gi")) // a claim larger than the spec, e.g. one being adopted
		Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
		kc.Status.Replicas = 2
		Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())
		kc.Spec.Replicas = 5
		Expect(env.Client.Update(ctx, kc)).To(Succeed(), "a spec edit that leaves the size alone")
	})
})
