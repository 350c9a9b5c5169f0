package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// BrokerPodTemplate customizes the broker pods: where they are scheduled, with which
// priority, pull secrets and security context, and extra labels and annotations. Every field
// is optional; an empty template gives the defaults docs/operations.md lists ("Scheduling and
// resources"). A field that is set replaces the default of the same name whole, it is not
// merged with it.
type BrokerPodTemplate struct {
	// metadata adds labels and annotations to every broker pod. The labels paddock selects
	// its pods by (app.kubernetes.io/name, app.kubernetes.io/instance,
	// kafka.paddock.dev/cluster) cannot be overridden.
	// +optional
	Metadata PodMetadata `json:"metadata,omitempty"`

	// nodeSelector limits the brokers to nodes with these labels.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node Selector",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// tolerations let the brokers run on nodes with matching taints.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Tolerations",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity replaces the default, a preference for one broker per node
	// (kubernetes.io/hostname anti-affinity among the cluster's brokers).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Affinity",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints replace the default, an even spread of the brokers over
	// spec.rack.topologyKey (zones) that still schedules when there are fewer zones than
	// brokers (whenUnsatisfiable: ScheduleAnyway).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Topology Spread Constraints",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName is the PriorityClass of the broker pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Priority Class",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// imagePullSecrets are the Secrets the kubelet pulls the broker image with.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image Pull Secrets",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// securityContext replaces the pod's default security context (non-root user and group
	// 65532, fsGroup 65532, the RuntimeDefault seccomp profile) — for example to leave the
	// user to the platform (OpenShift's restricted SCC) or to match a volume's owner.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod Security Context",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// containerSecurityContext replaces the broker container's default security context (no
	// privilege escalation, read-only root filesystem, non-root, every capability dropped).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Container Security Context",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`
}

// PodMetadata is the extra metadata of the broker pods.
type PodMetadata struct {
	// labels are added to every broker pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`

	// annotations are added to every broker pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`
}
