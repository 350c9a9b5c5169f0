package v1alpha1

// The operator's PodMonitor of a cluster (spec.monitoring.podMonitor; README "Monitoring").
const (
	// ConditionMonitored is on a KafkaCluster whose spec.monitoring.podMonitor is enabled:
	// True once its PodMonitor is applied, False when it cannot be (the message says why).
	// A cluster without it enabled has no such condition.
	ConditionMonitored = "Monitored"
	// ReasonPodMonitorApplied: the PodMonitor is as the spec asks.
	ReasonPodMonitorApplied = "PodMonitorApplied"
	// ReasonPrometheusOperatorMissing: the API server has no monitoring.coreos.com/v1
	// PodMonitor kind (the Prometheus Operator's CRDs are not installed).
	ReasonPrometheusOperatorMissing = "PrometheusOperatorMissing"
	// ReasonPodMonitorFailed: applying the PodMonitor failed otherwise (RBAC, validation).
	ReasonPodMonitorFailed = "PodMonitorFailed"

	// PodMonitorGroupVersion and PodMonitorKind are the Prometheus Operator's kind.
	PodMonitorGroupVersion = "monitoring.coreos.com/v1"
	PodMonitorKind         = "PodMonitor"
)

// PodMonitorName is the name of cluster's PodMonitor.
func PodMonitorName(cluster string) string { return StatefulSetName(cluster) }
