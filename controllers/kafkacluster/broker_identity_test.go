package kafkacluster

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/types"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// What a broker's identity may write, as the API server decides it: the broker Role the
// provisioning reconciler grants, narrowed by config/admission's ValidatingAdmissionPolicy to
// the pod's own heartbeat Lease and its own cluster's KafkaTopics (docs/security.md, "A broker
// speaks only for itself"). The identities are impersonated with the pod binding a projected
// token carries (userInfo.extra).
var _ = Describe("A broker's identity", Ordered, func() {
	var m *testManager

	BeforeAll(func(ctx SpecContext) {
		m = startTestManager()
		DeferCleanup(func() { m.Stop() })
		Expect(env.InstallAdmission(ctx)).To(Succeed())
	})

	// as is a client acting as cluster's broker ServiceAccount with a token bound to pod
	// (uid "uid-<pod>"); an empty pod is a token bound to no pod.
	as := func(ns, cluster, pod string) client.Client {
		GinkgoHelper()
		c, err := client.New(env.PodIdentity(ns, kafkav1alpha1.StatefulSetName(cluster), pod, "uid-"+pod), client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		return c
	}
	// lease is broker id's heartbeat Lease of cluster as that broker writes it
	// (docs/registry.md, "Heartbeat Lease"), owned by kc.
	lease := func(kc *kafkav1alpha1.KafkaCluster, id int32) *coordinationv1.Lease {
		pod := kafkav1alpha1.BrokerPodName(kc.Name, id)
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.LeaseName(kc.Name, id), Namespace: kc.Namespace,
				Labels:          kafkav1alpha1.BrokerLabels(kc.Name, id),
				OwnerReferences: []metav1.OwnerReference{{APIVersion: kafkav1alpha1.GroupVersion.String(), Kind: "KafkaCluster", Name: kc.Name, UID: kc.UID}},
				Annotations:     map[string]string{kafkav1alpha1.AnnotationHealthy: "true", kafkav1alpha1.AnnotationDraining: "false"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(pod + "_uid-" + pod), LeaseDurationSeconds: ptr.To[int32](6),
				RenewTime: ptr.To(metav1.NowMicro()), LeaseTransitions: ptr.To[int32](0)},
		}
	}
	// renew renews Lease l as it is stored, writing with writer.
	renew := func(ctx SpecContext, writer client.Client, l *coordinationv1.Lease) error {
		GinkgoHelper()
		stored := &coordinationv1.Lease{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(l), stored)).To(Succeed())
		stored.Spec.RenewTime = ptr.To(metav1.NowMicro())
		return writer.Update(ctx, stored)
	}
	topic := func(ns, name, cluster string) *kafkav1alpha1.KafkaTopic {
		return &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: kafkav1alpha1.ClusterLabels(cluster)},
			Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: cluster, TopicName: name, Partitions: 1}}
	}
	// refused expects err to be the API server's Forbidden, saying what.
	// refused expects a Forbidden error that says one of what: a write two bindings refuse
	// (one per cluster's params) is reported with whichever the apiserver evaluated first.
	refused := func(err error, what ...string) {
		GinkgoHelper()
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		says := make([]types.GomegaMatcher, len(what))
		for i, w := range what {
			says[i] = ContainSubstring(w)
		}
		Expect(err.Error()).To(Or(says...))
	}
	user := func(ns, name, cluster string) *kafkav1alpha1.KafkaUser {
		return &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: kafkav1alpha1.ClusterLabels(cluster)},
			Spec: kafkav1alpha1.KafkaUserSpec{Cluster: cluster}}
	}
	// twoClusters makes clusters c and d of three brokers in a new namespace (with
	// spec.authorization when secured: their brokers then write KafkaUsers too) and waits
	// for their broker RoleBindings.
	twoClusters := func(ctx SpecContext, secured ...bool) (c, d *kafkav1alpha1.KafkaCluster) {
		GinkgoHelper()
		ns := newNamespace(ctx)
		for _, name := range []string{"c", "d"} {
			kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: kafkav1alpha1.KafkaClusterSpec{Replicas: 3}}
			if len(secured) > 0 && secured[0] {
				kc.Spec.Authorization = &kafkav1alpha1.Authorization{Type: kafkav1alpha1.AuthorizationSimple}
			}
			Expect(env.Client.Create(ctx, kc)).To(Succeed())
			Eventually(func() error {
				return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.StatefulSetName(name)}, &rbacv1.RoleBinding{})
			}).Should(Succeed())
			if name == "c" {
				c = kc
			} else {
				d = kc
			}
		}
		return c, d
	}

	It("writes its own Lease and no peer's, and cannot make one up", func(ctx SpecContext) {
		c, d := twoClusters(ctx)
		ns := c.Namespace
		broker1 := as(ns, "c", kafkav1alpha1.BrokerPodName("c", 1))
		Expect(env.Client.Create(ctx, lease(c, 2))).To(Succeed(), "broker 2's Lease, as broker 2 wrote it")
		Expect(env.Client.Create(ctx, lease(d, 0))).To(Succeed())

		By("updating broker 2's Lease as broker 1: refused once the policy is loaded")
		Eventually(func() error { return renew(ctx, broker1, lease(c, 2)) }).Should(MatchError(ContainSubstring("broker pod c-broker-1 may write only its own heartbeat Lease c-broker-1, not c-broker-2")))

		By("its own Lease is its to create and renew")
		own := lease(c, 1)
		Expect(broker1.Create(ctx, own)).To(Succeed())
		own.Spec.RenewTime = ptr.To(metav1.NowMicro())
		own.Annotations[kafkav1alpha1.AnnotationDraining] = "true"
		Expect(broker1.Update(ctx, own)).To(Succeed())

		for _, tc := range []struct {
			what  string
			write func() error
			says  []string
		}{
			{"patch a peer's Lease (the Role grants no patch)", func() error {
				return broker1.Patch(ctx, lease(c, 2), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"kafka.paddock.dev/healthy":"false"}}}`)))
			}, []string{`cannot patch resource "leases"`}},
			{"create the Lease of a broker that does not exist", func() error { return broker1.Create(ctx, lease(c, 7)) }, []string{"not c-broker-7"}},
			{"create another cluster's Lease", func() error { return broker1.Create(ctx, lease(d, 1)) }, []string{"not d-broker-1", "heartbeat Lease d-broker-1 of cluster d is written only by broker pod d-broker-1"}},
			{"label its own Lease as another broker's", func() error {
				l := own.DeepCopy()
				l.Labels[kafkav1alpha1.LabelBrokerID] = "2"
				return broker1.Update(ctx, l)
			}, []string{"must be labelled kafka.paddock.dev/cluster=c and kafka.paddock.dev/broker-id=1"}},
			{"label its own Lease as another cluster's", func() error {
				l := own.DeepCopy()
				l.Labels[kafkav1alpha1.LabelCluster] = "d"
				return broker1.Update(ctx, l)
			}, []string{"must be labelled"}},
			{"hold its own Lease as another pod", func() error {
				l := own.DeepCopy()
				l.Spec.HolderIdentity = ptr.To("c-broker-2_uid-c-broker-2")
				return broker1.Update(ctx, l)
			}, []string{"may be held only by c-broker-1_uid-c-broker-1"}},
			{"give its own Lease another owner", func() error {
				l := own.DeepCopy()
				l.OwnerReferences = []metav1.OwnerReference{{APIVersion: kafkav1alpha1.GroupVersion.String(), Kind: "KafkaCluster", Name: "d", UID: d.UID}}
				return broker1.Update(ctx, l)
			}, []string{"may be owned only by KafkaCluster c"}},
			{"write a Lease with a token bound to no pod", func() error {
				l := own.DeepCopy()
				l.Spec.RenewTime = ptr.To(metav1.NowMicro())
				return as(ns, "c", "").Update(ctx, l)
			}, []string{"writes Leases only with a token bound to one of its broker pods"}},
			{"write a Lease with a token bound to a pod that is no broker of its cluster", func() error {
				return as(ns, "c", "d-broker-1").Create(ctx, lease(d, 1))
			}, []string{"writes Leases only with a token bound to one of its broker pods", "heartbeat Lease d-broker-1 of cluster d is written only by broker pod d-broker-1"}},
		} {
			By("refusing to " + tc.what)
			refused(tc.write(), tc.says...)
		}
		peer := &coordinationv1.Lease{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(lease(c, 2)), peer)).To(Succeed())
		Expect(peer.Annotations).To(HaveKeyWithValue(kafkav1alpha1.AnnotationHealthy, "true"), "broker 2's Lease says what broker 2 wrote")
	})

	It("writes its own cluster's KafkaTopics and no other's, while users' writes are unaffected", func(ctx SpecContext) {
		c, _ := twoClusters(ctx)
		ns := c.Namespace
		broker1 := as(ns, "c", kafkav1alpha1.BrokerPodName("c", 1))
		others := topic(ns, "d.orders", "d")
		Expect(env.Client.Create(ctx, others)).To(Succeed())

		By("creating a KafkaTopic of another cluster: refused once the policy is loaded")
		Eventually(func() error { return broker1.Create(ctx, topic(ns, "c.payments", "d")) }).
			Should(MatchError(ContainSubstring("the brokers of cluster c may write only its KafkaTopics, not c.payments of cluster d")))

		By("its own cluster's topics are its to create, change and delete (the admin APIs)")
		mine := topic(ns, "c.orders", "c")
		Expect(broker1.Create(ctx, mine)).To(Succeed())
		mine.Spec.Partitions = 3
		Expect(broker1.Update(ctx, mine)).To(Succeed())

		for _, tc := range []struct {
			what  string
			write func() error
		}{
			{"change another cluster's topic", func() error {
				t := &kafkav1alpha1.KafkaTopic{}
				Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(others), t)).To(Succeed())
				t.Spec.Partitions = 9
				return broker1.Update(ctx, t)
			}},
			{"delete another cluster's topic", func() error { return broker1.Delete(ctx, others) }},
			{"create a topic of its cluster labelled as another's", func() error {
				t := topic(ns, "c.mislabelled", "c")
				t.Labels[kafkav1alpha1.LabelCluster] = "d"
				return broker1.Create(ctx, t)
			}},
		} {
			By("refusing to " + tc.what)
			refused(tc.write(), "the brokers of cluster c may write only its KafkaTopics")
		}
		Expect(broker1.Delete(ctx, mine)).To(Succeed())

		By("cluster d's brokers write d's topics; a user writes any")
		Expect(as(ns, "d", kafkav1alpha1.BrokerPodName("d", 0)).Create(ctx, topic(ns, "d.payments", "d"))).To(Succeed())
		t := &kafkav1alpha1.KafkaTopic{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(others), t)).To(Succeed())
		t.Spec.Partitions = 4
		Expect(env.Client.Update(ctx, t)).To(Succeed())
		Expect(env.Client.Create(ctx, topic(ns, "user-topic", "c"))).To(Succeed())
	})

	It("writes its own cluster's KafkaUsers (CreateAcls, DeleteAcls) and no other's, and never deletes one", func(ctx SpecContext) {
		c, _ := twoClusters(ctx, true)
		ns := c.Namespace
		broker1 := as(ns, "c", kafkav1alpha1.BrokerPodName("c", 1))
		bob := user(ns, "bob", "d")
		Expect(env.Client.Create(ctx, bob)).To(Succeed())

		By("creating a KafkaUser of another cluster: refused once the policy is loaded")
		Eventually(func() error { return broker1.Create(ctx, user(ns, "mallory", "d")) }).
			Should(MatchError(ContainSubstring("the brokers of cluster c may write only its KafkaUsers, not mallory of cluster d")))

		By("its own cluster's users are its to create and change (ACLs only)")
		alice := user(ns, "alice", "c")
		Expect(broker1.Create(ctx, alice)).To(Succeed())
		alice.Spec.Authorization = &kafkav1alpha1.UserAuthorization{ACLs: []kafkav1alpha1.ACLRule{{
			Resource: kafkav1alpha1.ACLResource{Type: kafkav1alpha1.ACLTopic, Name: "orders"}, Operations: []kafkav1alpha1.ACLOperation{"Read"}}}}
		Expect(broker1.Update(ctx, alice)).To(Succeed())

		for _, tc := range []struct {
			what  string
			write func() error
		}{
			{"grant another cluster's user ACLs", func() error {
				u := &kafkav1alpha1.KafkaUser{}
				Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bob), u)).To(Succeed())
				u.Spec.Authorization = &kafkav1alpha1.UserAuthorization{ACLs: alice.Spec.Authorization.ACLs}
				return broker1.Update(ctx, u)
			}},
			{"create a user of its cluster labelled as another's", func() error {
				u := user(ns, "mislabelled", "c")
				u.Labels[kafkav1alpha1.LabelCluster] = "d"
				return broker1.Create(ctx, u)
			}},
		} {
			By("refusing to " + tc.what)
			refused(tc.write(), "the brokers of cluster c may write only its KafkaUsers")
		}
		By("naming a Secret as a user's password: refused, on create and on update")
		withPassword := func(u *kafkav1alpha1.KafkaUser) *kafkav1alpha1.KafkaUser {
			u.Spec.Authentication = &kafkav1alpha1.UserAuthentication{Type: kafkav1alpha1.UserScramSHA512,
				Password: &kafkav1alpha1.PasswordSource{SecretKeyRef: kafkav1alpha1.SecretKeyRef{Name: "manager-token", Key: "token"}}}
			return u
		}
		refused(broker1.Create(ctx, withPassword(user(ns, "eve", "c"))), "may not make KafkaUser eve take its password from a Secret")
		u := &kafkav1alpha1.KafkaUser{}
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(alice), u)).To(Succeed())
		refused(broker1.Update(ctx, withPassword(u)), "may not make KafkaUser alice take its password from a Secret")
		By("a user's own password Secret stays when a broker changes the user's ACLs")
		carolPw := withPassword(user(ns, "carol-pw", "c"))
		Expect(env.Client.Create(ctx, carolPw)).To(Succeed())
		Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(carolPw), u)).To(Succeed())
		u.Spec.Authorization = alice.Spec.Authorization
		Expect(broker1.Update(ctx, u)).To(Succeed())

		By("deleting a user: its Role has no such verb, even for its own cluster's")
		Expect(apierrors.IsForbidden(broker1.Delete(ctx, alice))).To(BeTrue())

		By("cluster d's brokers write d's users; a user writes any")
		Expect(as(ns, "d", kafkav1alpha1.BrokerPodName("d", 0)).Create(ctx, user(ns, "dave", "d"))).To(Succeed())
		Expect(env.Client.Create(ctx, user(ns, "carol", "c"))).To(Succeed())
	})

	It("keeps everyone else off the heartbeat Leases and leaves their other writes to RBAC", func(ctx SpecContext) {
		c, _ := twoClusters(ctx)
		ns := c.Namespace
		Expect(env.Client.Create(ctx, lease(c, 2))).To(Succeed(), "a cluster administrator may")
		// Another workload granted all the broker Role grants (as a namespace user with
		// Kubernetes' edit role has Leases and, through paddock's aggregated role, KafkaTopics).
		Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "app-edits", Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: kafkav1alpha1.StatefulSetName("c")},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "app", Namespace: ns}},
		})).To(Succeed())
		app, err := client.New(env.PodIdentity(ns, "app", "app-7d9f", "uid-app"), client.Options{Scheme: env.Scheme})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error { return renew(ctx, app, lease(c, 2)) }).Should(MatchError(ContainSubstring("heartbeat Lease c-broker-2 of cluster c is written only by broker pod c-broker-2")))
		refused(app.Create(ctx, lease(c, 0)), "is written only by broker pod c-broker-0")
		Expect(app.Create(ctx, topic(ns, "app-topic", "d"))).To(Succeed(), "a KafkaTopic write of no cluster's broker is RBAC's to judge")
		Expect(app.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "app-leader", Namespace: ns}})).
			To(Succeed(), "and so is a Lease that is no heartbeat Lease")
	})
})
