package v1alpha1_test

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// tableColumns asks the apiserver for resource's server-side table (what kubectl get prints)
// and returns its column names by priority.
func tableColumns(ctx context.Context, namespace, resource string) (names []string, priority map[string]int32) {
	GinkgoHelper()
	table, err := env.Table(ctx, namespace, resource)
	Expect(err).NotTo(HaveOccurred())
	priority = map[string]int32{}
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
		priority[c.Name] = c.Priority
	}
	return names, priority
}

var _ = Describe("CRDs", func() {
	It("default a minimal KafkaCluster to the documented values", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())

		got := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), got)).To(Succeed())
		Expect(got.Spec.Replicas).To(Equal(int32(3)))
		Expect(got.Spec.Listeners).To(Equal([]kafkav1alpha1.Listener{{
			Name: "kafka", Port: 9092, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS,
		}}))
		Expect(got.Spec.Heartbeat.Interval).To(Equal(&metav1.Duration{Duration: time.Second}))
		Expect(got.Spec.Heartbeat.SessionTimeout).To(Equal(&metav1.Duration{Duration: 6 * time.Second}))
		Expect(got.Spec.DrainTimeout).To(Equal(&metav1.Duration{Duration: 60 * time.Second}))
		Expect(got.Spec.Storage.Type).To(Equal(kafkav1alpha1.StoragePersistentClaim))
		Expect(got.Spec.Storage.AccessMode).To(Equal(corev1.ReadWriteMany))
		Expect(got.Spec.Storage.Size.Cmp(resource.MustParse("10Gi"))).To(Equal(0))
		Expect(got.Spec.HeartbeatInterval()).To(Equal(kafkav1alpha1.DefaultHeartbeatInterval), "Go accessors agree with the schema defaults")
		Expect(got.Spec.SessionTimeout()).To(Equal(kafkav1alpha1.DefaultSessionTimeout))
		Expect(got.Spec.DrainTimeoutOrDefault()).To(Equal(kafkav1alpha1.DefaultDrainTimeout))
		Expect(got.Spec.Rack.TopologyKey).To(Equal("topology.kubernetes.io/zone"))
	})

	It("round-trip a fully specified KafkaCluster and its status", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: ns},
			Spec: kafkav1alpha1.KafkaClusterSpec{
				Replicas: 5,
				Image:    "example.com/paddock:v1",
				Listeners: []kafkav1alpha1.Listener{
					{Name: "internal", Port: 9092, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodIP},
					{Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS},
				},
				Storage: kafkav1alpha1.Storage{
					Type: kafkav1alpha1.StoragePersistentClaim, Size: ptr.To(resource.MustParse("1Gi")),
					StorageClassName: ptr.To("nfs"), AccessMode: corev1.ReadWriteMany,
				},
				Heartbeat:    kafkav1alpha1.Heartbeat{Interval: &metav1.Duration{Duration: 500 * time.Millisecond}, SessionTimeout: &metav1.Duration{Duration: 3 * time.Second}},
				DrainTimeout: &metav1.Duration{Duration: 30 * time.Second},
				Rack:         kafkav1alpha1.Rack{TopologyKey: "example.com/rack"},
				Config:       map[string]string{"log.retention.ms": "1000"},
			},
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
		want := kc.Spec.DeepCopy()

		now := metav1.NewTime(time.Now().Truncate(time.Second))
		kc.Status = kafkav1alpha1.KafkaClusterStatus{
			ClusterID: "AAAAAAAAAAAAAAAAAAAAAA",
			Brokers: []kafkav1alpha1.BrokerRow{{
				ID: 0, Pod: "full-broker-0", State: kafkav1alpha1.BrokerFenced, Health: kafkav1alpha1.BrokerDead,
				Reason: kafkav1alpha1.ReasonHeartbeatExpired, Epoch: 2, LastSeen: &now,
			}},
			Counts: kafkav1alpha1.BrokerCounts{Registered: 1, Fenced: 1, Dead: 1},
		}
		Expect(env.Client.Status().Update(ctx, kc)).To(Succeed())

		got := &kafkav1alpha1.KafkaCluster{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kc), got)).To(Succeed())
		Expect(got.Spec.Replicas).To(Equal(want.Replicas))
		Expect(got.Spec.Listeners).To(Equal(want.Listeners))
		Expect(got.Spec.Heartbeat).To(Equal(want.Heartbeat))
		Expect(got.Spec.Config).To(Equal(want.Config))
		Expect(got.Status.Brokers).To(HaveLen(1))
		Expect(got.Status.Brokers[0].LastSeen.Equal(&now)).To(BeTrue())
		Expect(got.Status.Counts.Dead).To(Equal(int32(1)))
	})

	DescribeTable("reject an invalid KafkaCluster spec",
		func(ctx SpecContext, mutate func(*kafkav1alpha1.KafkaClusterSpec), message string) {
			ns := newNamespace(ctx)
			kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns}}
			kc.Spec.Replicas = 3
			mutate(&kc.Spec)
			err := env.Client.Create(ctx, kc)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("heartbeat interval equal to session timeout", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Heartbeat = kafkav1alpha1.Heartbeat{Interval: &metav1.Duration{Duration: 6 * time.Second}, SessionTimeout: &metav1.Duration{Duration: 6 * time.Second}}
		}, "heartbeat.interval must be shorter than heartbeat.sessionTimeout"),
		Entry("heartbeat interval above session timeout", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Heartbeat = kafkav1alpha1.Heartbeat{Interval: &metav1.Duration{Duration: 10 * time.Second}, SessionTimeout: &metav1.Duration{Duration: 6 * time.Second}}
		}, "heartbeat.interval must be shorter than heartbeat.sessionTimeout"),
		Entry("fractional session timeout", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Heartbeat = kafkav1alpha1.Heartbeat{Interval: &metav1.Duration{Duration: time.Second}, SessionTimeout: &metav1.Duration{Duration: 2500 * time.Millisecond}}
		}, "whole number of seconds"),
		Entry("zero replicas", func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = -1 }, "spec.replicas"),
		Entry("two listeners on one port", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners = []kafkav1alpha1.Listener{{Name: "a", Port: 9092}, {Name: "b", Port: 9092}}
		}, "listener ports must be unique"),
		Entry("unknown listener type", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners = []kafkav1alpha1.Listener{{Name: "a", Port: 9092, Type: "Ingress"}}
		}, "spec.listeners[0].type"),
		Entry("port out of range", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners = []kafkav1alpha1.Listener{{Name: "a", Port: 70000}}
		}, "spec.listeners[0].port"),
		Entry("an advertised host template with an unknown placeholder", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners = []kafkav1alpha1.Listener{{Name: "a", Port: 9092, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHostTemplate: "broker-{ordinal}.example.com"}}
		}, "spec.listeners[0].advertisedHostTemplate"),
		Entry("an advertised host template with a character no host has", func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners = []kafkav1alpha1.Listener{{Name: "a", Port: 9092, AdvertisedHostTemplate: "kafka/{id}"}}
		}, "spec.listeners[0].advertisedHostTemplate"),
	)

	It("accepts an advertised host template with every placeholder", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "templated", Namespace: ns}}
		kc.Spec.Listeners = []kafkav1alpha1.Listener{{Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort,
			AdvertisedHostTemplate: "{pod}.{id}.{namespace}.{node}.{nodeAddress}.example.com"}}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
	})

	It("reject replicas 0 sent explicitly", func(ctx SpecContext) {
		// Go's omitempty cannot send replicas: 0 (it would be defaulted to 3), so send JSON.
		ns := newNamespace(ctx)
		body := []byte(fmt.Sprintf(`{"apiVersion":"kafka.paddock.dev/v1alpha1","kind":"KafkaCluster","metadata":{"name":"zero","namespace":%q},"spec":{"replicas":0}}`, ns))
		rc, err := env.RESTClient()
		Expect(err).NotTo(HaveOccurred())
		err = rc.Post().AbsPath("/apis/kafka.paddock.dev/v1alpha1/namespaces", ns, "kafkaclusters").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx).Error()
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("spec.replicas"))
	})

	It("refuse to decrease a KafkaTopic's partitions or move it to another cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kt := &kafkav1alpha1.KafkaTopic{
			ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns},
			Spec:       kafkav1alpha1.KafkaTopicSpec{Cluster: "demo", Partitions: 6},
		}
		Expect(env.Client.Create(ctx, kt)).To(Succeed())

		kt.Spec.Partitions = 8
		Expect(env.Client.Update(ctx, kt)).To(Succeed(), "growing partitions is allowed")

		kt.Spec.Partitions = 4
		err := env.Client.Update(ctx, kt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("partitions cannot be decreased"))

		kt.Spec.Partitions = 8
		kt.Spec.Cluster = "other"
		err = env.Client.Update(ctx, kt)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("cluster is immutable"))
	})

	DescribeTable("refuse a KafkaTopic status that names a partition outside the topic",
		func(ctx SpecContext, partition int32, message string) {
			ns := newNamespace(ctx)
			kt := &kafkav1alpha1.KafkaTopic{
				ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: ns},
				Spec:       kafkav1alpha1.KafkaTopicSpec{Cluster: "demo", Partitions: 3},
			}
			Expect(env.Client.Create(ctx, kt)).To(Succeed())
			kt.Status.Partitions = []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: 1}, {Partition: partition, Leader: 1}}
			err := env.Client.Status().Update(ctx, kt)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))

			kt.Status.Partitions = []kafkav1alpha1.PartitionStatus{{Partition: 0, Leader: 1}, {Partition: 2, Leader: 0}}
			Expect(env.Client.Status().Update(ctx, kt)).To(Succeed(), "partitions below spec.partitions are fine")
		},
		Entry("the largest int32 (it overflowed the brokers' view)", int32(2147483647), "status.partitions[1].partition"),
		Entry("above the 10000 partitions a topic can have", int32(10000), "status.partitions[1].partition"),
		Entry("negative", int32(-1), "status.partitions[1].partition"),
		Entry("not below spec.partitions", int32(3), "status.partitions may only name partitions below spec.partitions"),
	)

	DescribeTable("give kubectl get the promised columns",
		func(ctx SpecContext, resource string, want []string, wide []string) {
			ns := newNamespace(ctx)
			names, priority := tableColumns(ctx, ns, resource)
			Expect(names).To(ContainElements(append(append([]string{}, want...), wide...)))
			for _, n := range want {
				Expect(priority[n]).To(BeZero(), "column %s should show without -o wide", n)
			}
			for _, n := range wide {
				Expect(priority[n]).To(Equal(int32(1)), "column %s should show only with -o wide", n)
			}
			Expect(names[len(names)-1]).To(Equal("Age"), "Age comes last")
		},
		Entry("kafkaclusters", "kafkaclusters", []string{"Name", "Ready", "Brokers", "Fenced", "Alive", "Partitions", "Age"}, []string{"Topics", "Groups", "Transactions", "Cluster-ID", "Secured"}),
		Entry("brokers", "brokers", []string{"Name", "Cluster", "ID", "State", "Health", "Rack", "Last-Seen", "Age"}, []string{"Epoch", "Pod", "Node", "Recovery"}),
		Entry("kafkatopics", "kafkatopics", []string{"Name", "Cluster", "Topic", "Partitions", "Ready", "Age"}, []string{"Topic-ID", "Reason"}),
		Entry("kafkausers", "kafkausers", []string{"Name", "Cluster", "Authentication", "ACLs", "Ready", "Age"}, []string{"Principal"}),
	)

	DescribeTable("refuse listener security that cannot hold",
		func(ctx SpecContext, l kafkav1alpha1.Listener, message string) {
			ns := newNamespace(ctx)
			kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
				Spec: kafkav1alpha1.KafkaClusterSpec{Listeners: []kafkav1alpha1.Listener{l}}}
			err := env.Client.Create(ctx, kc)
			if message == "" {
				Expect(err).NotTo(HaveOccurred())
				return
			}
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("PLAIN without TLS would send the password in the clear",
			kafkav1alpha1.Listener{Name: "k", Port: 9092, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationPlain}}, "need tls: true"),
		Entry("mutual TLS without TLS",
			kafkav1alpha1.Listener{Name: "k", Port: 9092, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationTLS}}, "need tls: true"),
		Entry("SCRAM without TLS is allowed (the exchange never sends the password)",
			kafkav1alpha1.Listener{Name: "k", Port: 9092, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationScramSHA256}}, ""),
		Entry("PLAIN over TLS is allowed",
			kafkav1alpha1.Listener{Name: "k", Port: 9092, TLS: true, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationPlain}}, ""),
	)

	It("refuse a renewal window as long as the validity", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec: kafkav1alpha1.KafkaClusterSpec{Certificates: kafkav1alpha1.Certificates{
				Validity: &metav1.Duration{Duration: time.Hour}, RenewBefore: &metav1.Duration{Duration: time.Hour}}}}
		err := env.Client.Create(ctx, kc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("renewBefore must be shorter"))
	})

	It("default a KafkaUser's ACLs and keep its cluster", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		u := &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: ns}, Spec: kafkav1alpha1.KafkaUserSpec{
			Cluster:        "c",
			Authentication: &kafkav1alpha1.UserAuthentication{Type: kafkav1alpha1.UserScramSHA512},
			Authorization: &kafkav1alpha1.UserAuthorization{ACLs: []kafkav1alpha1.ACLRule{{
				Resource: kafkav1alpha1.ACLResource{Type: kafkav1alpha1.ACLTopic, Name: "orders"}, Operations: []kafkav1alpha1.ACLOperation{"Read"}}}},
		}}
		Expect(env.Client.Create(ctx, u)).To(Succeed())
		got := &kafkav1alpha1.KafkaUser{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(u), got)).To(Succeed())
		rule := got.Spec.Authorization.ACLs[0]
		Expect(rule.Type).To(Equal(kafkav1alpha1.ACLAllow))
		Expect(rule.Host).To(Equal("*"))
		Expect(rule.Resource.PatternType).To(Equal(kafkav1alpha1.ACLLiteral))
		got.Spec.Cluster = "other"
		err := env.Client.Update(ctx, got)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("cluster is immutable"))

		bad := &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: ns}, Spec: kafkav1alpha1.KafkaUserSpec{
			Cluster: "c",
			Authorization: &kafkav1alpha1.UserAuthorization{ACLs: []kafkav1alpha1.ACLRule{{
				Resource: kafkav1alpha1.ACLResource{Type: kafkav1alpha1.ACLTopic}, Operations: []kafkav1alpha1.ACLOperation{"Read"}}}},
		}}
		err = env.Client.Create(ctx, bad)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("needs a name"))
	})
})
