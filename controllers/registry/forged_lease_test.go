package registry

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// A broker's Lease is the broker's own to write; what it says that is not the broker protocol
// — a host no client could resolve, a listener the cluster does not have, a claims digest, a
// lease duration of a day — never reaches status, and a person is told with a Warning
// (docs/registry.md, "What a Lease may say"; docs/security.md, "Threat model").
var _ = Describe("Forged heartbeat Leases", Ordered, func() {
	const c = "forged"
	var clk *testClock

	BeforeAll(func() {
		clk = &testClock{}
		startRegistry(clk, nil)
	})

	// warnings are the notes of the InvalidHeartbeat Warnings about object name in ns.
	warnings := func(ctx context.Context, ns, name string) []string {
		list := &eventsv1.EventList{}
		Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == kafkav1alpha1.EventInvalidHeartbeat && e.Type == "Warning" {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}

	It("keeps the row as it was and warns, whatever the Lease announces, and a day-long lease duration does not keep a silent broker alive", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 1)
		Eventually(func() error { // a short session timeout, so the last step is quick
			kc := readCluster(ctx, ns, c)
			kc.Spec.Heartbeat.SessionTimeout = &metav1.Duration{Duration: 3 * time.Second}
			return env.Client.Update(ctx, kc)
		}).Should(Succeed())
		putSlice(ctx, ns, c, "forged-brokers-abc12", servingEndpoints(0)...)
		good := kafkav1alpha1.ListenerAddress{Name: "kafka", Host: "forged-broker-0.forged-brokers." + ns + ".svc.cluster.local", Port: 9092}
		announce := map[string]string{kafkav1alpha1.AnnotationListeners: kafkav1alpha1.FormatListeners([]kafkav1alpha1.ListenerAddress{good})}
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 3, extra: announce})
		stop := beatEvery(300*time.Millisecond, func(ctx context.Context) { renew(ctx, clk, ns, c, 0, nil) })
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).Should(And(
			rowSays(kafkav1alpha1.BrokerServing, kafkav1alpha1.BrokerAlive, ""),
			HaveField("Listeners", Equal([]kafkav1alpha1.ListenerAddress{good}))))
		before := readRow(ctx, ns, c, 0)
		broker := kafkav1alpha1.BrokerObjectName(c, 0)

		for _, forged := range []struct{ what, listeners, warning string }{
			{"a host longer than a DNS name", "kafka=" + strings.Repeat("x", 300) + ":9092", "more than 253"},
			{"a listener the cluster does not have", "kafka=evil.example.com:9092,admin=evil.example.com:9999", `listener "admin" is not one of the cluster's`},
			{"a port out of range", "kafka=evil.example.com:99999", "not in 1..65535"},
		} {
			By("announcing " + forged.what)
			renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationListeners: forged.listeners})
			Eventually(func() []string { return warnings(ctx, ns, broker) }).Should(ContainElement(ContainSubstring(forged.warning)))
			row := readRow(ctx, ns, c, 0)
			Expect(row.Listeners).To(Equal(before.Listeners), "the addresses last believed stand")
			Expect(row.Health).To(Equal(kafkav1alpha1.BrokerAlive))
		}

		By("announcing a claims digest, which the registry never reads")
		renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationClaimed: "999999/ffffffffffffffff"})
		Consistently(func() []kafkav1alpha1.ListenerAddress { return readRow(ctx, ns, c, 0).Listeners }).
			WithTimeout(2 * time.Second).Should(Equal(before.Listeners))

		By("claiming a lease duration of a day, then falling silent")
		Eventually(func() error {
			lease := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.LeaseName(c, 0)}, lease); err != nil {
				return err
			}
			lease.Spec.LeaseDurationSeconds = ptr.To[int32](86400)
			lease.Spec.RenewTime = &metav1.MicroTime{Time: clk.Now()}
			return env.Client.Update(ctx, lease)
		}).Should(Succeed())
		Eventually(func() []string { return warnings(ctx, ns, broker) }).Should(ContainElement(ContainSubstring("longer than the cluster's session timeout 3s")))
		stop()
		silent := time.Now()
		Eventually(func() *kafkav1alpha1.BrokerRow { return readRow(ctx, ns, c, 0) }).
			Should(rowSays(kafkav1alpha1.BrokerFenced, kafkav1alpha1.BrokerDead, kafkav1alpha1.ReasonHeartbeatExpired))
		GinkgoWriter.Printf("a broker claiming a 86400 s lease was Dead %s after its last beat (session timeout 3 s)\n", time.Since(silent).Round(time.Millisecond))
		Expect(readRow(ctx, ns, c, 0).Listeners).To(Equal(before.Listeners), "nothing forged reached status")
		Expect(len(warnings(ctx, ns, broker))).To(BeNumerically(">=", 4), "one Warning per thing refused")
	})
})
