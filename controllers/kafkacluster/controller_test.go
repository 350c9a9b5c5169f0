package kafkacluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

const (
	testImage = "example.com/paddock:test"
)

// testManager is the running manager of the provisioning specs.
type testManager struct {
	mgr    ctrl.Manager
	Stop   func() // stops the manager and waits for it to return
	recon  *Reconciler
	writes *countingClient
}

// startTestManager starts a manager running only the KafkaCluster reconciler until Stop or
// the end of the Ginkgo node that started it. The reconciler writes through a counting
// client so a spec can tell how many writes a reconcile made.
func startTestManager() *testManager {
	GinkgoHelper()
	m := &testManager{}
	m.Stop = env.StartManager(func(mgr ctrl.Manager) error {
		m.mgr = mgr
		m.writes = &countingClient{Client: mgr.GetClient()}
		m.recon = &Reconciler{
			Client: m.writes, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkacluster"),
			Options: Options{DefaultBrokerImage: testImage},
		}
		return m.recon.SetupWithManager(mgr)
	}, func(o *ctrl.Options) { o.Cache = cache.Options{ByObject: labelledClaimsOnly()} })
	return m
}

// countingClient counts the writes the reconciler makes in one namespace (set
// with countIn). The manager is shared by every spec of the container, so clusters of earlier
// specs — their namespaces being deleted — are still reconciled in the background; their
// writes must not count against the spec that is measuring.
type countingClient struct {
	client.Client
	namespace                       atomic.Pointer[string]
	applies, deletes, statusPatches atomic.Int32
}

// countIn makes the client count only writes to objects in namespace.
func (c *countingClient) countIn(namespace string) { c.namespace.Store(&namespace) }

// counts reports whether a write to an object in namespace is counted.
func (c *countingClient) counts(namespace string) bool {
	ns := c.namespace.Load()
	return ns != nil && *ns == namespace
}

func (c *countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	// The reconciler applies unstructured bodies; typed apply configurations name their
	// namespace through a pointer.
	switch o := obj.(type) {
	case interface{ GetNamespace() string }:
		if c.counts(o.GetNamespace()) {
			c.applies.Add(1)
		}
	case interface{ GetNamespace() *string }:
		if ns := o.GetNamespace(); ns != nil && c.counts(*ns) {
			c.applies.Add(1)
		}
	}
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if c.counts(obj.GetNamespace()) {
		c.deletes.Add(1)
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.counts(obj.GetNamespace()) {
		s.c.statusPatches.Add(1)
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// newCluster creates a three-broker KafkaCluster with a 30s drain timeout in ns.
func newCluster(ctx context.Context, ns string) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	kc := &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
		Spec: kafkav1alpha1.KafkaClusterSpec{
			Replicas:     3,
			DrainTimeout: &metav1.Duration{Duration: 30 * time.Second},
		},
	}
	Expect(env.Client.Create(ctx, kc)).To(Succeed())
	return kc
}

// wantChildren are the objects the reconciler makes for a cluster named c with
// replicas brokers, freshly allocated for reading into.
func wantChildren(replicas int32) map[string]client.Object {
	children := map[string]client.Object{
		"ServiceAccount c-broker":      &corev1.ServiceAccount{},
		"Role c-broker":                &rbacv1.Role{},
		"RoleBinding c-broker":         &rbacv1.RoleBinding{},
		"Service c-brokers":            &corev1.Service{},
		"Service c-bootstrap":          &corev1.Service{},
		"PersistentVolumeClaim c-data": &corev1.PersistentVolumeClaim{},
		"PodDisruptionBudget c-broker": &policyv1.PodDisruptionBudget{},
		"NetworkPolicy c-broker":       &networkingv1.NetworkPolicy{},
		"StatefulSet c-broker":         &appsv1.StatefulSet{},
	}
	for id := range replicas {
		children[fmt.Sprintf("Service c-broker-%d", id)] = &corev1.Service{}
	}
	return children
}

// getChild reads the child called "<Kind> <name>" in ns into obj.
func getChild(ctx context.Context, ns, key string, obj client.Object) error {
	var kind, name string
	_, _ = fmt.Sscanf(key, "%s %s", &kind, &name)
	return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
}

// waitForChildren waits until every child of a cluster with replicas brokers
// exists and returns their resourceVersions by key.
func waitForChildren(ctx context.Context, ns string, replicas int32) map[string]string {
	GinkgoHelper()
	versions := map[string]string{}
	for key, obj := range wantChildren(replicas) {
		Eventually(func() error { return getChild(ctx, ns, key, obj) }).
			Should(Succeed(), key)
		versions[key] = obj.GetResourceVersion()
	}
	return versions
}

// resourceVersions reads the current resourceVersion of each child in versions.
func resourceVersions(ctx context.Context, ns string, replicas int32) map[string]string {
	GinkgoHelper()
	versions := map[string]string{}
	for key, obj := range wantChildren(replicas) {
		Expect(getChild(ctx, ns, key, obj)).To(Succeed(), key)
		versions[key] = obj.GetResourceVersion()
	}
	return versions
}

// settledVersions waits until the children of a cluster with replicas brokers
// stop changing and returns their resourceVersions. The reconciles their creation triggered
// may still be running, and the apiserver bumps a new PersistentVolumeClaim once when it is
// first re-applied unchanged (its content stays the same).
func settledVersions(ctx context.Context, ns string, replicas int32) map[string]string {
	GinkgoHelper()
	var versions map[string]string
	Eventually(func(g Gomega) {
		versions = resourceVersions(ctx, ns, replicas)
		time.Sleep(300 * time.Millisecond)
		g.Expect(resourceVersions(ctx, ns, replicas)).To(Equal(versions))
	}).Should(Succeed())
	return versions
}

// readCluster reads cluster c in ns.
func readCluster(ctx context.Context, ns string) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	kc := &kafkav1alpha1.KafkaCluster{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, kc)).To(Succeed())
	return kc
}

// waitForStatus waits until the status of c in ns was computed for its current
// generation and cond has the given status and reason; it returns the cluster.
func waitForStatus(ctx context.Context, ns, cond string, status metav1.ConditionStatus, reason string) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	var kc *kafkav1alpha1.KafkaCluster
	Eventually(func(g Gomega) {
		kc = &kafkav1alpha1.KafkaCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, kc)).To(Succeed())
		g.Expect(kc.Status.ObservedGeneration).To(Equal(kc.Generation))
		c := meta.FindStatusCondition(kc.Status.Conditions, cond)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(kc.Generation))
	}).Should(Succeed())
	return kc
}

// updateSpec changes c's spec in ns, retrying on conflicts.
func updateSpec(ctx context.Context, ns string, mutate func(*kafkav1alpha1.KafkaClusterSpec)) {
	GinkgoHelper()
	Eventually(func() error {
		kc := readCluster(ctx, ns)
		mutate(&kc.Spec)
		return env.Client.Update(ctx, kc)
	}).Should(Succeed())
}

// readStatefulSet reads c-broker in ns.
func readStatefulSet(ctx context.Context, ns string) *appsv1.StatefulSet {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c-broker"}, sts)).To(Succeed())
	return sts
}

var _ = Describe("KafkaCluster provisioning", Ordered, func() {
	var m *testManager

	BeforeAll(func() {
		m = startTestManager()
	})

	It("creates every child, owned by the cluster except the retained data claim, with the broker pod contract", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		for key, obj := range wantChildren(3) {
			Expect(getChild(ctx, ns, key, obj)).To(Succeed())
			if key == "PersistentVolumeClaim c-data" {
				Expect(obj.GetOwnerReferences()).To(BeEmpty(), "the data claim outlives the cluster by default (dataclaim_envtest_test.go)")
			} else {
				Expect(metav1.GetControllerOf(obj)).NotTo(BeNil(), key)
				Expect(metav1.GetControllerOf(obj).UID).To(Equal(kc.UID), key)
			}
			Expect(obj.GetLabels()).To(HaveKeyWithValue(kafkav1alpha1.LabelName, "paddock"), key)
			Expect(obj.GetLabels()).To(HaveKeyWithValue(kafkav1alpha1.LabelInstance, "c"), key)
			Expect(obj.GetLabels()).To(HaveKeyWithValue(kafkav1alpha1.LabelCluster, "c"), key)
			Expect(obj.GetManagedFields()).To(ContainElement(And(
				HaveField("Manager", kafkav1alpha1.FieldOwner),
				HaveField("Operation", metav1.ManagedFieldsOperationApply),
			)), key)
		}

		podSelector := map[string]string{kafkav1alpha1.LabelName: "paddock", kafkav1alpha1.LabelCluster: "c"}
		sts := readStatefulSet(ctx, ns)
		Expect(sts.Spec.Selector.MatchLabels).To(Equal(podSelector))
		Expect(sts.Spec.Template.Labels).To(Equal(map[string]string{
			kafkav1alpha1.LabelName: "paddock", kafkav1alpha1.LabelInstance: "c", kafkav1alpha1.LabelCluster: "c",
		}))
		Expect(sts.Spec.ServiceName).To(Equal("c-brokers"))
		Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
		pod := sts.Spec.Template.Spec
		Expect(*pod.TerminationGracePeriodSeconds).To(Equal(int64(45)), "drainTimeout 30s + 15s margin")
		Expect(pod.ServiceAccountName).To(Equal("c-broker"))
		Expect(pod.Containers).To(HaveLen(1))
		broker := pod.Containers[0]
		Expect(broker.Name).To(Equal("broker"))
		Expect(broker.Image).To(Equal(testImage))
		Expect(broker.Command).To(BeEmpty())
		Expect(broker.Args).To(Equal([]string{
			"broker", "--cluster=c", "--listeners=kafka:9092:PodDNS", "--health-port=9644",
			"--heartbeat-interval=1s", "--session-timeout=6s", "--drain-timeout=30s", "--data-dir=/var/lib/paddock",
		}))
		Expect(broker.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
		Expect(broker.ReadinessProbe.HTTPGet.Port.StrVal).To(Equal("health"))
		Expect(broker.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(broker.StartupProbe.HTTPGet.Path).To(Equal("/healthz"))
		Expect(broker.Ports).To(ContainElements(
			HaveField("ContainerPort", int32(9092)), HaveField("Name", "health"),
		))
		var env []string
		for _, e := range broker.Env {
			if e.ValueFrom != nil {
				env = append(env, e.Name+"="+e.ValueFrom.FieldRef.FieldPath)
			} else {
				env = append(env, e.Name+"="+e.Value)
			}
		}
		Expect(env).To(Equal([]string{"POD_NAME=metadata.name", "POD_NAMESPACE=metadata.namespace",
			"POD_UID=metadata.uid", "POD_IP=status.podIP", "NODE_NAME=spec.nodeName", "GOMEMLIMIT=966367620"}))
		Expect(pod.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("c-data"))

		headless := &corev1.Service{}
		Expect(getChild(ctx, ns, "Service c-brokers", headless)).To(Succeed())
		Expect(headless.Spec.ClusterIP).To(Equal(corev1.ClusterIPNone))
		Expect(headless.Spec.PublishNotReadyAddresses).To(BeTrue())
		Expect(headless.Spec.Selector).To(Equal(podSelector))

		bootstrap := &corev1.Service{}
		Expect(getChild(ctx, ns, "Service c-bootstrap", bootstrap)).To(Succeed())
		Expect(bootstrap.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
		Expect(bootstrap.Spec.Selector).To(Equal(podSelector))

		perBroker := &corev1.Service{}
		Expect(getChild(ctx, ns, "Service c-broker-2", perBroker)).To(Succeed())
		Expect(perBroker.Spec.Selector).To(HaveKeyWithValue("statefulset.kubernetes.io/pod-name", "c-broker-2"))
		Expect(perBroker.Labels).To(HaveKeyWithValue(kafkav1alpha1.LabelBrokerID, "2"))

		pdb := &policyv1.PodDisruptionBudget{}
		Expect(getChild(ctx, ns, "PodDisruptionBudget c-broker", pdb)).To(Succeed())
		Expect(pdb.Spec.MaxUnavailable.IntValue()).To(Equal(1))
		Expect(pdb.Spec.Selector.MatchLabels).To(Equal(podSelector))

		got := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(got.Status.ClusterID).To(MatchRegexp(`^[A-Za-z0-9_-]{22}$`))
		Expect(got.Status.Listeners).To(Equal([]kafkav1alpha1.ListenerStatus{{
			Name: "kafka", Type: kafkav1alpha1.ListenerInternal, Bootstrap: "c-bootstrap." + ns + ".svc:9092",
		}}))
		Expect(meta.IsStatusConditionTrue(got.Status.Conditions, kafkav1alpha1.ConditionProgressing)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(got.Status.Conditions, kafkav1alpha1.ConditionReady)).To(BeTrue())
		// The default listener is plaintext without authentication: the cluster says it is open.
		secured := meta.FindStatusCondition(got.Status.Conditions, kafkav1alpha1.ConditionSecured)
		Expect(secured).NotTo(BeNil())
		Expect(secured.Status).To(Equal(metav1.ConditionFalse))
		Expect(secured.Reason).To(Equal(kafkav1alpha1.ReasonOpenListener))
		Expect(secured.Message).To(ContainSubstring("listener kafka lets anyone in unauthenticated"))
	})

	It("provisions the sample in config/samples", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "kafka_v1alpha1_kafkacluster.yaml"))
		Expect(err).NotTo(HaveOccurred())
		sample := &kafkav1alpha1.KafkaCluster{}
		Expect(yaml.UnmarshalStrict(raw, sample)).To(Succeed())
		ns := newNamespace(ctx)
		sample.Name, sample.Namespace = "c", ns
		Expect(env.Client.Create(ctx, sample)).To(Succeed())
		waitForChildren(ctx, ns, sample.Spec.Replicas)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
	})

	It("grants the brokers exactly the documented permissions", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		role := &rbacv1.Role{}
		Expect(getChild(ctx, ns, "Role c-broker", role)).To(Succeed())
		Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{
			{APIGroups: []string{"kafka.paddock.dev"}, Resources: []string{"kafkaclusters"}, ResourceNames: []string{"c"}, Verbs: []string{"get"}},
			{APIGroups: []string{"kafka.paddock.dev"}, Resources: []string{"kafkaclusters"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"kafka.paddock.dev"}, Resources: []string{"brokers"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"kafka.paddock.dev"}, Resources: []string{"kafkatopics"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"c-broker-0", "c-broker-1", "c-broker-2"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		}))

		binding := &rbacv1.RoleBinding{}
		Expect(getChild(ctx, ns, "RoleBinding c-broker", binding)).To(Succeed())
		Expect(binding.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "c-broker"}))
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "c-broker", Namespace: ns}}))
	})

	It("lets brokers of external listeners read their own Services, and their Nodes only while a listener advertises the node", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec: kafkav1alpha1.KafkaClusterSpec{Replicas: 2, Listeners: []kafkav1alpha1.Listener{
				{Name: "kafka", Port: 9092},
				{Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort},
			}},
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
		waitForChildren(ctx, ns, 2)
		bindingKey := client.ObjectKey{Name: kafkav1alpha1.NodeReaderBindingName(ns, "c")}

		By("a NodePort listener: the broker args say NodePort; the Role reads the per-broker Services; a ClusterRoleBinding grants Nodes")
		Expect(readStatefulSet(ctx, ns).Spec.Template.Spec.Containers[0].Args).To(ContainElement("--listeners=kafka:9092:PodDNS,external:9094:NodePort"))
		role := &rbacv1.Role{}
		Expect(getChild(ctx, ns, "Role c-broker", role)).To(Succeed())
		Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"c-broker-0", "c-broker-1"}, Verbs: []string{"get", "list", "watch"},
		}))
		binding := &rbacv1.ClusterRoleBinding{}
		Eventually(func() error { return env.Client.Get(ctx, bindingKey, binding) }).Should(Succeed())
		Expect(binding.RoleRef.Name).To(Equal(kafkav1alpha1.NodeReaderClusterRoleName))
		Expect(binding.Subjects).To(Equal([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "c-broker", Namespace: ns}}))
		nodeReader := &rbacv1.ClusterRole{}
		Expect(env.Client.Get(ctx, client.ObjectKey{Name: kafkav1alpha1.NodeReaderClusterRoleName}, nodeReader)).To(Succeed())
		Expect(nodeReader.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}))
		Expect(readCluster(ctx, ns).Finalizers).To(ContainElement(kafkav1alpha1.FinalizerNodeReader))

		By("the per-broker Services are NodePorts that select their pod by name, and keep their nodePorts across reconciles")
		svc := &corev1.Service{}
		Expect(getChild(ctx, ns, "Service c-broker-1", svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		Expect(svc.Spec.Selector).To(HaveKeyWithValue(kafkav1alpha1.LabelPodName, "c-broker-1"))
		nodePorts := map[string]int32{}
		for _, p := range svc.Spec.Ports {
			nodePorts[p.Name] = p.NodePort
		}
		Expect(nodePorts["external"]).NotTo(BeZero())
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.DrainTimeout = &metav1.Duration{Duration: 45 * time.Second} })
		Eventually(func() []string { return readStatefulSet(ctx, ns).Spec.Template.Spec.Containers[0].Args }).
			Should(ContainElement("--drain-timeout=45s"))
		Expect(getChild(ctx, ns, "Service c-broker-1", svc)).To(Succeed())
		for _, p := range svc.Spec.Ports {
			Expect(p.NodePort).To(Equal(nodePorts[p.Name]), "nodePort of %s after a re-apply", p.Name)
		}

		By("a fixed host template needs no Node: the binding and the finalizer go")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Listeners[1].AdvertisedHostTemplate = "kafka.example.com" })
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, bindingKey, &rbacv1.ClusterRoleBinding{}))
		}).
			Should(BeTrue())
		Eventually(func() []string { return readCluster(ctx, ns).Finalizers }).ShouldNot(ContainElement(kafkav1alpha1.FinalizerNodeReader))
		Eventually(func() []string { return readStatefulSet(ctx, ns).Spec.Template.Spec.Containers[0].Args }).
			Should(ContainElement("--advertised-host-templates=external=kafka.example.com"))

		By("{nodeAddress} in the template needs it again; a deleted binding is put back; deleting the cluster removes it")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Listeners[1].AdvertisedHostTemplate = "{nodeAddress}.nip.io"
		})
		Eventually(func() error { return env.Client.Get(ctx, bindingKey, binding) }).Should(Succeed())
		Expect(env.Client.Delete(ctx, binding)).To(Succeed())
		Eventually(func() error { return env.Client.Get(ctx, bindingKey, &rbacv1.ClusterRoleBinding{}) }).Should(Succeed())
		Expect(env.Client.Delete(ctx, readCluster(ctx, ns))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, bindingKey, &rbacv1.ClusterRoleBinding{}))
		}).
			Should(BeTrue())
		Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, &kafkav1alpha1.KafkaCluster{}))
		}).Should(BeTrue(), "the finalizer is removed once the binding is gone")
	})

	It("lets brokers of a LoadBalancer listener read their own Services and nothing cluster-scoped", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		kc := &kafkav1alpha1.KafkaCluster{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec: kafkav1alpha1.KafkaClusterSpec{Replicas: 1, Listeners: []kafkav1alpha1.Listener{
				{Name: "kafka", Port: 9092}, {Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerLoadBalancer},
			}},
		}
		Expect(env.Client.Create(ctx, kc)).To(Succeed())
		waitForChildren(ctx, ns, 1)
		Expect(readStatefulSet(ctx, ns).Spec.Template.Spec.Containers[0].Args).To(ContainElement("--listeners=kafka:9092:PodDNS,external:9094:LoadBalancer"))
		svc := &corev1.Service{}
		Expect(getChild(ctx, ns, "Service c-broker-0", svc)).To(Succeed())
		Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
		role := &rbacv1.Role{}
		Expect(getChild(ctx, ns, "Role c-broker", role)).To(Succeed())
		Expect(role.Rules).To(ContainElement(rbacv1.PolicyRule{
			APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: []string{"c-broker-0"}, Verbs: []string{"get", "list", "watch"},
		}))
		Consistently(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: kafkav1alpha1.NodeReaderBindingName(ns, "c")}, &rbacv1.ClusterRoleBinding{}))
		}).WithTimeout(2 * time.Second).Should(BeTrue())
		Expect(readCluster(ctx, ns).Finalizers).To(BeEmpty())
	})

	It("writes nothing when reconciling a cluster that is already up to date", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		before := settledVersions(ctx, ns, 3)
		// The cluster settles too: the reconciles its children's changes trigger may still
		// write its status (on a loaded machine, seconds later). The reconciler reads through
		// the manager's cache: let it catch up with what the apiserver holds, so the
		// reconcile below starts from the settled state.
		var settled *kafkav1alpha1.KafkaCluster
		Eventually(func(g Gomega) {
			settled = readCluster(ctx, ns)
			time.Sleep(300 * time.Millisecond)
			g.Expect(readCluster(ctx, ns).ResourceVersion).To(Equal(settled.ResourceVersion), "the cluster is still being written")
			cached := &kafkav1alpha1.KafkaCluster{}
			g.Expect(m.mgr.GetClient().Get(ctx, client.ObjectKeyFromObject(settled), cached)).To(Succeed())
			g.Expect(cached.ResourceVersion).To(Equal(settled.ResourceVersion))
		}).Should(Succeed())

		m.writes.countIn(ns)
		applies, deletes, patches := m.writes.applies.Load(), m.writes.deletes.Load(), m.writes.statusPatches.Load()
		for range 2 {
			_, err := m.recon.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(settled)})
			Expect(err).NotTo(HaveOccurred())
		}

		Expect(resourceVersions(ctx, ns, 3)).To(Equal(before), "no child changed")
		Expect(readCluster(ctx, ns).ResourceVersion).To(Equal(settled.ResourceVersion), "the status was not written")
		Expect(m.writes.statusPatches.Load()-patches).To(BeZero(), "no status patch was sent")
		Expect(m.writes.deletes.Load()-deletes).To(BeZero(), "nothing was deleted")
		GinkgoWriter.Printf("two no-op reconciles sent %d server-side applies, all unchanged\n", m.writes.applies.Load()-applies)
	})

	It("scales the StatefulSet, the lease permissions and the per-broker Services with replicas", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 5 })
		waitForChildren(ctx, ns, 5)
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).
			Should(Equal(int32(5)))
		Eventually(func(g Gomega) {
			role := &rbacv1.Role{}
			g.Expect(getChild(ctx, ns, "Role c-broker", role)).To(Succeed())
			g.Expect(role.Rules[4].ResourceNames).To(Equal([]string{"c-broker-0", "c-broker-1", "c-broker-2", "c-broker-3", "c-broker-4"}))
		}).Should(Succeed())

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 2 })
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).
			Should(Equal(int32(2)))
		for _, gone := range []string{"Service c-broker-2", "Service c-broker-3", "Service c-broker-4"} {
			Eventually(func() bool {
				return apierrors.IsNotFound(getChild(ctx, ns, gone, &corev1.Service{}))
			}).Should(BeTrue(), gone+" is deleted after the scale-down")
		}
		waitForChildren(ctx, ns, 2)
	})

	It("rolls a spec edit into the StatefulSet", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Image = "example.com/paddock:v2"
			s.DrainTimeout = &metav1.Duration{Duration: 2 * time.Minute}
			s.Listeners = append(s.Listeners, kafkav1alpha1.Listener{
				Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHost: kafkav1alpha1.AdvertisePodIP,
			})
		})
		Eventually(func(g Gomega) {
			pod := readStatefulSet(ctx, ns).Spec.Template.Spec
			g.Expect(pod.Containers[0].Image).To(Equal("example.com/paddock:v2"))
			g.Expect(*pod.TerminationGracePeriodSeconds).To(Equal(int64(135)))
			g.Expect(pod.Containers[0].Args).To(ContainElements("--drain-timeout=2m0s", "--listeners=kafka:9092:PodDNS,external:9094:NodePort"))
		}).Should(Succeed())

		bootstrap := &corev1.Service{}
		Eventually(func(g Gomega) {
			g.Expect(getChild(ctx, ns, "Service c-bootstrap", bootstrap)).To(Succeed())
			g.Expect(bootstrap.Spec.Type).To(Equal(corev1.ServiceTypeNodePort))
		}).Should(Succeed())
		nodePort := servicePort(bootstrap, "external").NodePort
		Eventually(func() []kafkav1alpha1.ListenerStatus { return readCluster(ctx, ns).Status.Listeners }).
			Should(ContainElement(kafkav1alpha1.ListenerStatus{
				Name: "external", Type: kafkav1alpha1.ListenerNodePort, Bootstrap: fmt.Sprintf(":%d", nodePort),
			}))
	})

	It("puts back a child that was deleted", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)

		for _, key := range []string{"Service c-brokers", "Role c-broker", "StatefulSet c-broker"} {
			obj := wantChildren(3)[key]
			Expect(getChild(ctx, ns, key, obj)).To(Succeed())
			oldUID := obj.GetUID()
			Expect(env.Client.Delete(ctx, obj)).To(Succeed())
			Eventually(func(g Gomega) {
				back := wantChildren(3)[key]
				g.Expect(getChild(ctx, ns, key, back)).To(Succeed())
				g.Expect(back.GetUID()).NotTo(Equal(oldUID))
			}).Should(Succeed(), key+" is recreated")
		}
	})

	// The API server refuses these specs (CRD rules); checkSpec and storageChange still
	// refuse them at reconcile time for an object stored before the rules existed
	// (rules_test.go), and a retained claim's mismatch is refused there (dataclaim tests).
	It("leaves the children alone when the API server refuses a spec it cannot act on", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		before := settledVersions(ctx, ns, 3)

		kc := readCluster(ctx, ns)
		kc.Spec.Replicas = 4
		kc.Spec.Listeners[0].Port = kafkav1alpha1.HealthPort
		err := env.Client.Update(ctx, kc)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring("port 9644 is the health port"))
		Consistently(func() map[string]string { return resourceVersions(ctx, ns, 3) }).
			WithTimeout(time.Second).Should(Equal(before), "no child changed")
		Expect(apierrors.IsNotFound(getChild(ctx, ns, "Service c-broker-3", &corev1.Service{}))).To(BeTrue())

		By("a valid edit goes through")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 4 })
		waitForChildren(ctx, ns, 4)
	})

	It("refuses a storage change of a cluster that holds data and keeps the brokers' volume", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		before := settledVersions(ctx, ns, 3)

		By("growing a claim its class cannot expand: Degraded, the claim keeps its size")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("20Gi")) })
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonStorageNotExpandable)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring("from 10Gi to 20Gi, but claim c-data cannot be expanded: it has no StorageClass"))
		Expect(readClaim(ctx, ns).Spec.Resources.Requests.Storage().String()).To(Equal("10Gi"), "the claim keeps its size")
		Expect(kc.Status.StorageSize.String()).To(Equal("10Gi"), "status.storageSize is the claim's")

		By("the API server refuses a size below the claim's and a type change")
		for what, change := range map[string]func(*kafkav1alpha1.Storage){
			"spec.storage.size cannot be smaller than the data claim": func(s *kafkav1alpha1.Storage) { s.Size = ptr.To(resource.MustParse("5Gi")) },
			"spec.storage.type cannot change":                         func(s *kafkav1alpha1.Storage) { s.Type = kafkav1alpha1.StorageEphemeral },
		} {
			kc := readCluster(ctx, ns)
			Expect(kc.Status.ClusterID).NotTo(BeEmpty())
			change(&kc.Spec.Storage)
			err := env.Client.Update(ctx, kc)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(what))
		}

		By("setting the size back to the claim's clears the condition")
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.Size = ptr.To(resource.MustParse("10Gi")) })
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		Expect(resourceVersions(ctx, ns, 3)).To(Equal(before), "the claim and the StatefulSet were not touched")
		Expect(readStatefulSet(ctx, ns).Spec.Template.Spec.Volumes[0].PersistentVolumeClaim.ClaimName).To(Equal("c-data"))
	})

	It("reports Ready and settled once the StatefulSet says every broker is ready", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionReady, metav1.ConditionFalse, kafkav1alpha1.ReasonBrokersNotReady)

		// No StatefulSet controller runs here: play its part.
		sts := readStatefulSet(ctx, ns)
		sts.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: sts.Generation, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			UpdatedReplicas: 3, CurrentReplicas: 3, CurrentRevision: "c-broker-1", UpdateRevision: "c-broker-1",
		}
		Expect(env.Client.Status().Update(ctx, sts)).To(Succeed())

		waitForStatus(ctx, ns, kafkav1alpha1.ConditionReady, metav1.ConditionTrue, kafkav1alpha1.ReasonAllBrokersReady)
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionProgressing, metav1.ConditionFalse, kafkav1alpha1.ReasonUpToDate)
		Expect(kc.Status.Replicas).To(Equal(int32(3)))
		Expect(kc.Status.ReadyReplicas).To(Equal(int32(3)))
	})

	It("reports Degraded MountRefused while a broker's row says it refuses its data volume's mount", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
		// No registry runs here: play its part, as the registry writes a row from the Lease.
		setRow := func(refused string) {
			kc := &kafkav1alpha1.KafkaCluster{}
			Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, kc)).To(Succeed())
			orig := kc.DeepCopy()
			kc.Status.Brokers = []kafkav1alpha1.BrokerRow{{ID: 1, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerDead,
				Reason: kafkav1alpha1.ReasonUnhealthy, MountRefused: refused}}
			Expect(env.Client.Status().Patch(ctx, kc, client.MergeFrom(orig))).To(Succeed())
		}
		setRow("soft: a soft mount fails an fsync with EIO")
		kc := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionTrue, kafkav1alpha1.ReasonMountRefused)
		Expect(meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded).Message).To(ContainSubstring("broker 1 refuses its data volume's mount (soft:"))
		setRow("")
		waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected)
	})

	It("keeps the clusterID across reconciles and a manager restart", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns)
		waitForChildren(ctx, ns, 3)
		id := waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID
		Expect(id).To(MatchRegexp(`^[A-Za-z0-9_-]{22}$`))

		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 4 })
		waitForChildren(ctx, ns, 4)
		Expect(waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID).To(Equal(id))

		m.Stop()
		m = startTestManager()
		updateSpec(ctx, ns, func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 2 })
		Eventually(func() int32 { return *readStatefulSet(ctx, ns).Spec.Replicas }).
			Should(Equal(int32(2)), "the restarted manager reconciles")
		Expect(waitForStatus(ctx, ns, kafkav1alpha1.ConditionDegraded, metav1.ConditionFalse, kafkav1alpha1.ReasonAsExpected).Status.ClusterID).To(Equal(id))
	})
})
