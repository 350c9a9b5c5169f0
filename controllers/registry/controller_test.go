package registry

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// The registry specs write EndpointSlices and Leases by hand, the way the EndpointSlice
// controller and the brokers would, and read the result through the uncached client.
var _ = Describe("Registry", Ordered, func() {
	const (
		c          = "demo"
		longLease  = 60 // seconds: brokers that must stay alive for the whole spec
		shortLease = 2  // seconds: the broker a spec lets fall silent
	)
	var (
		clk    *testClock
		writes *testenv.CountingClient
	)

	BeforeAll(func() {
		SetDefaultConsistentlyDuration(time.Second)
		DeferCleanup(SetDefaultConsistentlyDuration, 100*time.Millisecond)
		clk = &testClock{}
		writes, _ = startRegistry(clk, nil)
	})

	It("reports three serving, heartbeating brokers as Serving and Alive", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)

		Eventually(func(g Gomega) {
			kc := readCluster(ctx, ns, c)
			g.Expect(kc.Status.Counts).To(Equal(kafkav1alpha1.BrokerCounts{Registered: 3, Serving: 3, Alive: 3}))
			g.Expect(kc.Status.Brokers).To(HaveLen(3))
			for i, row := range kc.Status.Brokers {
				id := int32(i)
				g.Expect(row.ID).To(Equal(id))
				g.Expect(row.State).To(Equal(kafkav1alpha1.BrokerServing))
				g.Expect(row.Health).To(Equal(kafkav1alpha1.BrokerAlive))
				g.Expect(row.Reason).To(BeEmpty())
				g.Expect(row.Pod).To(Equal(kafkav1alpha1.BrokerPodName(c, id)))
				g.Expect(row.Host).To(Equal(podIP(id)))
				g.Expect(row.Port).To(Equal(int32(9092)))
				g.Expect(row.Rack).To(Equal(fmt.Sprintf("zone-%c", 'a'+id)))
				g.Expect(row.Node).To(Equal(fmt.Sprintf("node-%d", id)))
				g.Expect(row.Epoch).To(Equal(int64(1)))
				g.Expect(row.LastSeen).NotTo(BeNil())
			}
		}).Should(Succeed())

		kc := readCluster(ctx, ns, c)
		for id := int32(0); id < 3; id++ {
			Eventually(func(g Gomega) {
				b := readBroker(ctx, ns, c, id)
				g.Expect(b).NotTo(BeNil())
				g.Expect(metav1.IsControlledBy(b, kc)).To(BeTrue(), "owned by the KafkaCluster")
				g.Expect(b.Labels).To(Equal(map[string]string{
					kafkav1alpha1.LabelName: kafkav1alpha1.LabelNameValue, kafkav1alpha1.LabelInstance: c,
					kafkav1alpha1.LabelCluster: c, kafkav1alpha1.LabelBrokerID: fmt.Sprint(id),
				}))
				g.Expect(b.Status.Cluster).To(Equal(c))
				g.Expect(b.Status.Ready).To(BeTrue())
				g.Expect(b.Status.BrokerRow).To(Equal(kc.Status.Brokers[id]))
				g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, kafkav1alpha1.ConditionReady)).To(BeTrue())
				g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, kafkav1alpha1.ConditionAlive)).To(BeTrue())
			}).Should(Succeed())
		}
		Eventually(func() []string { return eventReasons(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 0)) }).
			Should(ContainElement(kafkav1alpha1.EventRegistered))
	})

	It("shows kubectl get brokers the real values in every column", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 2)
		startBrokers(ctx, clk, ns, c, longLease, 0)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0)...)

		Eventually(func(g Gomega) {
			rows := brokerTable(ctx, ns)
			g.Expect(rows).To(HaveLen(2))
			g.Expect(rows[0]).To(gstruct.MatchKeys(gstruct.IgnoreExtras, gstruct.Keys{
				"Name": Equal("demo-0"), "Cluster": Equal(c), "ID": Equal("0"), "State": Equal("Serving"),
				"Health": Equal("Alive"), "Rack": Equal("zone-a"), "Reason": Equal("<nil>"),
				"Epoch": Equal("1"), "Pod": Equal("demo-broker-0"), "Node": Equal("node-0"),
				"Last-Seen": MatchRegexp(`^\d+s$`), "Age": MatchRegexp(`^\d+s$`),
			}))
			g.Expect(rows[1]).To(gstruct.MatchKeys(gstruct.IgnoreExtras, gstruct.Keys{
				"Name": Equal("demo-1"), "ID": Equal("1"), "State": Equal("Fenced"), "Health": Equal("Dead"),
				"Reason": Equal(kafkav1alpha1.ReasonStarting), "Pod": Equal("demo-broker-1"),
			}))
		}).Should(Succeed())
	})

	It("fences a broker whose endpoint stops serving at once, before any Lease expires", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Counts.Serving }).Should(Equal(int32(3)))

		putSlice(ctx, ns, c, "demo-brokers-abc12",
			endpoint{id: 0, serving: true}, endpoint{id: 1, serving: false}, endpoint{id: 2, serving: true})
		start := time.Now()
		// No wall-clock bound: the row can read Fenced and still Alive only if the slice's
		// change itself brought a reconcile, before the 60 s Leases expire; a requeue at their
		// expiry would find the broker Dead instead.
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).WithPolling(20 * time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerAlive, kafkav1alpha1.ReasonNotServing))
		GinkgoWriter.Printf("registry: broker fenced %v after its endpoint stopped serving\n", time.Since(start))

		Eventually(func(g Gomega) {
			b := readBroker(ctx, ns, c, 1)
			g.Expect(b.Status.Ready).To(BeFalse())
			g.Expect(meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionReady)).
				To(HaveField("Reason", kafkav1alpha1.ReasonNotServing))
			g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, kafkav1alpha1.ConditionAlive)).To(BeTrue(),
				"a fenced broker is still alive: readiness never gates the alive set")
		}).Should(Succeed())
		b := readBroker(ctx, ns, c, 1)
		Eventually(func() []string { return eventReasons(ctx, ns, b.Name) }).Should(ContainElement(kafkav1alpha1.EventFenced))

		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1, 2)...)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		Eventually(func() []string { return eventReasons(ctx, ns, b.Name) }).Should(ContainElement(kafkav1alpha1.EventServing))
	})

	It("declares a silent broker Dead and fences it when its Lease expires, keeping the time its last renewal was seen as lastSeen", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1, 2)...)
		var lastRenew time.Time
		for range 3 {
			lastRenew = heartbeat(ctx, clk, ns, c, beat{id: 2, seconds: shortLease})
			time.Sleep(300 * time.Millisecond)
		}
		// The broker falls silent now. Real time and the reconciler's clock run together here;
		// nothing but the requeue at the Lease's expiry wakes the reconciler.
		expiry := lastRenew.Add(shortLease * time.Second)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 2) }).
			WithTimeout(time.Until(expiry) + expiryWithin).WithPolling(50 * time.Millisecond).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonHeartbeatExpired))
		deadSeen := clk.Now()
		GinkgoWriter.Printf("registry: broker Dead %v after its last renewal (lease %ds)\n", clk.Since(lastRenew), shortLease)

		row := readRow(ctx, ns, c, 2)
		lastSeen := row.LastSeen.Time
		GinkgoWriter.Printf("registry: lastSeen %v after the last renewal was written (whole seconds)\n", lastSeen.Sub(lastRenew))
		// lastSeen is when the operator observed the last renewal, on its clock: not before the
		// renewal was written, and at least a lease before Dead was seen (Dead is declared a
		// lease after that observation). A lastSeen taken when the death was declared fails
		// the second bound; how late the observation came on a loaded machine does not.
		Expect(lastSeen).To(BeTemporally(">=", lastRenew.Truncate(time.Second)))
		Expect(lastSeen).To(BeTemporally("<=", deadSeen.Add(-shortLease*time.Second)),
			"lastSeen is when the last renewal was observed (on the operator's clock, in whole seconds)")
		Expect(readCluster(ctx, ns, c).Status.Counts).To(Equal(kafkav1alpha1.BrokerCounts{Registered: 3, Serving: 2, Fenced: 1, Alive: 2, Dead: 1}))
		Eventually(func() []metav1.Condition { return readBroker(ctx, ns, c, 2).Status.Conditions }).
			Should(ContainElement(And(HaveField("Type", kafkav1alpha1.ConditionAlive),
				HaveField("Status", metav1.ConditionFalse), HaveField("Reason", kafkav1alpha1.ReasonHeartbeatExpired))))
		b := readBroker(ctx, ns, c, 2)
		Eventually(func() []string { return eventReasons(ctx, ns, b.Name) }).Should(ContainElement(kafkav1alpha1.EventDead))

		Consistently(func() *metav1.Time { return readRow(ctx, ns, c, 2).LastSeen }).WithTimeout(1500*time.Millisecond).
			Should(HaveField("Time", BeTemporally("==", lastSeen)), "a dead broker's lastSeen is never refreshed")
	})

	It("reports a draining broker as Draining and drops it from the alive count", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Counts.Alive }).Should(Equal(int32(3)))

		heartbeat(ctx, clk, ns, c, beat{id: 1, seconds: longLease, draining: true})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerDraining, kafkav1alpha1.ReasonDraining))
		Expect(readCluster(ctx, ns, c).Status.Counts).To(Equal(kafkav1alpha1.BrokerCounts{Registered: 3, Serving: 3, Alive: 2, Draining: 1}))
		Eventually(func() []string { return eventReasons(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 1)) }).
			Should(ContainElement(kafkav1alpha1.EventDraining))
	})

	It("deregisters a broker after a scale-down: its Broker object is deleted and its row gone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1)
		renewed := heartbeat(ctx, clk, ns, c, beat{id: 2, seconds: shortLease})
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1, 2)...)
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 2) }).ShouldNot(BeNil())

		setReplicas(ctx, ns, c, 2)
		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 1)...)
		// Broker 2's pod is gone, so its Lease is no longer renewed and goes stale.
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 2) }).
			WithTimeout(time.Until(renewed.Add(shortLease*time.Second)) + expiryWithin).Should(BeNil())
		GinkgoWriter.Printf("registry: broker 2 deregistered %v after its Lease's last renewal (lease %ds)\n", clk.Since(renewed), shortLease)
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1}))
		Expect(readCluster(ctx, ns, c).Status.Counts.Registered).To(Equal(int32(2)))
		Eventually(func() []string { return eventReasons(ctx, ns, c) }).Should(ContainElement(kafkav1alpha1.EventDeregistered))
	})

	It("keeps a broker whose pod is being recreated registered as Fenced/PodMissing", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 3)
		startBrokers(ctx, clk, ns, c, longLease, 0, 1, 2)
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Counts.Serving }).Should(Equal(int32(3)))

		putSlice(ctx, ns, c, "demo-brokers-abc12", servingEndpoints(0, 2)...)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 1) }).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerAlive, kafkav1alpha1.ReasonPodMissing))
		Consistently(func() []int32 { return readIDs(ctx, ns, c) }).WithTimeout(time.Second).Should(Equal([]int32{0, 1, 2}))
		Expect(readBroker(ctx, ns, c, 1)).NotTo(BeNil())
	})

	It("registers the union of sharded slices, and an update to one slice never drops the other's brokers", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		// No StatefulSet and no Leases: registration rests on the slices alone.
		Expect(env.Client.Create(ctx, &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Namespace: ns}})).To(Succeed())
		putSlice(ctx, ns, c, "demo-brokers-aaaaa", servingEndpoints(0, 1)...)
		putSlice(ctx, ns, c, "demo-brokers-bbbbb", servingEndpoints(2, 3)...)
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1, 2, 3}))

		putSlice(ctx, ns, c, "demo-brokers-aaaaa", endpoint{id: 0, serving: false}, endpoint{id: 1, serving: true})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonStarting))
		Consistently(func() []int32 { return readIDs(ctx, ns, c) }).WithTimeout(time.Second).Should(Equal([]int32{0, 1, 2, 3}))

		putSlice(ctx, ns, c, "demo-brokers-bbbbb", servingEndpoints(2)...)
		Eventually(func() []int32 { return readIDs(ctx, ns, c) }).Should(Equal([]int32{0, 1, 2}))
		// The cluster status is written before the Broker objects, so the object goes a moment
		// after the row.
		Eventually(func() *kafkav1alpha1.Broker { return readBroker(ctx, ns, c, 3) }).Should(BeNil())
	})

	// Last: it moves the reconciler's clock a minute ahead, which ages every other spec's Leases.
	It("writes nothing for 60 s of heartbeats from 100 unchanged brokers", func(ctx SpecContext) {
		const brokers, rounds = 100, 60
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, brokers)
		ids := make([]int32, brokers)
		for i := range ids {
			ids[i] = int32(i)
		}
		startBrokers(ctx, clk, ns, c, 30, ids...)
		Eventually(func(g Gomega) {
			g.Expect(readCluster(ctx, ns, c).Status.Counts).To(Equal(kafkav1alpha1.BrokerCounts{Registered: brokers, Serving: brokers, Alive: brokers}))
			list := &kafkav1alpha1.BrokerList{}
			g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(HaveLen(brokers))
			for _, b := range list.Items {
				g.Expect(b.Status.State).To(Equal(kafkav1alpha1.BrokerServing))
			}
		}).Should(Succeed())
		// Settled: a second without any write.
		settled(writes, ns)
		before := writes.Writes(ns)
		kcVersion := readCluster(ctx, ns, c).ResourceVersion

		// Each round is one second of the reconciler's clock and one beat of every broker.
		// Broker 0's beat also changes an annotation, so each round reaches the reconciler
		// (a plain renewal of a fresh Lease is filtered out before it) and recomputes all 100
		// rows with renewTimes a second newer: this pins the row logic, not only the filter.
		start := time.Now()
		for round := range rounds {
			clk.Step(time.Second)
			inParallel(brokers, 20, func(id int) {
				var extra map[string]string
				if id == 0 {
					extra = map[string]string{"test.paddock.dev/round": fmt.Sprint(round)}
				}
				renew(ctx, clk, ns, c, int32(id), extra)
			})
		}
		GinkgoWriter.Printf("registry: %d heartbeats took %v\n", rounds*brokers, time.Since(start))
		Consistently(func() int { return writes.Writes(ns) - before }).WithTimeout(2 * time.Second).Should(BeZero())
		Expect(readCluster(ctx, ns, c).ResourceVersion).To(Equal(kcVersion), "the KafkaCluster was not written")
		GinkgoWriter.Printf("registry: %d rounds of %d heartbeats, %d writes\n", rounds, brokers, writes.Writes(ns)-before)
	})
})
