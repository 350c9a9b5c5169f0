package kafkacluster

import (
	"context"
	"fmt"
	"maps"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// podMonitorLookAgain is how long after finding no PodMonitor kind the operator looks again:
// the Prometheus Operator may be installed after the cluster, and a missing CRD sends no
// event to watch.
const podMonitorLookAgain = 5 * time.Minute

// defaultScrapeInterval is the kit's scrape interval (config/monitoring), for a spec written
// before the interval field had its default.
const defaultScrapeInterval = 15 * time.Second

// podMonitorEnabled reports whether cluster asks for its PodMonitor.
func podMonitorEnabled(c *kafkav1alpha1.KafkaCluster) bool {
	return c.Spec.Monitoring != nil && c.Spec.Monitoring.PodMonitor != nil && c.Spec.Monitoring.PodMonitor.Enabled
}

// podMonitorGVK is the Prometheus Operator's PodMonitor kind.
func podMonitorGVK() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(kafkav1alpha1.PodMonitorGroupVersion, kafkav1alpha1.PodMonitorKind)
}

// desiredPodMonitor is cluster's PodMonitor (spec.monitoring.podMonitor): the monitoring kit's
// paddock-brokers PodMonitor (config/monitoring/podmonitor-brokers.yaml) narrowed to this
// cluster's broker pods in its namespace, so its series carry the same job, cluster and broker
// labels the kit's rules and dashboard use. It is unstructured: paddock does not import the
// Prometheus Operator's types for one object. Nil when the spec does not ask for it.
func desiredPodMonitor(c *kafkav1alpha1.KafkaCluster) *unstructured.Unstructured {
	if !podMonitorEnabled(c) {
		return nil
	}
	spec := c.Spec.Monitoring.PodMonitor
	interval := defaultScrapeInterval
	if spec.Interval != nil {
		interval = spec.Interval.Duration
	}
	labels := maps.Clone(spec.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, kafkav1alpha1.ClusterLabels(c.Name)) // the user's may not replace these
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{
			"name":      kafkav1alpha1.PodMonitorName(c.Name),
			"namespace": c.Namespace,
		},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{"matchNames": []any{c.Namespace}},
			"podMetricsEndpoints": []any{map[string]any{
				"port":     kafkav1alpha1.HealthPortName,
				"path":     "/metrics",
				"interval": interval.String(),
				"relabelings": []any{
					map[string]any{"action": "replace", "targetLabel": "job", "replacement": "paddock-broker"},
					map[string]any{"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_label_kafka_paddock_dev_cluster"}, "targetLabel": "cluster"},
					map[string]any{"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_name"}, "regex": ".*-([0-9]+)", "targetLabel": "broker"},
				},
			}},
		},
	}}
	u.SetGroupVersionKind(podMonitorGVK())
	u.SetLabels(labels)
	if err := unstructured.SetNestedStringMap(u.Object, podSelector(c), "spec", "selector", "matchLabels"); err != nil {
		panic(err) // spec is a map: cannot fail
	}
	u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(c, kafkav1alpha1.GroupVersion.WithKind("KafkaCluster"))})
	return u
}

// reconcilePodMonitor applies cluster's PodMonitor when the spec asks for it and deletes the
// one it controls when not, and records the outcome as the Monitored condition. A missing
// PodMonitor kind or a refused apply is reported, not returned: the brokers do not wait for
// monitoring.
func (r *Reconciler) reconcilePodMonitor(ctx context.Context, s *scope) error {
	c := s.cluster
	s.monitorPhaseRan = true
	s.monitored = &metav1.Condition{Type: kafkav1alpha1.ConditionMonitored, ObservedGeneration: c.Generation}
	want := desiredPodMonitor(c)
	if want == nil {
		s.monitored = nil
		return r.deletePodMonitor(ctx, c)
	}
	err := apply(ctx, r.Client, want)
	switch {
	case err == nil:
		s.monitored.Status, s.monitored.Reason = metav1.ConditionTrue, kafkav1alpha1.ReasonPodMonitorApplied
		s.monitored.Message = fmt.Sprintf("PodMonitor %s scrapes the brokers' /metrics", want.GetName())
	case meta.IsNoMatchError(err):
		s.monitored.Status, s.monitored.Reason = metav1.ConditionFalse, kafkav1alpha1.ReasonPrometheusOperatorMissing
		s.monitored.Message = fmt.Sprintf("spec.monitoring.podMonitor is enabled, but the API server has no %s %s kind: install the Prometheus Operator's CRDs (looked again every %s)",
			kafkav1alpha1.PodMonitorGroupVersion, kafkav1alpha1.PodMonitorKind, podMonitorLookAgain)
		s.requeueWithin(podMonitorLookAgain)
	default:
		s.monitored.Status, s.monitored.Reason = metav1.ConditionFalse, kafkav1alpha1.ReasonPodMonitorFailed
		s.monitored.Message = err.Error()
		log.FromContext(ctx).Error(err, "Could not apply the cluster's PodMonitor")
		s.requeueWithin(podMonitorLookAgain)
	}
	return nil
}

// deletePodMonitor deletes cluster's PodMonitor if the cluster controls one. No PodMonitor
// kind means there is none to delete.
func (r *Reconciler) deletePodMonitor(ctx context.Context, c *kafkav1alpha1.KafkaCluster) error {
	pm := &unstructured.Unstructured{}
	pm.SetGroupVersionKind(podMonitorGVK())
	key := client.ObjectKey{Namespace: c.Namespace, Name: kafkav1alpha1.PodMonitorName(c.Name)}
	if err := r.APIReader.Get(ctx, key, pm); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil
		}
		return fmt.Errorf("get podmonitor %s: %w", key.Name, err)
	}
	if !metav1.IsControlledBy(pm, c) {
		return nil
	}
	if err := r.Delete(ctx, pm); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete podmonitor %s: %w", key.Name, err)
	}
	log.FromContext(ctx).Info("Deleted the cluster's PodMonitor: spec.monitoring.podMonitor is off", "podmonitor", key.Name)
	return nil
}
