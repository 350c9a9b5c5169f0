package registry

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The KafkaCluster counts its ongoing transactions: the sum of what each broker's Lease says
// of the transactions its coordinator holds open, read strictly (docs/transactions.md, "In
// the KafkaCluster status").
var _ = Describe("Transaction counts", Ordered, func() {
	const c = "transacting"
	var clk *testClock

	BeforeAll(func() {
		clk = &testClock{}
		startRegistry(clk, nil)
	})

	// transactionsColumn is the Transactions cell of the cluster's row in the server-side
	// table `kubectl get pkc -o wide` prints.
	transactionsColumn := func(ctx context.Context, ns string) string {
		GinkgoHelper()
		table, err := env.Table(ctx, ns, "kafkaclusters")
		Expect(err).NotTo(HaveOccurred())
		Expect(table.Rows).To(HaveLen(1))
		for i, col := range table.ColumnDefinitions {
			if col.Name == "Transactions" {
				return fmt.Sprint(table.Rows[0].Cells[i])
			}
		}
		Fail("the kafkaclusters table has no Transactions column")
		return ""
	}
	// refusals are the notes of the InvalidHeartbeat Warnings about object name in ns.
	refusals := func(ctx context.Context, ns, name string) []string {
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

	It("sums the brokers' announcements into status.counts.ongoingTransactions, and follows them", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 2)
		putSlice(ctx, ns, c, "transacting-brokers-abc12", servingEndpoints(0, 1)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60, extra: map[string]string{kafkav1alpha1.AnnotationOngoingTransactions: "3"}})
		heartbeat(ctx, clk, ns, c, beat{id: 1, seconds: 60, extra: map[string]string{kafkav1alpha1.AnnotationOngoingTransactions: "2"}})
		total := func() int32 { return readCluster(ctx, ns, c).Status.Counts.OngoingTransactions }
		Eventually(total).Should(Equal(int32(5)))
		Expect(readRow(ctx, ns, c, 1).OngoingTransactions).To(Equal(int32(2)))
		Eventually(func() int32 {
			b := readBroker(ctx, ns, c, 1)
			if b == nil {
				return -1
			}
			return b.Status.OngoingTransactions
		}).Should(Equal(int32(2)), "the Broker object mirrors its row")
		Expect(transactionsColumn(ctx, ns)).To(Equal("5"))

		By("broker 1 no longer holding a transaction open")
		renew(ctx, clk, ns, c, 1, map[string]string{kafkav1alpha1.AnnotationOngoingTransactions: ""})
		Eventually(total).Should(Equal(int32(3)))
		Expect(readRow(ctx, ns, c, 1).OngoingTransactions).To(BeZero())

		By("broker 0 announcing a count no broker could hold: not believed, nothing counted for it, a Warning")
		renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationOngoingTransactions: "2000000"})
		Eventually(total).Should(BeZero(), "written as 0, not left standing at 3")
		Expect(readRow(ctx, ns, c, 0).OngoingTransactions).To(BeZero())
		Eventually(func() []string { return refusals(ctx, ns, kafkav1alpha1.BrokerObjectName(c, 0)) }).
			Should(ContainElement(ContainSubstring(kafkav1alpha1.AnnotationOngoingTransactions)))
		Expect(transactionsColumn(ctx, ns)).To(Equal("0"))

		By("broker 0 announcing a well-formed count again")
		renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationOngoingTransactions: "4"})
		Eventually(total).Should(Equal(int32(4)))
	})
})
