package v1alpha1

// Facts about the broker pod that the operator builds and the broker relies on
// (docs/architecture.md, "The broker pod"). They are plain constants: changing one changes the pod contract.
const (
	// BrokerContainerName is the name of the broker container in every broker pod.
	BrokerContainerName = "broker"
	// HealthPortName names the port that serves /healthz, /readyz and /metrics.
	HealthPortName = "health"
	// HealthPort is the port that serves /healthz, /readyz and /metrics, off the request path.
	HealthPort int32 = 9644
	// DataMountPath is where the data volume is mounted in the broker container
	// (the broker's --data-dir).
	DataMountPath = "/var/lib/paddock"
	// DataVolumeName is the name of the data volume in the broker pod template.
	DataVolumeName = "data"
	// LabelPodName is the label the StatefulSet controller puts on each of its pods with
	// the pod's name; per-broker Services select on it.
	LabelPodName = "statefulset.kubernetes.io/pod-name"
)

// AnnotationPodTemplateInputs on the broker StatefulSet is a digest of what its pod template
// is rendered from: the broker image and the spec fields that reach the pod. The operator
// renders the template anew only when the digest changes, so an operator upgrade that renders
// the same inputs differently does not roll the brokers (docs/operations.md, "Upgrade").
const AnnotationPodTemplateInputs = "kafka.paddock.dev/pod-template-inputs"
