package v1alpha1_test

import (
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// storedBytesPerPartition bounds what one partition of a KafkaTopic costs in the API server
// and etcd (custom resources are stored as their JSON, managedFields included): the figure
// the spec.limits defaults are computed from (docs/bounds.md, "Topics and partitions").
const storedBytesPerPartition = 200

var _ = Describe("KafkaTopic size", func() {
	It("stays within storedBytesPerPartition per partition, up to the largest topic", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		stored := func(name string, partitions int32) int {
			GinkgoHelper()
			kt := &kafkav1alpha1.KafkaTopic{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       kafkav1alpha1.KafkaTopicSpec{Cluster: "demo", Partitions: partitions},
			}
			Expect(env.Client.Create(ctx, kt)).To(Succeed())
			orig := kt.DeepCopy()
			// As the assignment reconciler writes it: a merge patch of the status, with
			// realistic leaders, epochs and incarnations.
			kt.Status.ObservedGeneration, kt.Status.TopicName, kt.Status.TopicID = 1, name, "AAAAAAAAAAAAAAAAAAAAAA"
			for p := range partitions {
				kt.Status.Partitions = append(kt.Status.Partitions, kafkav1alpha1.PartitionStatus{
					Partition: p, Leader: p % 100, LeaderEpoch: 1000 + p, LeaderIncarnation: 1_700_000_000_000_000_000 + int64(p)})
			}
			Expect(env.Client.Status().Patch(ctx, kt, client.MergeFrom(orig))).To(Succeed(), "a topic of %d partitions fits in one object", partitions)
			got := &kafkav1alpha1.KafkaTopic{}
			Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(kt), got)).To(Succeed())
			Expect(got.Status.Partitions).To(HaveLen(int(partitions)))
			b, err := json.Marshal(got)
			Expect(err).NotTo(HaveOccurred())
			mf, _ := json.Marshal(got.ManagedFields)
			_, _ = fmt.Fprintf(GinkgoWriter, "%s: managedFields %d B of %d\n", name, len(mf), len(b))
			return len(b)
		}
		empty := stored("empty", 1)
		thousand := stored("thousand", 1001)
		largest := stored("largest", kafkav1alpha1.MaxPartitions)
		perPartition := float64(thousand-empty) / 1000
		AddReportEntry("KafkaTopic stored bytes", fmt.Sprintf("1 partition %d B, 1001 partitions %d B, %d partitions %d B: %.1f B per partition",
			empty, thousand, kafkav1alpha1.MaxPartitions, largest, perPartition))
		_, _ = fmt.Fprintf(GinkgoWriter, "KafkaTopic: %d B with 1 partition, %.1f B per partition, %d B with %d\n", empty, perPartition, largest, kafkav1alpha1.MaxPartitions)
		Expect(perPartition).To(BeNumerically("<=", storedBytesPerPartition))
		Expect(largest).To(BeNumerically("<", 1536*1024), "etcd's default request limit (--max-request-bytes 1.5 MiB)")
	})
})
