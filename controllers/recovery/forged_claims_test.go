package recovery

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The fence gate reads a digest each leader writes on its own Lease; what a Lease says is
// the broker's to write, so the gate believes only a digest that can be one, of exactly the
// partitions the assignment gave that broker, announced by the incarnation it gave them to
// (docs/recovery.md, "The fence gate"; docs/security.md, "Threat model").
var _ = Describe("Forged claims", func() {
	// warned is the notes of the Warnings reason about object name in ns.
	warned := func(ctx context.Context, ns, name, reason string) []string {
		list := &eventsv1.EventList{}
		Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason && e.Type == "Warning" {
				notes = append(notes, e.Note)
			}
		}
		return notes
	}
	// claim makes broker 0's Lease announce value as incarnation epoch.
	claim := func(ctx context.Context, ns, value string, epoch int32) {
		GinkgoHelper()
		Eventually(func() error {
			l := &coordinationv1.Lease{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: kafkav1alpha1.LeaseName("c", 0)}, l); err != nil {
				return err
			}
			l.Annotations[kafkav1alpha1.AnnotationClaimed] = value
			l.Spec.LeaseTransitions = ptr.To(epoch)
			return env.Client.Update(ctx, l)
		}).Should(Succeed())
	}

	It("never releases the gate on a lying digest, and warns about one that cannot be a digest", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		honest := kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: topicID, Partition: 0, Epoch: 2}})
		claim(ctx, w.ns, "1/deadbeefdeadbeef", 0)
		victim := makePod(ctx, w.ns, 1, w.lost)
		startRecovery()
		Eventually(func() string { return reasonOf(ctx, w.ns, 1) }).Should(Equal(kafkav1alpha1.ReasonPartitionsNotClaimed))

		for _, lie := range []struct {
			what, value string
			epoch       int32
			warning     string // "" = none: the lie is well-formed, only wrong
		}{
			{"the right count and a made-up hash", "1/deadbeefdeadbeef", 0, ""},
			{"the partition at an older epoch", kafkav1alpha1.FormatClaims([]kafkav1alpha1.PartitionClaim{{TopicID: topicID, Partition: 0, Epoch: 1}}), 0, ""},
			{"the honest digest, announced by an incarnation the partition was not given to", honest, 1, ""},
			{"more partitions than the cluster has", "2/abc", 0, "claims 2 partitions, and the cluster has 1"},
			{"something that is no digest", "all of them", 0, "not <count>/<digest>"},
		} {
			By("broker 0's Lease claiming " + lie.what)
			claim(ctx, w.ns, lie.value, lie.epoch)
			if lie.warning != "" {
				Eventually(func() []string {
					return warned(ctx, w.ns, kafkav1alpha1.BrokerObjectName("c", 0), kafkav1alpha1.EventInvalidHeartbeat)
				}).
					WithTimeout(10 * time.Second).Should(ContainElement(ContainSubstring(lie.warning)))
			}
			Consistently(func() string { return podUID(ctx, w.ns, victim.Name) }).WithTimeout(1500 * time.Millisecond).Should(Equal(string(victim.UID)))
			Expect(reasonOf(ctx, w.ns, 1)).To(Equal(kafkav1alpha1.ReasonPartitionsNotClaimed))
		}

		By("the honest digest of the incarnation the assignment gave the partition to opens the gate")
		claim(ctx, w.ns, honest, 0)
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
	})

	It("warns about an auto-recover value other than true or false and keeps recovery on", func(ctx SpecContext) {
		w := setUp(ctx, time.Now().Add(-time.Minute))
		Eventually(func() error {
			kc := &kafkav1alpha1.KafkaCluster{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: "c"}, kc); err != nil {
				return err
			}
			kc.Annotations = map[string]string{kafkav1alpha1.AnnotationAutoRecover: "False"}
			return env.Client.Update(ctx, kc)
		}).Should(Succeed())
		victim := makePod(ctx, w.ns, 1, w.lost)
		startRecovery()
		Eventually(func() []string { return warned(ctx, w.ns, "c", kafkav1alpha1.EventInvalidAnnotation) }).
			WithTimeout(20 * time.Second).Should(ContainElement(ContainSubstring(`is "False", not "true" or "false": node-loss recovery stays on`)))
		Eventually(func() string { return podUID(ctx, w.ns, victim.Name) }).Should(Equal("gone"))
	})
})
