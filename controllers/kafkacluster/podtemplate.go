package kafkacluster

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The broker pod's user-facing parts (spec.resources and spec.template) and the rule that
// keeps an operator upgrade from rolling the brokers (docs/operations.md, "Upgrade"). Each
// function here is pure; builders.go calls them.

// Default broker resources, used when spec.resources has neither requests nor limits.
var (
	defaultBrokerCPU    = resource.MustParse("500m")
	defaultBrokerMemory = resource.MustParse("1Gi")
)

// goMemLimitPercent of the container's memory limit is the Go runtime's soft memory limit:
// the collector works harder from there, leaving room for what the runtime does not count
// (page cache is the kernel's, but thread stacks and cgo are not in the heap).
const goMemLimitPercent = 90

// brokerResources is spec.resources, or the defaults when it asks for nothing at all. A spec
// that sets anything is taken as it is: a limit without a request is the user's choice.
func brokerResources(cluster *kafkav1alpha1.KafkaCluster) corev1.ResourceRequirements {
	r := cluster.Spec.Resources
	if len(r.Requests) == 0 && len(r.Limits) == 0 && len(r.Claims) == 0 {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: defaultBrokerCPU, corev1.ResourceMemory: defaultBrokerMemory},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: defaultBrokerMemory},
		}
	}
	return *r.DeepCopy()
}

// goMemLimitEnv is GOMEMLIMIT at goMemLimitPercent of the broker container's memory limit, in
// bytes; none without a limit.
func goMemLimitEnv(res corev1.ResourceRequirements) []corev1.EnvVar {
	limit, ok := res.Limits[corev1.ResourceMemory]
	if !ok || limit.Value() <= 0 {
		return nil
	}
	bytes := limit.Value() / 100 * goMemLimitPercent
	return []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: strconv.FormatInt(bytes, 10)}}
}

// podLabels are the cluster's labels plus spec.template.metadata.labels; the cluster's win,
// since the StatefulSet selects its pods by them.
func podLabels(cluster *kafkav1alpha1.KafkaCluster) map[string]string {
	labels := maps.Clone(cluster.Spec.Template.Metadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, kafkav1alpha1.ClusterLabels(cluster.Name))
	return labels
}

// podAnnotations are spec.template.metadata.annotations (nil when there are none).
func podAnnotations(cluster *kafkav1alpha1.KafkaCluster) map[string]string {
	if len(cluster.Spec.Template.Metadata.Annotations) == 0 {
		return nil
	}
	return maps.Clone(cluster.Spec.Template.Metadata.Annotations)
}

// podSecurityContext is spec.template.securityContext, else a restricted one: non-root as
// the image's user, fsGroup so the data volume is writable, the runtime's seccomp profile.
func podSecurityContext(cluster *kafkav1alpha1.KafkaCluster) *corev1.PodSecurityContext {
	if sc := cluster.Spec.Template.SecurityContext; sc != nil {
		return sc.DeepCopy()
	}
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](brokerUser),
		RunAsGroup:     ptr.To[int64](brokerUser),
		FSGroup:        ptr.To[int64](brokerUser),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurityContext is spec.template.containerSecurityContext, else a read-only root
// without privileges or capabilities.
func containerSecurityContext(cluster *kafkav1alpha1.KafkaCluster) *corev1.SecurityContext {
	if sc := cluster.Spec.Template.ContainerSecurityContext; sc != nil {
		return sc.DeepCopy()
	}
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// topologySpread is spec.template.topologySpreadConstraints, else the zone spread.
func topologySpread(cluster *kafkav1alpha1.KafkaCluster, selector *metav1.LabelSelector) []corev1.TopologySpreadConstraint {
	if c := cluster.Spec.Template.TopologySpreadConstraints; len(c) > 0 {
		out := make([]corev1.TopologySpreadConstraint, len(c))
		for i := range c {
			out[i] = *c[i].DeepCopy()
		}
		return out
	}
	return []corev1.TopologySpreadConstraint{zoneSpread(cluster, selector)}
}

// affinity is spec.template.affinity, else the preference for one broker per node.
func affinity(cluster *kafkav1alpha1.KafkaCluster, selector *metav1.LabelSelector) *corev1.Affinity {
	if a := cluster.Spec.Template.Affinity; a != nil {
		return a.DeepCopy()
	}
	return onePerNode(selector)
}

// schedulingExtras copies the template's node selector, tolerations, priority class and pull
// secrets into spec.
func schedulingExtras(cluster *kafkav1alpha1.KafkaCluster, spec *corev1.PodSpec) {
	t := cluster.Spec.Template
	spec.NodeSelector = maps.Clone(t.NodeSelector)
	spec.PriorityClassName = t.PriorityClassName
	spec.ImagePullSecrets = slices.Clone(t.ImagePullSecrets)
	for i := range t.Tolerations {
		spec.Tolerations = append(spec.Tolerations, *t.Tolerations[i].DeepCopy())
	}
}

// podInputs is everything the broker pod template is rendered from besides the cluster's
// name and namespace, which never change: the image the brokers run and the spec fields that
// reach the pod. TestEverySpecFieldIsAPodInputOrProvedNotToBe keeps the list complete: a new
// spec field must be added here or shown not to change the template.
type podInputs struct {
	Image        string                          `json:"image"`
	Listeners    []kafkav1alpha1.Listener        `json:"listeners,omitempty"`
	StorageType  kafkav1alpha1.StorageType       `json:"storageType,omitempty"`
	EmptyDirSize *resource.Quantity              `json:"emptyDirSize,omitempty"`
	Heartbeat    kafkav1alpha1.Heartbeat         `json:"heartbeat"`
	DrainTimeout *metav1.Duration                `json:"drainTimeout,omitempty"`
	Rack         kafkav1alpha1.Rack              `json:"rack"`
	Resources    corev1.ResourceRequirements     `json:"resources"`
	Template     kafkav1alpha1.BrokerPodTemplate `json:"template"`
}

// podTemplateInputs is the digest of cluster's pod inputs with the broker image. Empty
// objects, lists and strings and false are left out before hashing, so a field a later CRD
// version adds with an empty default (`{}`) does not change the digest of a cluster that
// does not use it.
func podTemplateInputs(cluster *kafkav1alpha1.KafkaCluster, image string) string {
	s := cluster.Spec
	in := podInputs{
		Image: image, Listeners: podListeners(s.Listeners), StorageType: s.Storage.Type, Heartbeat: s.Heartbeat,
		DrainTimeout: s.DrainTimeout, Rack: s.Rack, Resources: s.Resources, Template: s.Template,
	}
	if s.Storage.Type == kafkav1alpha1.StorageEphemeral {
		in.EmptyDirSize = s.Storage.Size
	}
	raw, err := json.Marshal(in)
	if err != nil {
		panic("marshal pod inputs: " + err.Error()) // plain API types always marshal
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		panic("unmarshal pod inputs: " + err.Error())
	}
	canonical, err := json.Marshal(pruneEmpty(tree)) // maps marshal with sorted keys
	if err != nil {
		panic("marshal pod inputs: " + err.Error())
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:16])
}

// podListeners are the listeners as the pod sees them: without the settings of their
// Services (service) and of the NetworkPolicy (allowFrom), which never reach it — editing
// those must not roll the brokers.
func podListeners(listeners []kafkav1alpha1.Listener) []kafkav1alpha1.Listener {
	out := make([]kafkav1alpha1.Listener, len(listeners))
	for i, l := range listeners {
		out[i] = *l.DeepCopy()
		out[i].Service, out[i].AllowFrom = nil, nil
	}
	return out
}

// pruneEmpty drops empty values from a JSON tree; nil when v itself is empty.
func pruneEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if p := pruneEmpty(val); p == nil {
				delete(x, k)
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
		for i := range x {
			x[i] = pruneEmpty(x[i])
		}
	case string:
		if x == "" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	case nil:
		return nil
	}
	return v
}

// pinnedPodTemplate decides which pod template the StatefulSet is applied with: the one
// desired renders, or the one live already runs. The live one is kept when its inputs are
// the same (the AnnotationPodTemplateInputs digests agree), so that a new operator version
// rendering the same inputs differently does not replace every broker pod; the new rendering
// reaches the pods with the next change of the image or of a spec field that reaches the pod.
// A StatefulSet without the annotation was made by an operator version from before this rule:
// its template is kept, and adopted under desired's digest, when it runs the desired image
// with the desired arguments, the inputs a version before it rendered from. live is nil when
// there is no StatefulSet yet.
func pinnedPodTemplate(desired, live *appsv1.StatefulSet) (template corev1.PodTemplateSpec, kept bool) {
	if live == nil {
		return desired.Spec.Template, false
	}
	want := desired.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs]
	have, annotated := live.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs]
	switch {
	case annotated && have == want:
	case !annotated && sameBrokerCommand(desired.Spec.Template.Spec, live.Spec.Template.Spec):
	default:
		return desired.Spec.Template, false
	}
	return *live.Spec.Template.DeepCopy(), true
}

// sameBrokerCommand reports whether both pod specs run the broker container with the same
// image and arguments.
func sameBrokerCommand(a, b corev1.PodSpec) bool {
	ca, cb := brokerContainerOf(a), brokerContainerOf(b)
	return ca != nil && cb != nil && ca.Image == cb.Image && slices.Equal(ca.Args, cb.Args)
}

func brokerContainerOf(spec corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == kafkav1alpha1.BrokerContainerName {
			return &spec.Containers[i]
		}
	}
	return nil
}
