package registry

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The recovery reconciler owns one condition of a Broker's status, BrokerRecovery, under its
// own field manager (docs/recovery.md, "Who writes what"); the registry owns the rest.
var _ = Describe("Broker status ownership", func() {
	It("keeps the recovery reconciler's condition through its own writes and never writes an old value of it back, across an operator restart", func(ctx SpecContext) {
		const c = "own"
		clk := &testClock{}
		writes, stopFirst := startRegistry(clk, nil)
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		startBrokers(ctx, clk, ns, c, 60, 0)
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		Eventually(func() bool { b := readBroker(ctx, ns, c, 0); return b != nil && b.Status.State != "" }).Should(BeTrue())

		By("the recovery reconciler applies its condition")
		applyRecovery := func(reason string) {
			GinkgoHelper()
			cond := metav1.Condition{Type: kafkav1alpha1.ConditionBrokerRecovery, Status: metav1.ConditionFalse,
				Reason: reason, Message: "recovery says " + reason, LastTransitionTime: metav1.Now()}
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&cond)
			Expect(err).NotTo(HaveOccurred())
			u := &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{content}}}}
			u.SetGroupVersionKind(kafkav1alpha1.GroupVersion.WithKind("Broker"))
			u.SetNamespace(ns)
			u.SetName(kafkav1alpha1.BrokerObjectName(c, 0))
			Expect(env.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
				client.FieldOwner(kafkav1alpha1.FieldOwnerRecovery), client.ForceOwnership)).To(Succeed())
		}
		applyRecovery(kafkav1alpha1.ReasonNodeLossPending)
		settled(writes, ns)
		By("the operator restarts: the new registry remembers no write of its own")
		stopFirst()
		writes, _ = startRegistry(clk, nil)
		settled(writes, ns)
		before := writes.Writes(ns)

		By("the broker starts draining: the registry writes its status, the other condition stays")
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60, draining: true})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerDraining, kafkav1alpha1.ReasonDraining))
		Eventually(func(g Gomega) {
			b := readBroker(ctx, ns, c, 0)
			g.Expect(b.Status.Health).To(Equal(kafkav1alpha1.BrokerDraining))
			g.Expect(meta.IsStatusConditionFalse(b.Status.Conditions, kafkav1alpha1.ConditionAlive)).To(BeTrue())
			kept := meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery)
			g.Expect(kept).NotTo(BeNil(), "the registry's apply removed the recovery reconciler's condition")
			g.Expect(kept.Reason).To(Equal(kafkav1alpha1.ReasonNodeLossPending))
		}).Should(Succeed())
		settled(writes, ns)
		Expect(writes.Writes(ns)-before).To(BeNumerically("<=", 3), "the foreign condition must not make the registry write on every reconcile")

		By("the recovery reconciler changes its condition, then the registry writes again: never the old value back")
		applyRecovery(kafkav1alpha1.ReasonHeartbeatFresh)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60})
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""))
		Eventually(func(g Gomega) {
			b := readBroker(ctx, ns, c, 0)
			g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, kafkav1alpha1.ConditionAlive)).To(BeTrue())
		}).Should(Succeed())
		settled(writes, ns)
		b := readBroker(ctx, ns, c, 0)
		Expect(meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery).Reason).
			To(Equal(kafkav1alpha1.ReasonHeartbeatFresh), "the registry wrote back a value of the condition it does not own")
	})
})
