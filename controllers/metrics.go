package controllers

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/assignment"
	"github.com/paddock-dev/paddock/internal/buildinfo"
)

// The manager's view of every cluster, from the objects its cache holds: what an alert on a
// dead or fenced broker, or on a partition without a serving leader, must read from the
// operator, since a dead broker exports nothing itself (docs/metrics.md).
var (
	descClusterBroker = prometheus.NewDesc("paddock_cluster_broker",
		"1 for each registered broker of a KafkaCluster (status.brokers), with its registry state (Serving, Fenced) and health (Alive, Draining, Dead).",
		[]string{"namespace", "cluster", "broker", "state", "health"}, nil)
	descTopicPartitions = prometheus.NewDesc("paddock_topic_partitions",
		"Partitions of a KafkaTopic (status.partitions).", []string{"namespace", "cluster", "topic"}, nil)
	descTopicLeaderless = prometheus.NewDesc("paddock_topic_partitions_without_serving_leader",
		"Partitions of a KafkaTopic whose leader is none, unregistered, or not Serving and Alive or Draining in its cluster's registry: clients cannot write them.",
		[]string{"namespace", "cluster", "topic"}, nil)
)

// clusterCollector collects from the cache of the last manager SetupWithManager was given.
type clusterCollector struct{ reader atomic.Pointer[client.Reader] }

var (
	clusterMetrics     = &clusterCollector{}
	registerMetricsOne sync.Once
)

// RegisterMetrics points the cluster series at r and registers them, with paddock_build_info,
// on controller-runtime's registry (the manager's /metrics) the first time.
func RegisterMetrics(r client.Reader) {
	clusterMetrics.reader.Store(&r)
	registerMetricsOne.Do(func() {
		ctrlmetrics.Registry.MustRegister(clusterMetrics, buildinfo.Collector())
		ctrlmetrics.Registry.MustRegister(assignment.Collectors()...)
	})
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descClusterBroker
	ch <- descTopicPartitions
	ch <- descTopicLeaderless
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.reader.Load()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var clusters kafkav1alpha1.KafkaClusterList
	var topics kafkav1alpha1.KafkaTopicList
	if (*r).List(ctx, &clusters) != nil || (*r).List(ctx, &topics) != nil {
		return // the cache is not synced yet: no series rather than made-up zeros
	}
	for _, s := range clusterSamples(clusters.Items, topics.Items) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, s.value, s.labels...)
	}
}

type sample struct {
	desc   *prometheus.Desc
	value  float64
	labels []string
}

// clusterSamples is the rule: one broker sample per registry row; per topic, its partitions
// and those whose leader cannot serve (no leader, or one not Serving with a fresh heartbeat).
// A topic whose cluster does not exist counts every partition as without a leader.
func clusterSamples(clusters []kafkav1alpha1.KafkaCluster, topics []kafkav1alpha1.KafkaTopic) []sample {
	type key struct{ namespace, name string }
	serving := map[key]map[int32]bool{}
	var out []sample
	for _, c := range clusters {
		ok := map[int32]bool{}
		for _, b := range c.Status.Brokers {
			out = append(out, sample{descClusterBroker, 1, []string{c.Namespace, c.Name, strconv.Itoa(int(b.ID)), string(b.State), string(b.Health)}})
			ok[b.ID] = b.State == kafkav1alpha1.BrokerServing && b.Health != kafkav1alpha1.BrokerDead
		}
		serving[key{c.Namespace, c.Name}] = ok
	}
	for _, t := range topics {
		ok := serving[key{t.Namespace, t.Spec.Cluster}]
		leaderless := 0
		for _, p := range t.Status.Partitions {
			if p.Leader < 0 || !ok[p.Leader] {
				leaderless++
			}
		}
		name := t.Status.TopicName
		if name == "" {
			name = t.Name
		}
		labels := []string{t.Namespace, t.Spec.Cluster, name}
		out = append(out, sample{descTopicPartitions, float64(len(t.Status.Partitions)), labels},
			sample{descTopicLeaderless, float64(leaderless), labels})
	}
	return out
}
