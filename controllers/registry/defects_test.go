package registry

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	rules "github.com/paddock-dev/paddock/internal/registry"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// The specs below pin the registry defects found in review (issue 10), each against a
// reconciler in a manager of its own, as the other registry specs run theirs.

// faultyClient fails the Broker status writes made in one namespace while failing is set.
type faultyClient struct {
	client.Client
	namespace atomic.Pointer[string]
	failing   atomic.Bool
	failures  atomic.Int32
}

func (c *faultyClient) Status() client.SubResourceWriter {
	return &faultyStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type faultyStatus struct {
	client.SubResourceWriter
	c *faultyClient
}

func (s *faultyStatus) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	if o, ok := obj.(interface{ GetNamespace() string }); ok && s.c.failing.Load() {
		if ns := s.c.namespace.Load(); ns != nil && *ns == o.GetNamespace() {
			s.c.failures.Add(1)
			return errors.New("injected: the apiserver refused the Broker status")
		}
	}
	return s.SubResourceWriter.Apply(ctx, obj, opts...)
}

// skewedBeat creates or renews broker id's Lease with renewTime skew away from the
// reconciler's clock, as a broker whose clock is off writes it.
func skewedBeat(ctx context.Context, clk *testClock, ns, cluster string, id, seconds int32, skew time.Duration) {
	GinkgoHelper()
	renewed := metav1.MicroTime{Time: clk.Now().Add(skew)}
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.LeaseName(cluster, id)}
	if err := env.Client.Get(ctx, key, lease); err == nil {
		body, err := json.Marshal(map[string]any{"spec": map[string]any{"renewTime": renewed}})
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Client.Patch(ctx, lease, client.RawPatch("application/merge-patch+json", body))).To(Succeed())
		return
	}
	Expect(env.Client.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns, Labels: kafkav1alpha1.BrokerLabels(cluster, id),
			Annotations: map[string]string{kafkav1alpha1.AnnotationHealthy: "true", kafkav1alpha1.AnnotationDraining: "false"}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(kafkav1alpha1.BrokerPodName(cluster, id) + "_uid-1"), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: &renewed, LeaseTransitions: ptr.To[int32](1),
		},
	})).To(Succeed())
}

// beatEvery calls beat every period until the func it returns is called or the spec ends.
// beat gets a context that is never cancelled: the spec's context is cancelled before its
// cleanups run, and stopping the loop while a renewal is in flight must let it finish — a
// cancelled renewal fails its Expect (seen on a loaded machine).
func beatEvery(period time.Duration, beat func(ctx context.Context)) func() {
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer GinkgoRecover()
		defer wg.Done()
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat(context.Background())
			}
		}
	}()
	var once sync.Once
	stopAndWait := func() { once.Do(func() { stop(); wg.Wait() }) }
	DeferCleanup(stopAndWait)
	return stopAndWait
}

// brokerEvents is the events.k8s.io Events about object name in ns.
func brokerEvents(ctx context.Context, ns, name string) []eventsv1.Event {
	GinkgoHelper()
	list := &eventsv1.EventList{}
	Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

var _ = Describe("Registry defects", Ordered, ContinueOnFailure, func() {
	const c = "demo"
	var (
		clk    *testClock
		writes *testenv.CountingClient
		runs   *reconcileCounter
	)

	BeforeAll(func() {
		clk = &testClock{}
		writes, _ = startRegistry(clk, func(r *Reconciler) {
			runs = &reconcileCounter{Client: r.Client}
			r.Client = runs
		})
	})

	// reconciledSince waits until n more reconciles of ns's cluster have run than had at
	// before: the requeues at each Lease expiry a spec's "writes nothing" is about.
	reconciledSince := func(ns string, before, n int) {
		GinkgoHelper()
		Eventually(func() int { return runs.Reconciles(ns) - before }).Should(BeNumerically(">=", n))
	}

	It("keeps a broker whose clock is 10 s behind Alive, writing nothing per beat (defect 6)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0)...)
		skewedBeat(ctx, clk, ns, c, 0, 6, -10*time.Second)
		beatEvery(300*time.Millisecond, func(ctx context.Context) { skewedBeat(ctx, clk, ns, c, 0, 6, -10*time.Second) })
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		settled(writes, ns)
		before, reconciled := writes.Writes(ns), runs.Reconciles(ns)
		Consistently(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).WithTimeout(7 * time.Second).
			WithPolling(200 * time.Millisecond).Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		reconciledSince(ns, reconciled, 2) // the requeues at two expiries of the 6 s Lease
		Expect(readRow(ctx, ns, c, 0)).To(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		Expect(writes.Writes(ns)-before).To(BeZero(), "a heartbeat that changes nothing writes nothing")
		GinkgoWriter.Printf("registry: %d reconciles of a skewed broker's beats, %d writes\n", runs.Reconciles(ns)-reconciled, writes.Writes(ns)-before)
	})

	It("writes nothing per beat for an unhealthy broker that keeps beating (defect 5)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 2})
		unhealthy := map[string]string{kafkav1alpha1.AnnotationHealthy: "false"}
		renew(ctx, clk, ns, c, 0, unhealthy)
		beatEvery(300*time.Millisecond, func(ctx context.Context) { renew(ctx, clk, ns, c, 0, unhealthy) })
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(And(Not(BeNil()), HaveField("Health", kafkav1alpha1.BrokerDead), HaveField("Reason", kafkav1alpha1.ReasonUnhealthy)))
		settled(writes, ns)
		before, reconciled := writes.Writes(ns), runs.Reconciles(ns)
		reconciledSince(ns, reconciled, 3) // the requeues at three expiries of the 2 s Lease
		Expect(writes.Writes(ns)-before).To(BeZero(), "an unhealthy broker's beats must not each write its status")
		GinkgoWriter.Printf("registry: %d reconciles of an unhealthy broker's beats, %d writes\n", runs.Reconciles(ns)-reconciled, writes.Writes(ns)-before)
	})

	It("fences a silent broker when its lease expires although its endpoint still says serving (defect 11)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 2)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60})
		last := heartbeat(ctx, clk, ns, c, beat{id: 1, seconds: 2})
		// Without the fix the row stays Serving/Alive for good, so any bound catches the
		// regression; the delay itself is printed, and e2e measures it on real processes.
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			WithTimeout(time.Until(last.Add(2*time.Second)) + expiryWithin).WithPolling(50 * time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonHeartbeatExpired))
		GinkgoWriter.Printf("registry: silent broker fenced %v after its last renewal (lease 2s)\n", clk.Since(last))
	})

	It("reports a broker that never heartbeated as Starting, with no Warning, until it heartbeats (defect 10)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 0) }).
			Should(And(Not(BeNil()), HaveField("Status.Reason", kafkav1alpha1.ReasonStarting)))
		Consistently(func() []eventsv1.Event { return brokerEvents(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 0)) }).
			WithTimeout(time.Second).Should(Not(ContainElement(HaveField("Type", "Warning"))), "a starting broker is not dead")
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		Eventually(func() []string { return eventReasons(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 0)) }).
			Should(ContainElement(kafkav1alpha1.EventAlive))
		Expect(brokerEvents(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 0))).NotTo(ContainElement(HaveField("Type", "Warning")))
	})

	It("does not register hundreds of brokers when the StatefulSet is scaled by hand (defect 9)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, 60, 0, 1, 2)
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1, 2}))
		setReplicas(ctx, ns, c, 300) // kubectl scale sts demo-broker --replicas=300; nothing reverts it here
		Consistently(func() []int32 { return readIDs(ctx, ns, c) }).WithTimeout(2 * time.Second).Should(Equal([]int32{0, 1, 2}))
		list := &kafkav1alpha1.BrokerList{}
		Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(HaveLen(3))
	})

	It("copies every listener the broker's Lease announces into its row (defect 1)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		Eventually(func() error { // the registry announces only the cluster's own listeners
			kc := &kafkav1alpha1.KafkaCluster{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c}, kc); err != nil {
				return err
			}
			kc.Spec.Listeners = []kafkav1alpha1.Listener{{Name: "internal", Port: 9092}, {Name: "external", Port: 9094, Type: kafkav1alpha1.ListenerNodePort}}
			return env.Client.Update(ctx, kc)
		}).Should(Succeed())
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0)...)
		announced := []kafkav1alpha1.ListenerAddress{
			{Name: "internal", Host: "demo-broker-0.demo-brokers." + ns + ".svc.cluster.local", Port: 9092},
			{Name: "external", Host: podIP(0), Port: 9094},
		}
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60, extra: map[string]string{
			kafkav1alpha1.AnnotationListeners: kafkav1alpha1.FormatListeners(announced),
		}})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(And(Not(BeNil()), HaveField("Listeners", Equal(announced))))
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 0) }).
			Should(And(Not(BeNil()), HaveField("Status.Listeners", Equal(announced))))
	})

	It("deregisters the brokers of an EndpointSlice that is deleted whole", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: ns}})).To(Succeed())
		putSlice(ctx, ns, c, "demo-brokers-aaaaa", servingEndpoints(0, 1)...)
		putSlice(ctx, ns, c, "demo-brokers-bbbbb", servingEndpoints(2, 3)...)
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1, 2, 3}))
		Expect(env.Client.Delete(ctx, &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-brokers-bbbbb"},
		})).To(Succeed())
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1}))
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 3) }).Should(BeNil())
	})

})

// The reconciler here has an error backoff of an hour, so a failed reconcile is retried in time
// only if the retry is cut short at the next Lease expiry (controller-runtime drops the
// RequeueAfter of a failed reconcile). Each assertion waits as long as a loaded machine needs:
// without the cap nothing happens for an hour.
var _ = Describe("Registry error backoff", Ordered, func() {
	const (
		c     = "demo"
		lease = 4 // seconds: broker 1's Lease, renewed every 300 ms until it falls silent
	)
	var (
		clk    *testClock
		faulty *faultyClient
	)

	BeforeAll(func() {
		clk = &testClock{}
		faulty = &faultyClient{}
		startRegistry(clk, func(r *Reconciler) {
			faulty.Client = r.Client
			r.Client = faulty
			r.ErrorBackoff = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Hour, time.Hour)
		})
	})

	It("turns a silent broker Dead on time while its Broker writes fail (defect 4)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		faulty.namespace.Store(&ns)
		newCluster(ctx, ns, c, 2)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60})
		heartbeat(ctx, clk, ns, c, beat{id: 1, seconds: lease})
		var lastMu sync.Mutex
		var last time.Time
		stopBeats := beatEvery(300*time.Millisecond, func(ctx context.Context) {
			renew(ctx, clk, ns, c, 1, nil)
			lastMu.Lock()
			last = clk.Now()
			lastMu.Unlock()
		})
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 1) }).
			Should(And(Not(BeNil()), HaveField("Status.Health", kafkav1alpha1.BrokerAlive)))

		// Every Broker status write fails from now on. Broker 0 starts draining: its row
		// changes, so the reconcile that follows fails to write its Broker status, and so does
		// every one after it. Nothing else triggers one (broker 1's renewals of a fresh Lease
		// are filtered out), so a second failure is a retry the cap brought forward.
		faulty.failing.Store(true)
		DeferCleanup(func() { faulty.failing.Store(false) })
		renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationDraining: "true"})
		Eventually(faulty.failures.Load).Should(BeNumerically(">=", 2),
			"the failed reconcile must be retried by the next Lease expiry, not after the base backoff's hour")

		stopBeats() // broker 1 falls silent
		lastMu.Lock()
		expiry := last.Add(lease * time.Second)
		lastMu.Unlock()
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).WithPolling(50*time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonHeartbeatExpired),
				"the error backoff must not outlast the next Lease expiry")
		GinkgoWriter.Printf("registry: silent broker fenced %v after its Lease expired, by a retry of a failed reconcile (%d failed in a row; base backoff 1h)\n",
			clk.Since(expiry), faulty.failures.Load())
	})
})

// No manager runs here: the spec drives one reconciler's syncBroker by hand, so no other
// reconcile touches the Broker object between its two calls.
var _ = Describe("Broker status writes", func() {
	const c = "demo"
	var clk = &testClock{}
	It("records each transition once although the cache still shows the status before its own write (defect 9)", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		Expect(env.Client.Create(ctx, &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: ns}})).To(Succeed())
		kc := readCluster(ctx, ns, c)
		recorder := events.NewFakeRecorder(10)
		r := &Reconciler{Client: env.Client, Scheme: env.Scheme, Recorder: recorder, Clock: clk}

		alive := kafkav1alpha1.BrokerRow{ID: 0, Pod: "demo-broker-0", State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerAlive}
		dead := alive
		dead.State, dead.Health, dead.Reason = kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonHeartbeatExpired
		sync := func(row kafkav1alpha1.BrokerRow, why rules.Reasons, cached *kafkav1alpha1.Broker) {
			GinkgoHelper()
			cluster := kc.DeepCopy()
			cluster.Status.Brokers = []kafkav1alpha1.BrokerRow{row}
			s := &scope{cluster: cluster, orig: kc, now: clk.Now(), result: rules.Result{Rows: cluster.Status.Brokers, Reasons: []rules.Reasons{why}},
				brokers: map[int32]*kafkav1alpha1.Broker{}}
			if cached != nil {
				s.brokers[0] = cached.DeepCopy()
			}
			Expect(r.syncBroker(ctx, s, 0)).To(Succeed())
		}
		sync(alive, rules.Reasons{}, nil) // registers broker 0 and writes it Alive
		<-recorder.Events                 // Registered
		stale := readBroker(ctx, ns, c, 0)
		Expect(stale.Status.Health).To(Equal(kafkav1alpha1.BrokerAlive))

		expired := rules.Reasons{State: kafkav1alpha1.ReasonHeartbeatExpired, Health: kafkav1alpha1.ReasonHeartbeatExpired}
		sync(dead, expired, stale)
		sync(dead, expired, stale) // the cache has not delivered the first write yet
		var recorded []string
		for len(recorder.Events) > 0 {
			recorded = append(recorded, <-recorder.Events)
		}
		Expect(recorded).To(HaveLen(2), "one Fenced and one Dead event, not two of each: %v", recorded)
	})
})
