package registry

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The KafkaCluster counts its consumer groups by protocol and state: the sum of what each
// broker's Lease says of the groups it coordinates, read strictly (docs/groups.md, "In the
// KafkaCluster status").
var _ = Describe("Group counts", Ordered, func() {
	const c = "counted"
	var clk *testClock

	BeforeAll(func() {
		clk = &testClock{}
		startRegistry(clk, nil)
	})

	It("sums the brokers' announcements into status.groups and status.counts.groups, and follows them", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c, 2)
		putSlice(ctx, ns, c, "counted-brokers-abc12", servingEndpoints(0, 1)...)
		heartbeat(ctx, clk, ns, c, beat{id: 0, seconds: 60, extra: map[string]string{kafkav1alpha1.AnnotationGroups: "classic/Stable=2,consumer/Reconciling=1"}})
		heartbeat(ctx, clk, ns, c, beat{id: 1, seconds: 60, extra: map[string]string{kafkav1alpha1.AnnotationGroups: "classic/Stable=1"}})
		groups := func() []kafkav1alpha1.GroupCount { return readCluster(ctx, ns, c).Status.Groups }
		total := func() int32 { return readCluster(ctx, ns, c).Status.Counts.Groups }
		Eventually(groups).Should(Equal([]kafkav1alpha1.GroupCount{
			{Protocol: "classic", State: "Stable", Count: 3}, {Protocol: "consumer", State: "Reconciling", Count: 1}}))
		Expect(total()).To(Equal(int32(4)))
		Expect(readRow(ctx, ns, c, 1).Groups).To(Equal([]kafkav1alpha1.GroupCount{{Protocol: "classic", State: "Stable", Count: 1}}))

		By("broker 1 no longer coordinating anything")
		renew(ctx, clk, ns, c, 1, map[string]string{kafkav1alpha1.AnnotationGroups: ""})
		Eventually(total).Should(Equal(int32(3)))

		By("broker 0 announcing a count no broker could hold: not believed, nothing counted for it")
		renew(ctx, clk, ns, c, 0, map[string]string{kafkav1alpha1.AnnotationGroups: "classic/Stable=2000000"})
		Eventually(groups).Should(BeEmpty())
		Expect(total()).To(BeZero())
	})
})
