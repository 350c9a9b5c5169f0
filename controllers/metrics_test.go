package controllers

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestAPartitionLedByAFencedOrDeadBrokerHasNoServingLeader(t *testing.T) {
	cl := kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	cl.Status.Brokers = []kafkav1alpha1.BrokerRow{
		{ID: 0, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerAlive},
		{ID: 1, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerDraining},
		{ID: 2, State: kafkav1alpha1.BrokerFenced, Health: kafkav1alpha1.BrokerAlive},
		{ID: 3, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerDead},
	}
	topic := func(name, cluster string, leaders ...int32) kafkav1alpha1.KafkaTopic {
		t := kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		t.Spec.Cluster = cluster
		for i, l := range leaders {
			t.Status.Partitions = append(t.Status.Partitions, kafkav1alpha1.PartitionStatus{Partition: int32(i), Leader: l})
		}
		return t
	}
	got := map[string]float64{}
	for _, s := range clusterSamples([]kafkav1alpha1.KafkaCluster{cl}, []kafkav1alpha1.KafkaTopic{
		topic("served", "c", 0, 1),             // Alive and Draining leaders both serve
		topic("stranded", "c", 2, 3, -1, 9, 0), // fenced, dead, none, unregistered; one served
		topic("orphan", "gone", 0),             // no such cluster
	}) {
		name := strings.Split(s.desc.String(), `"`)[1]
		got[name+"{"+strings.Join(s.labels, ",")+"}"] = s.value
	}
	for series, want := range map[string]float64{
		"paddock_cluster_broker{ns,c,0,Serving,Alive}":                    1,
		"paddock_cluster_broker{ns,c,2,Fenced,Alive}":                     1,
		"paddock_cluster_broker{ns,c,3,Serving,Dead}":                     1,
		"paddock_topic_partitions{ns,c,served}":                           2,
		"paddock_topic_partitions_without_serving_leader{ns,c,served}":    0,
		"paddock_topic_partitions{ns,c,stranded}":                         5,
		"paddock_topic_partitions_without_serving_leader{ns,c,stranded}":  4,
		"paddock_topic_partitions_without_serving_leader{ns,gone,orphan}": 1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
}
