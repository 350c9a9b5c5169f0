package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// expiryWithin is how long after a short Lease (a few seconds) expires a spec waits for the
// registry to act on it: on a loaded machine an apiserver round trip alone can take seconds. It
// stays well below the 60 s of the Leases that a spec keeps alive, so a registry that did not
// requeue at the short Lease's expiry is still caught — only the long Leases' expiry, or never,
// would wake it.
const expiryWithin = 30 * time.Second

// testClock is the reconciler's clock in the registry specs: real time plus an offset the
// zero-writes spec advances, so a minute of heartbeats takes seconds, while RequeueAfter
// (which the workqueue waits out in real time) still lines up with it.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration // guarded by mu
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Step moves the clock forward by d.
func (c *testClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// reconcileCounter counts the registry's reconciles per namespace: each one reads its
// KafkaCluster first, through this client. A spec that asserts "nothing is written" waits for
// some reconciles to have run instead of sleeping through a guess at how many a second holds.
type reconcileCounter struct {
	client.Client
	mu sync.Mutex
	n  map[string]int // by namespace; guarded by mu
}

func (c *reconcileCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*kafkav1alpha1.KafkaCluster); ok {
		c.mu.Lock()
		if c.n == nil {
			c.n = map[string]int{}
		}
		c.n[key.Namespace]++
		c.mu.Unlock()
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// Reconciles is how many reconciles of a cluster in namespace ns have started so far.
func (c *reconcileCounter) Reconciles(ns string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[ns]
}

// newCluster creates KafkaCluster name in ns and its broker StatefulSet with replicas
// (a minimal valid object: no controller runs it here).
func newCluster(ctx context.Context, ns, name string, replicas int32) {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		// The session timeout caps every Lease's duration; the specs' Leases last up to 60 s.
		Spec: kafkav1alpha1.KafkaClusterSpec{Replicas: replicas, Heartbeat: kafkav1alpha1.Heartbeat{SessionTimeout: &metav1.Duration{Duration: time.Minute}}},
	})).To(Succeed())
	labels := map[string]string{kafkav1alpha1.LabelInstance: name}
	Expect(env.Client.Create(ctx, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.StatefulSetName(name), Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To(replicas),
			ServiceName: kafkav1alpha1.HeadlessServiceName(name),
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "broker", Image: "paddock"}}},
			},
		},
	})).To(Succeed())
}

// setReplicas scales the StatefulSet's spec the way the provisioning reconciler would.
func setReplicas(ctx context.Context, ns, cluster string, replicas int32) {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.StatefulSetName(cluster)}, sts)).To(Succeed())
	sts.Spec.Replicas = ptr.To(replicas)
	Expect(env.Client.Update(ctx, sts)).To(Succeed())
}

// endpoint is broker id's endpoint as the EndpointSlice controller lists it.
type endpoint struct {
	id                   int32
	serving, terminating bool
}

func servingEndpoints(ids ...int32) []endpoint {
	out := make([]endpoint, len(ids))
	for i, id := range ids {
		out[i] = endpoint{id: id, serving: true}
	}
	return out
}

// putSlice creates or replaces EndpointSlice sliceName of cluster's headless Service
// with exactly eps, the way the EndpointSlice controller writes the slice's whole membership.
// The headless Service publishes not-ready addresses, so ready is true whenever the pod is
// not terminating; serving carries the pod's readiness.
func putSlice(ctx context.Context, ns, cluster, sliceName string, eps ...endpoint) {
	GinkgoHelper()
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: sliceName, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: kafkav1alpha1.HeadlessServiceName(cluster),
			discoveryv1.LabelManagedBy:   "endpointslice-controller.k8s.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("kafka"), Port: ptr.To[int32](9092), Protocol: ptr.To(corev1.ProtocolTCP)},
			{Name: ptr.To("health"), Port: ptr.To[int32](9644), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
		Endpoints: []discoveryv1.Endpoint{},
	}
	for _, e := range eps {
		pod := kafkav1alpha1.BrokerPodName(cluster, e.id)
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{podIP(e.id)},
			Hostname:  ptr.To(pod),
			NodeName:  ptr.To(fmt.Sprintf("node-%d", e.id%3)),
			Zone:      ptr.To(fmt.Sprintf("zone-%c", 'a'+e.id%3)),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod},
			Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(!e.terminating), Serving: ptr.To(e.serving), Terminating: ptr.To(e.terminating),
			},
		})
	}
	existing := &discoveryv1.EndpointSlice{}
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(s), existing)
	if apierrors.IsNotFound(err) {
		Expect(env.Client.Create(ctx, s)).To(Succeed())
		return
	}
	Expect(err).NotTo(HaveOccurred())
	s.ResourceVersion = existing.ResourceVersion
	Expect(env.Client.Update(ctx, s)).To(Succeed())
}

func podIP(id int32) string { return fmt.Sprintf("10.0.%d.%d", id/250, id%250+1) }

// beat is one heartbeat of broker id, as the broker writes it (docs/registry.md, "Heartbeat Lease").
type beat struct {
	id       int32
	seconds  int32 // leaseDurationSeconds
	draining bool
	extra    map[string]string // more annotations
}

// heartbeat creates or renews broker id's Lease with renewTime = clk.Now() and
// returns that renewTime.
func heartbeat(ctx context.Context, clk *testClock, ns, cluster string, b beat) time.Time {
	GinkgoHelper()
	now := clk.Now()
	pod := kafkav1alpha1.BrokerPodName(cluster, b.id)
	annotations := map[string]string{
		kafkav1alpha1.AnnotationHealthy:  "true",
		kafkav1alpha1.AnnotationDraining: fmt.Sprint(b.draining),
	}
	for k, v := range b.extra {
		annotations[k] = v
	}
	key := client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.LeaseName(cluster, b.id)}
	lease := &coordinationv1.Lease{}
	err := env.Client.Get(ctx, key, lease)
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns, Annotations: annotations, Labels: map[string]string{
				kafkav1alpha1.LabelName:     kafkav1alpha1.LabelNameValue,
				kafkav1alpha1.LabelInstance: cluster,
				kafkav1alpha1.LabelCluster:  cluster,
				kafkav1alpha1.LabelBrokerID: fmt.Sprint(b.id),
			}},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptr.To(pod + "_uid-1"),
				LeaseDurationSeconds: ptr.To(b.seconds),
				AcquireTime:          &metav1.MicroTime{Time: now},
				RenewTime:            &metav1.MicroTime{Time: now},
				LeaseTransitions:     ptr.To[int32](1),
			},
		}
		Expect(env.Client.Create(ctx, lease)).To(Succeed())
		return now
	}
	Expect(err).NotTo(HaveOccurred())
	lease.Annotations = annotations
	lease.Spec.LeaseDurationSeconds = ptr.To(b.seconds)
	lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
	Expect(env.Client.Update(ctx, lease)).To(Succeed())
	return now
}

// renew renews broker id's existing Lease with one merge patch (no read), as a
// broker's steady-state beat does; extra annotations ride along.
func renew(ctx context.Context, clk *testClock, ns, cluster string, id int32, extra map[string]string) {
	GinkgoHelper()
	patch := map[string]any{"spec": map[string]any{"renewTime": metav1.MicroTime{Time: clk.Now()}}}
	if extra != nil {
		patch["metadata"] = map[string]any{"annotations": extra}
	}
	body, err := json.Marshal(patch)
	Expect(err).NotTo(HaveOccurred())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kafkav1alpha1.LeaseName(cluster, id)}}
	Expect(env.Client.Patch(ctx, lease, client.RawPatch("application/merge-patch+json", body))).To(Succeed())
}

// startBrokers makes brokers ids of cluster serving and heartbeating (one slice,
// leases of the given duration).
func startBrokers(ctx context.Context, clk *testClock, ns, cluster string, seconds int32, ids ...int32) {
	GinkgoHelper()
	putSlice(ctx, ns, cluster, kafkav1alpha1.HeadlessServiceName(cluster)+"-abc12", servingEndpoints(ids...)...)
	inParallel(len(ids), 10, func(i int) {
		heartbeat(ctx, clk, ns, cluster, beat{id: ids[i], seconds: seconds})
	})
}

// inParallel runs do(0..n-1) on workers goroutines and waits for all of them; the
// apiserver round trips of many brokers' writes overlap instead of adding up.
func inParallel(n, workers int, do func(i int)) {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			for i := w; i < n; i += workers {
				do(i)
			}
		}()
	}
	wg.Wait()
}

// readCluster reads the cluster (uncached).
func readCluster(ctx context.Context, ns, name string) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	kc := &kafkav1alpha1.KafkaCluster{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kc)).To(Succeed())
	return kc
}

// readRow is broker id's row in the cluster's status, or nil.
func readRow(ctx context.Context, ns, cluster string, id int32) *kafkav1alpha1.BrokerRow {
	GinkgoHelper()
	for _, row := range readCluster(ctx, ns, cluster).Status.Brokers {
		if row.ID == id {
			return &row
		}
	}
	return nil
}

// rowSays matches a row with the given state, health and reason.
func rowSays(state kafkav1alpha1.BrokerState, health kafkav1alpha1.BrokerHealth, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("State", state), HaveField("Health", health), HaveField("Reason", reason))
}

// readBroker reads Broker object <cluster>-<id> (uncached); nil when it does not exist.
func readBroker(ctx context.Context, ns, cluster string, id int32) *kafkav1alpha1.Broker {
	GinkgoHelper()
	b := &kafkav1alpha1.Broker{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.BrokerObjectName(cluster, id)}, b)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return b
}

// readIDs is the ids of the cluster's status rows.
func readIDs(ctx context.Context, ns, cluster string) []int32 {
	GinkgoHelper()
	ids := []int32{}
	for _, row := range readCluster(ctx, ns, cluster).Status.Brokers {
		ids = append(ids, row.ID)
	}
	return ids
}

// eventReasons is the reasons of the events.k8s.io Events about object name in ns.
func eventReasons(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons
}

// brokerTable asks the apiserver for the server-side table of ns's brokers (what
// `kubectl get brokers` prints; -o wide adds the priority-1 columns, which the table always
// carries) and returns each row's cells by column name.
func brokerTable(ctx context.Context, ns string) []map[string]string {
	GinkgoHelper()
	table, err := env.Table(ctx, ns, "brokers")
	Expect(err).NotTo(HaveOccurred())
	var rows []map[string]string
	for _, r := range table.Rows {
		cells := map[string]string{}
		for i, c := range table.ColumnDefinitions {
			cells[c.Name] = fmt.Sprint(r.Cells[i])
		}
		rows = append(rows, cells)
	}
	return rows
}

// startRegistry runs a registry reconciler with clock clk in a manager of its own until stop
// is called or the Ginkgo node that started it ends, and returns the counting client it
// writes through. tweak, when not nil, adjusts the reconciler before it is set up (fault
// injection: a client that wraps the counting one, an error backoff).
func startRegistry(clk *testClock, tweak func(*Reconciler)) (writes *testenv.CountingClient, stop func()) {
	GinkgoHelper()
	stop = env.StartManager(func(mgr ctrl.Manager) error {
		writes = testenv.NewCountingClient(mgr.GetClient())
		r := &Reconciler{Client: writes, Scheme: env.Scheme, Recorder: mgr.GetEventRecorder("registry"), Clock: clk}
		if tweak != nil {
			tweak(r)
		}
		return r.SetupWithManager(mgr)
	})
	return writes, stop
}

// settled waits until a second passes without the reconciler writing in namespace ns.
func settled(writes *testenv.CountingClient, ns string) {
	GinkgoHelper()
	Eventually(func() int {
		before := writes.Writes(ns)
		time.Sleep(time.Second)
		return writes.Writes(ns) - before
	}).Should(BeZero())
}
