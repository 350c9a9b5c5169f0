package assignment

import (
	"context"
	"encoding/json"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testenv"
)

// newCluster creates KafkaCluster name in ns.
func newCluster(ctx context.Context, ns, name string) {
	GinkgoHelper()
	Expect(env.Client.Create(ctx, &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       kafkav1alpha1.KafkaClusterSpec{Replicas: 3},
	})).To(Succeed())
}

// row is broker id's registry row with the given health and incarnation.
func row(id int32, health kafkav1alpha1.BrokerHealth, epoch int64) kafkav1alpha1.BrokerRow {
	state := kafkav1alpha1.BrokerServing
	if health == kafkav1alpha1.BrokerDead {
		state = kafkav1alpha1.BrokerFenced
	}
	return kafkav1alpha1.BrokerRow{ID: id, State: state, Health: health, Epoch: epoch, Host: fmt.Sprintf("10.0.0.%d", id+1), Port: 9092}
}

// setRows writes status.brokers and status.counts of the cluster, standing in for the
// registry reconciler (which is not running here).
func setRows(ctx context.Context, ns, cluster string, rows ...kafkav1alpha1.BrokerRow) {
	GinkgoHelper()
	counts := kafkav1alpha1.BrokerCounts{Registered: int32(len(rows))}
	for _, r := range rows {
		switch r.Health {
		case kafkav1alpha1.BrokerAlive:
			counts.Alive++
		case kafkav1alpha1.BrokerDraining:
			counts.Draining++
		default:
			counts.Dead++
		}
		if r.State == kafkav1alpha1.BrokerServing {
			counts.Serving++
		} else {
			counts.Fenced++
		}
	}
	if rows == nil {
		rows = []kafkav1alpha1.BrokerRow{}
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"brokers": rows, "counts": counts}})
	Expect(err).NotTo(HaveOccurred())
	kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster}}
	Expect(env.Client.Status().Patch(ctx, kc, client.RawPatch(types.MergePatchType, body))).To(Succeed())
}

// newTopic creates KafkaTopic name of cluster with the given partitions.
func newTopic(ctx context.Context, ns, cluster, name string, partitions int32, mutate ...func(*kafkav1alpha1.KafkaTopic)) {
	GinkgoHelper()
	kt := &kafkav1alpha1.KafkaTopic{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       kafkav1alpha1.KafkaTopicSpec{Cluster: cluster, Partitions: partitions},
	}
	for _, m := range mutate {
		m(kt)
	}
	Expect(env.Client.Create(ctx, kt)).To(Succeed())
}

// readTopic reads a KafkaTopic (uncached); nil when it does not exist.
func readTopic(ctx context.Context, ns, name string) *kafkav1alpha1.KafkaTopic {
	GinkgoHelper()
	kt := &kafkav1alpha1.KafkaTopic{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kt)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return kt
}

func readCluster(ctx context.Context, ns, name string) *kafkav1alpha1.KafkaCluster {
	GinkgoHelper()
	kc := &kafkav1alpha1.KafkaCluster{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, kc)).To(Succeed())
	return kc
}

// leaders is the topic's stored assignment by partition.
func leaders(kt *kafkav1alpha1.KafkaTopic) map[int32]kafkav1alpha1.PartitionStatus {
	out := map[int32]kafkav1alpha1.PartitionStatus{}
	if kt == nil {
		return out
	}
	for _, p := range kt.Status.Partitions {
		out[p.Partition] = p
	}
	return out
}

// perBroker counts the partitions each broker leads.
func perBroker(parts map[int32]kafkav1alpha1.PartitionStatus) map[int32]int {
	out := map[int32]int{}
	for _, p := range parts {
		out[p.Leader]++
	}
	return out
}

// eventReasons is the reasons of the Events about object name in ns.
func eventReasons(ctx context.Context, ns, name string) []string {
	GinkgoHelper()
	reasons, err := testenv.EventReasons(ctx, env.Client, ns, name)
	Expect(err).NotTo(HaveOccurred())
	return reasons
}
