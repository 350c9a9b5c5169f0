package assignment

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/kafkacluster"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// The assignment specs hand-write the registry rows (status.brokers and counts) the way the
// registry reconciler would, run the assignment reconciler and — for the cluster's Degraded
// condition, which it owns — the provisioning reconciler, and read the result through the
// uncached client. The broker's part of a deletion (removing the data finalizer) is done by
// hand too.
var _ = Describe("Assignment", Ordered, func() {
	const (
		c                   = "demo"
		alive, dead, drains = kafkav1alpha1.BrokerAlive, kafkav1alpha1.BrokerDead, kafkav1alpha1.BrokerDraining
	)
	var writes *testenv.CountingClient

	BeforeAll(func() {
		env.StartManager(func(mgr ctrl.Manager) error {
			writes = testenv.NewCountingClient(mgr.GetClient())
			if err := (&Reconciler{Client: writes, Recorder: mgr.GetEventRecorder("assignment")}).SetupWithManager(mgr); err != nil {
				return err
			}
			return (&kafkacluster.Reconciler{
				Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkacluster"),
				Options: kafkacluster.Options{DefaultBrokerImage: "paddock:test"},
			}).SetupWithManager(mgr)
		})
	})

	// assigned waits until topic name has n partitions, all led by alive brokers of the
	// given set, and returns them.
	assigned := func(ctx context.Context, ns, name string, n int, ids ...int32) map[int32]kafkav1alpha1.PartitionStatus {
		GinkgoHelper()
		var parts map[int32]kafkav1alpha1.PartitionStatus
		Eventually(func(g Gomega) {
			kt := readTopic(ctx, ns, name)
			parts = leaders(kt)
			g.Expect(parts).To(HaveLen(n))
			for _, p := range parts {
				g.Expect(ids).To(ContainElement(p.Leader), "partition %d", p.Partition)
			}
			g.Expect(kt.Status.ObservedGeneration).To(Equal(kt.Generation))
		}).Should(Succeed())
		return parts
	}

	It("gives a topic leaders over the alive brokers, evenly, at epoch 1, with a topic id and Ready", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1), row(2, alive, 3), row(3, dead, 1))
		newTopic(ctx, ns, c, "orders", 6)

		parts := assigned(ctx, ns, "orders", 6, 0, 1, 2)
		Expect(perBroker(parts)).To(Equal(map[int32]int{0: 2, 1: 2, 2: 2}))
		for _, p := range parts {
			Expect(p.LeaderEpoch).To(Equal(int32(1)), "a partition's first leader has epoch 1")
			Expect(p.LeaderIncarnation).To(Equal(map[int32]int64{0: 1, 1: 1, 2: 3}[p.Leader]), "the leader's row epoch is stored")
		}
		kt := readTopic(ctx, ns, "orders")
		Expect(kt.Status.TopicID).To(HaveLen(22))
		Expect(kt.Status.TopicName).To(Equal("orders"))
		Expect(meta.IsStatusConditionTrue(kt.Status.Conditions, kafkav1alpha1.ConditionReady)).To(BeTrue())
		Expect(meta.IsStatusConditionFalse(kt.Status.Conditions, kafkav1alpha1.ConditionDegraded)).To(BeTrue())
		Expect(kt.Finalizers).To(ConsistOf(kafkav1alpha1.FinalizerAssignment, kafkav1alpha1.FinalizerData))
		Eventually(func(g Gomega) {
			kc := readCluster(ctx, ns, c)
			g.Expect(kc.Status.Partitions).To(Equal(int32(6)))
			g.Expect(kc.Status.Topics).To(Equal(int32(1)))
			g.Expect(kc.Status.CoordinatorEpoch).To(Equal(int64(1)))
			g.Expect(kc.Status.CoordinatorBrokers).To(Equal(&kafkav1alpha1.CoordinatorBrokers{Registered: []int32{0, 1, 2, 3}, Alive: []int32{0, 1, 2}, AliveEpochs: []int64{1, 1, 3}}))
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(ctx, ns, "orders") }).Should(ContainElement(kafkav1alpha1.EventLeadersChanged))

		table, err := env.Table(ctx, ns, "kafkatopics")
		Expect(err).NotTo(HaveOccurred())
		cells := map[string]any{}
		for i, col := range table.ColumnDefinitions {
			cells[col.Name] = table.Rows[0].Cells[i]
		}
		Expect(cells).To(HaveKeyWithValue("Cluster", c))
		Expect(cells).To(HaveKeyWithValue("Topic", "orders"))
		Expect(cells).To(HaveKeyWithValue("Partitions", BeNumerically("==", 6)))
		Expect(cells).To(HaveKeyWithValue("Ready", "True"))
		Expect(cells).To(HaveKeyWithValue("Topic-ID", kt.Status.TopicID))
	})

	// moveSpec checks that changing one broker's row moves exactly that broker's partitions,
	// each at its epoch + 1, and nothing else.
	moveSpec := func(ctx context.Context, health kafkav1alpha1.BrokerHealth) {
		GinkgoHelper()
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1), row(2, alive, 1))
		newTopic(ctx, ns, c, "orders", 9)
		newTopic(ctx, ns, c, "payments", 3)
		before := map[string]map[int32]kafkav1alpha1.PartitionStatus{
			"orders": assigned(ctx, ns, "orders", 9, 0, 1, 2), "payments": assigned(ctx, ns, "payments", 3, 0, 1, 2),
		}
		Eventually(func() int64 { return readCluster(ctx, ns, c).Status.CoordinatorEpoch }).Should(Equal(int64(1)))

		setRows(ctx, ns, c, row(0, alive, 1), row(1, health, 1), row(2, alive, 1))
		for topic, n := range map[string]int{"orders": 9, "payments": 3} {
			after := assigned(ctx, ns, topic, n, 0, 2)
			for i, was := range before[topic] {
				now := after[i]
				if was.Leader == 1 {
					Expect(now.LeaderEpoch).To(Equal(was.LeaderEpoch+1), "%s/%d moved off broker 1", topic, i)
				} else {
					Expect(now).To(Equal(was), "%s/%d was not on broker 1 and must not move", topic, i)
				}
			}
		}
		Eventually(func() int64 { return readCluster(ctx, ns, c).Status.CoordinatorEpoch }).Should(Equal(int64(2)),
			"the alive set changed: the coordinator epoch is bumped")
	}

	It("moves exactly a dead broker's partitions, each at epoch + 1", func(ctx SpecContext) { moveSpec(ctx, dead) })
	It("moves exactly a draining broker's partitions, each at epoch + 1", func(ctx SpecContext) { moveSpec(ctx, drains) })

	It("keeps a restarted broker's partitions with it at epoch + 1", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1), row(2, alive, 1))
		newTopic(ctx, ns, c, "orders", 6)
		before := assigned(ctx, ns, "orders", 6, 0, 1, 2)

		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 2), row(2, alive, 1)) // broker 1's Lease epoch grew
		Eventually(func(g Gomega) {
			after := leaders(readTopic(ctx, ns, "orders"))
			for i, was := range before {
				now := after[i]
				g.Expect(now.Leader).To(Equal(was.Leader), "partition %d keeps its leader", i)
				if was.Leader == 1 {
					g.Expect(now.LeaderEpoch).To(Equal(was.LeaderEpoch+1), "partition %d: new incarnation, new epoch", i)
					g.Expect(now.LeaderIncarnation).To(Equal(int64(2)))
				} else {
					g.Expect(now).To(Equal(was))
				}
			}
		}).Should(Succeed())
		Eventually(func() int64 { return readCluster(ctx, ns, c).Status.CoordinatorEpoch }).Should(Equal(int64(2)),
			"a restart changes neither set, but its new process must not inherit its old one's group fences: the coordinator epoch is bumped")
	})

	It("takes a failed partition over again on its broker, then moves it, and reports one failed everywhere", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1))
		newTopic(ctx, ns, c, "orders", 4)
		before := assigned(ctx, ns, "orders", 4, 0, 1)
		id := readTopic(ctx, ns, "orders").Status.TopicID
		var p kafkav1alpha1.PartitionStatus
		for _, q := range before {
			if q.Leader == 0 && (p.LeaderEpoch == 0 || q.Partition < p.Partition) {
				p = q
			}
		}
		failedOn := func(broker int32, epoch, failures int32) kafkav1alpha1.BrokerRow {
			r := row(broker, alive, 1)
			r.FailedPartitions = []kafkav1alpha1.PartitionFailure{{TopicID: id, Partition: p.Partition, Epoch: epoch, Failures: failures}}
			return r
		}

		By("a first failure: the same broker, the next epoch")
		setRows(ctx, ns, c, failedOn(0, p.LeaderEpoch, 1), row(1, alive, 1))
		Eventually(func(g Gomega) {
			now := leaders(readTopic(ctx, ns, "orders"))[p.Partition]
			g.Expect(now.Leader).To(Equal(int32(0)))
			g.Expect(now.LeaderEpoch).To(Equal(p.LeaderEpoch + 1))
		}).Should(Succeed())

		By("a second failure there: moved to the other broker, and nothing else moves")
		setRows(ctx, ns, c, failedOn(0, p.LeaderEpoch+1, 2), row(1, alive, 1))
		Eventually(func(g Gomega) {
			parts := leaders(readTopic(ctx, ns, "orders"))
			g.Expect(parts[p.Partition].Leader).To(Equal(int32(1)))
			g.Expect(parts[p.Partition].LeaderEpoch).To(Equal(p.LeaderEpoch + 2))
			for i, was := range before {
				if i != p.Partition {
					g.Expect(parts[i]).To(Equal(was), "partition %d", i)
				}
			}
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(ctx, ns, "orders") }).Should(ContainElement(kafkav1alpha1.EventPartitionFailed))

		By("failed on every alive broker: kept where it is and reported Degraded")
		at := leaders(readTopic(ctx, ns, "orders"))[p.Partition]
		other := failedOn(1, at.LeaderEpoch, 2)
		setRows(ctx, ns, c, failedOn(0, p.LeaderEpoch+1, 2), other)
		Eventually(func(g Gomega) {
			kt := readTopic(ctx, ns, "orders")
			g.Expect(leaders(kt)[p.Partition]).To(Equal(at))
			d := meta.FindStatusCondition(kt.Status.Conditions, kafkav1alpha1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Reason).To(Equal(kafkav1alpha1.ReasonPartitionsFailed))
		}).Should(Succeed())
	})

	It("reports a partition its leader cannot compact in the topic's status and one Warning Event, until a pass succeeds", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1))
		newTopic(ctx, ns, c, "changelog", 2)
		parts := assigned(ctx, ns, "changelog", 2, 0, 1)
		id := readTopic(ctx, ns, "changelog").Status.TopicID
		leader := parts[1].Leader
		rows := func(cause kafkav1alpha1.UncleanableCause) []kafkav1alpha1.BrokerRow {
			out := []kafkav1alpha1.BrokerRow{row(0, alive, 1), row(1, alive, 1)}
			if cause != "" {
				out[leader].UncleanablePartitions = []kafkav1alpha1.UncleanablePartition{
					{TopicID: id, Partition: 1, Cause: cause},
					{TopicID: "AAAAAAAAAAAAAAAAAAAAAQ", Partition: 0, Cause: cause}, // another topic's id: not this one's
				}
			}
			return out
		}
		uncleanable := func() []kafkav1alpha1.UncleanablePartitionStatus {
			return readTopic(ctx, ns, "changelog").Status.Uncleanable
		}
		warnings := func() int {
			n := 0
			for _, r := range eventReasons(ctx, ns, "changelog") {
				if r == kafkav1alpha1.EventPartitionUncleanable {
					n++
				}
			}
			return n
		}

		By("the leader announces it: the status names broker and cause, and one Event says so")
		setRows(ctx, ns, c, rows(kafkav1alpha1.CauseOffsetMapTooSmall)...)
		want := []kafkav1alpha1.UncleanablePartitionStatus{{Partition: 1, Broker: leader, Cause: kafkav1alpha1.CauseOffsetMapTooSmall}}
		Eventually(uncleanable).Should(Equal(want))
		Eventually(warnings).Should(Equal(1))

		By("it stays announced while the cause changes and the registry rewrites its rows: no second Event")
		setRows(ctx, ns, c, rows(kafkav1alpha1.CauseFailed)...)
		Eventually(uncleanable).Should(Equal([]kafkav1alpha1.UncleanablePartitionStatus{{Partition: 1, Broker: leader, Cause: kafkav1alpha1.CauseFailed}}))
		Consistently(warnings, 2*time.Second).Should(Equal(1))

		By("a pass succeeds: the status forgets it, and a new failure is a new Event")
		setRows(ctx, ns, c, rows("")...)
		Eventually(uncleanable).Should(BeEmpty())
		setRows(ctx, ns, c, rows(kafkav1alpha1.CauseCorruptBatch)...)
		Eventually(warnings).Should(Equal(2))
		Expect(leaders(readTopic(ctx, ns, "changelog"))).To(Equal(parts), "an uncleanable partition moves nothing")
	})

	It("keeps the assignment and reports the cluster Degraded when no broker is alive", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1))
		newTopic(ctx, ns, c, "orders", 4)
		before := assigned(ctx, ns, "orders", 4, 0, 1)

		setRows(ctx, ns, c, row(0, dead, 1), row(1, drains, 1))
		Eventually(func(g Gomega) {
			kc := readCluster(ctx, ns, c)
			d := meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(d.Reason).To(Equal(kafkav1alpha1.ReasonNoAliveBrokers))
			kt := readTopic(ctx, ns, "orders")
			g.Expect(meta.FindStatusCondition(kt.Status.Conditions, kafkav1alpha1.ConditionReady)).To(HaveField("Reason", kafkav1alpha1.ReasonNoAliveBrokers))
		}).Should(Succeed())
		Consistently(func() map[int32]kafkav1alpha1.PartitionStatus { return leaders(readTopic(ctx, ns, "orders")) }).
			WithTimeout(time.Second).Should(Equal(before), "with nothing alive nothing is unassigned")

		setRows(ctx, ns, c, row(0, alive, 2), row(1, drains, 1))
		assigned(ctx, ns, "orders", 4, 0)
		Eventually(func() bool {
			return meta.IsStatusConditionFalse(readCluster(ctx, ns, c).Status.Conditions, kafkav1alpha1.ConditionDegraded)
		}).Should(BeTrue())
	})

	It("places the new partitions of a topic that grows", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1), row(2, alive, 1))
		newTopic(ctx, ns, c, "orders", 3)
		before := assigned(ctx, ns, "orders", 3, 0, 1, 2)

		kt := readTopic(ctx, ns, "orders")
		kt.Spec.Partitions = 7
		Expect(env.Client.Update(ctx, kt)).To(Succeed())
		after := assigned(ctx, ns, "orders", 7, 0, 1, 2)
		for i, was := range before {
			Expect(after[i]).To(Equal(was), "an existing partition keeps its leader")
		}
		for i := int32(3); i < 7; i++ {
			Expect(after[i].LeaderEpoch).To(Equal(int32(1)))
		}
		Expect(perBroker(after)).To(HaveLen(3))
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Partitions }).Should(Equal(int32(7)))
	})

	It("deletes a topic in order: unassigned, then the broker's data step, then gone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1))
		newTopic(ctx, ns, c, "orders", 4)
		newTopic(ctx, ns, c, "payments", 2)
		others := assigned(ctx, ns, "payments", 2, 0, 1)
		before := assigned(ctx, ns, "orders", 4, 0, 1)

		Expect(env.Client.Delete(ctx, readTopic(ctx, ns, "orders"))).To(Succeed())
		Eventually(func(g Gomega) {
			kt := readTopic(ctx, ns, "orders")
			g.Expect(kt).NotTo(BeNil(), "the data finalizer holds the object until a broker removed the data")
			g.Expect(kt.Finalizers).To(Equal([]string{kafkav1alpha1.FinalizerData}))
			for i, p := range leaders(kt) {
				g.Expect(p.Leader).To(Equal(int32(-1)), "partition %d is unassigned", i)
				g.Expect(p.LeaderEpoch).To(Equal(before[i].LeaderEpoch), "partition %d keeps its epoch", i)
			}
			g.Expect(meta.FindStatusCondition(kt.Status.Conditions, kafkav1alpha1.ConditionReady)).To(HaveField("Reason", kafkav1alpha1.ReasonDeleting))
		}).Should(Succeed())
		Eventually(func() []string { return eventReasons(ctx, ns, "orders") }).Should(ContainElement(kafkav1alpha1.EventUnassigned))
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Partitions }).Should(Equal(int32(2)))
		Expect(leaders(readTopic(ctx, ns, "payments"))).To(Equal(others), "deleting a topic moves no other partition here")

		// The broker's step: it claims the fences, removes the directory, drops its finalizer.
		kt := readTopic(ctx, ns, "orders")
		controllerutil.RemoveFinalizer(kt, kafkav1alpha1.FinalizerData)
		Expect(env.Client.Update(ctx, kt)).To(Succeed())
		Eventually(func() *kafkav1alpha1.KafkaTopic { return readTopic(ctx, ns, "orders") }).Should(BeNil())
	})

	It("releases a deleted topic whose cluster is gone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1))
		newTopic(ctx, ns, c, "orders", 1)
		assigned(ctx, ns, "orders", 1, 0)
		Expect(env.Client.Delete(ctx, readCluster(ctx, ns, c))).To(Succeed())
		Expect(env.Client.Delete(ctx, readTopic(ctx, ns, "orders"))).To(Succeed())
		Eventually(func() *kafkav1alpha1.KafkaTopic { return readTopic(ctx, ns, "orders") }).Should(BeNil())
	})

	// The uninstall order (docs/operations.md, "Uninstall") deletes topics and clusters together: a
	// topic already unassigned, waiting for a broker's data step, loses its brokers with the
	// cluster and must be released then, not stay Terminating.
	It("releases a topic waiting for the broker's data step when its cluster goes", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1))
		newTopic(ctx, ns, c, "orders", 1)
		assigned(ctx, ns, "orders", 1, 0)
		Expect(env.Client.Delete(ctx, readTopic(ctx, ns, "orders"))).To(Succeed())
		Eventually(func() []string { return readTopic(ctx, ns, "orders").Finalizers }).Should(Equal([]string{kafkav1alpha1.FinalizerData}))
		Expect(env.Client.Delete(ctx, readCluster(ctx, ns, c))).To(Succeed())
		Eventually(func() *kafkav1alpha1.KafkaTopic { return readTopic(ctx, ns, "orders") }).Should(BeNil())
	})

	It("serves the older of two topics whose Kafka names collide and reports the other", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1))
		newTopic(ctx, ns, c, "a.b", 1)
		assigned(ctx, ns, "a.b", 1, 0)
		newTopic(ctx, ns, c, "ab", 1, func(kt *kafkav1alpha1.KafkaTopic) { kt.Spec.TopicName = "a_b" })
		Eventually(func(g Gomega) {
			kt := readTopic(ctx, ns, "ab")
			d := meta.FindStatusCondition(kt.Status.Conditions, kafkav1alpha1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Reason).To(Equal(kafkav1alpha1.ReasonTopicNameConflict))
			g.Expect(d.Message).To(ContainSubstring("a.b"))
			g.Expect(leaders(kt)[0].Leader).To(Equal(int32(-1)))
		}).Should(Succeed())
		// The cluster's counts are written by their own reconcile of the cluster: wait for it.
		Eventually(func() int32 { return readCluster(ctx, ns, c).Status.Topics }).Should(Equal(int32(1)))
	})

	It("reports an invalid topic config as Degraded and still serves the topic", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1))
		newTopic(ctx, ns, c, "orders", 1, func(kt *kafkav1alpha1.KafkaTopic) {
			kt.Spec.Config = map[string]string{"cleanup.policy": "compact", "retention.ms": "60000",
				"min.compaction.lag.ms": "120000", "max.compaction.lag.ms": "60000"}
		})
		assigned(ctx, ns, "orders", 1, 0)
		Eventually(func(g Gomega) {
			d := meta.FindStatusCondition(readTopic(ctx, ns, "orders").Status.Conditions, kafkav1alpha1.ConditionDegraded)
			g.Expect(d).NotTo(BeNil())
			g.Expect(d.Reason).To(Equal(kafkav1alpha1.ReasonInvalidConfig))
			g.Expect(d.Message).To(ContainSubstring("conflict topic config setting min.compaction.lag.ms (120000) > max.compaction.lag.ms (60000)"))
			g.Expect(d.Message).NotTo(ContainSubstring("cleanup.policy"))
		}).Should(Succeed())
	})

	It("writes nothing at steady state", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		newCluster(ctx, ns, c)
		setRows(ctx, ns, c, row(0, alive, 1), row(1, alive, 1), row(2, alive, 1))
		for _, name := range []string{"a", "b", "c"} {
			newTopic(ctx, ns, c, name, 5)
		}
		for _, name := range []string{"a", "b", "c"} {
			assigned(ctx, ns, name, 5, 0, 1, 2)
		}
		// Steady means every write the new topics cause has landed, the cluster's counts too
		// (a conflicting status patch is retried, and would count below).
		Eventually(func(g Gomega) {
			st := readCluster(ctx, ns, c).Status
			g.Expect(st.CoordinatorEpoch).To(Equal(int64(1)))
			g.Expect(st.Topics).To(Equal(int32(3)))
			g.Expect(st.Partitions).To(Equal(int32(15)))
		}).Should(Succeed())

		before := writes.Writes(ns)
		// Things that must not cause a write: the same rows again with a new lastSeen and
		// address (the registry's heartbeat-driven refreshes), a label on a topic.
		for i := range 5 {
			rows := []kafkav1alpha1.BrokerRow{row(0, alive, 1), row(1, alive, 1), row(2, alive, 1)}
			for j := range rows {
				rows[j].LastSeen = ptr.To(metav1.Now())
				rows[j].Host = "10.9.9." + string(rune('1'+i))
			}
			setRows(ctx, ns, c, rows...)
			time.Sleep(100 * time.Millisecond)
		}
		kt := readTopic(ctx, ns, "a")
		kt.Labels = map[string]string{"team": "x"}
		Expect(env.Client.Update(ctx, kt)).To(Succeed())
		Consistently(func() int { return writes.Writes(ns) - before }).WithTimeout(2 * time.Second).Should(BeZero())
		GinkgoWriter.Printf("assignment: %d writes at steady state\n", writes.Writes(ns)-before)
	})
})
