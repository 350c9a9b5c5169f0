package kafkacluster

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// goldenDigest is the pod-template-inputs digest of goldenCluster with goldenOptions' image.
// It is what every operator version must compute for that spec and image: an upgraded
// operator that computed another would re-render, and so roll, the brokers of every cluster.
// Change it only together with a release note saying that upgrading rolls the brokers.
const goldenDigest = "e8daec032b4291269c1634e296335929"

func TestThePodInputsDigestIsTheSameAcrossOperatorVersions(t *testing.T) {
	if got := podTemplateInputs(goldenCluster(), goldenOptions.DefaultBrokerImage); got != goldenDigest {
		t.Fatalf("digest of the golden cluster = %s, want %s: an operator with this change would roll every cluster's brokers on upgrade", got, goldenDigest)
	}
	sts := desiredStatefulSet(goldenCluster(), goldenOptions)
	if got := sts.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs]; got != goldenDigest {
		t.Fatalf("StatefulSet annotation %s = %q, want %s", kafkav1alpha1.AnnotationPodTemplateInputs, got, goldenDigest)
	}
}

func TestAFieldAddedWithAnEmptyDefaultLeavesTheDigestAlone(t *testing.T) {
	c := goldenCluster()
	c.Spec.Template = kafkav1alpha1.BrokerPodTemplate{NodeSelector: map[string]string{}, Tolerations: []corev1.Toleration{}}
	if got := podTemplateInputs(c, goldenOptions.DefaultBrokerImage); got != goldenDigest {
		t.Fatalf("empty template fields changed the digest to %s", got)
	}
}

// podFieldMutations change each spec field that reaches the broker pod; notPodFieldMutations
// change each one that does not. Together they name every field of KafkaClusterSpec.
var (
	podFieldMutations = map[string]func(*kafkav1alpha1.KafkaClusterSpec){
		"image":     func(s *kafkav1alpha1.KafkaClusterSpec) { s.Image = "example.com/other:v2" },
		"listeners": func(s *kafkav1alpha1.KafkaClusterSpec) { s.Listeners[0].Port = 9093 },
		"storage":   func(s *kafkav1alpha1.KafkaClusterSpec) { s.Storage.Type = kafkav1alpha1.StorageEphemeral },
		"heartbeat": func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Heartbeat.Interval = &metav1.Duration{Duration: 2 * time.Second}
		},
		"drainTimeout": func(s *kafkav1alpha1.KafkaClusterSpec) { s.DrainTimeout = &metav1.Duration{Duration: time.Second} },
		"rack":         func(s *kafkav1alpha1.KafkaClusterSpec) { s.Rack.TopologyKey = "example.com/rack" },
		"resources": func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
		},
		"template": func(s *kafkav1alpha1.KafkaClusterSpec) { s.Template.PriorityClassName = "high" },
	}
	notPodFieldMutations = map[string]func(*kafkav1alpha1.KafkaClusterSpec){
		"replicas":        func(s *kafkav1alpha1.KafkaClusterSpec) { s.Replicas = 7 },
		"config":          func(s *kafkav1alpha1.KafkaClusterSpec) { s.Config = map[string]string{"num.partitions": "3"} },
		"nodeLossTimeout": func(s *kafkav1alpha1.KafkaClusterSpec) { s.NodeLossTimeout = &metav1.Duration{Duration: time.Hour} },
		"networkPolicy":   func(s *kafkav1alpha1.KafkaClusterSpec) { s.NetworkPolicy.Enabled = ptr.To(false) },
		// The certificates reconciler issues from these; brokers read the Secrets through
		// the API (docs/security.md) and reload a renewed certificate without a restart.
		"certificates": func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Certificates.Validity = &metav1.Duration{Duration: 30 * 24 * time.Hour}
		},
		// The brokers read the limits from the KafkaCluster through their view.
		"limits": func(s *kafkav1alpha1.KafkaClusterSpec) { s.Limits.MaxTopics = 10 },
		// The brokers read spec.authorization from the KafkaCluster through their view.
		"authorization": func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Authorization = &kafkav1alpha1.Authorization{Type: kafkav1alpha1.AuthorizationSimple}
		},
		// It shapes the PodMonitor, which scrapes the pods; the pods serve /metrics anyway.
		"monitoring": func(s *kafkav1alpha1.KafkaClusterSpec) {
			s.Monitoring = &kafkav1alpha1.Monitoring{PodMonitor: &kafkav1alpha1.PodMonitorSpec{Enabled: true}}
		},
	}
	// Of a listener, the settings of its Services and of the NetworkPolicy never reach the pod.
	notPodListenerMutations = map[string]func(*kafkav1alpha1.Listener){
		"service": func(l *kafkav1alpha1.Listener) {
			l.Service = &kafkav1alpha1.ListenerService{Annotations: map[string]string{"example.com/lb": "internal"}}
		},
		"allowFrom": func(l *kafkav1alpha1.Listener) {
			l.AllowFrom = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}
		},
	}
	// Of storage, only the type and an emptyDir's size reach the pod.
	notPodStorageMutations = map[string]func(*kafkav1alpha1.Storage){
		"size":             func(s *kafkav1alpha1.Storage) { s.Size = ptr.To(resource.MustParse("20Gi")) },
		"storageClassName": func(s *kafkav1alpha1.Storage) { s.StorageClassName = ptr.To("fast") },
		"accessMode":       func(s *kafkav1alpha1.Storage) { s.AccessMode = corev1.ReadWriteOnce },
		"deleteClaim":      func(s *kafkav1alpha1.Storage) { s.DeleteClaim = true },
	}
)

// A spec field that reaches the pod template must change the digest, or an edit of it would
// never reach the brokers; a field left out of the digest must be shown not to change the
// template. A field added to KafkaClusterSpec fails this test until it is put in one list.
func TestEverySpecFieldIsAPodInputOrProvedNotToBe(t *testing.T) {
	for _, f := range reflect.VisibleFields(reflect.TypeOf(kafkav1alpha1.KafkaClusterSpec{})) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if podFieldMutations[name] == nil && notPodFieldMutations[name] == nil {
			t.Errorf("spec.%s is neither a pod input (podInputs, podFieldMutations) nor shown not to reach the pod (notPodFieldMutations)", name)
		}
	}
	base := goldenCluster()
	baseSts := desiredStatefulSet(base, goldenOptions)
	for name, mutate := range podFieldMutations {
		c := goldenCluster()
		mutate(&c.Spec)
		sts := desiredStatefulSet(c, goldenOptions)
		if equality.Semantic.DeepEqual(sts.Spec.Template, baseSts.Spec.Template) {
			t.Errorf("spec.%s: the mutation does not change the template; pick one that does", name)
		}
		if sts.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs] == baseSts.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs] {
			t.Errorf("spec.%s changes the pod template but not the digest: the edit would never reach the brokers", name)
		}
	}
	check := func(name string, c *kafkav1alpha1.KafkaCluster) {
		sts := desiredStatefulSet(c, goldenOptions)
		if !equality.Semantic.DeepEqual(sts.Spec.Template, baseSts.Spec.Template) {
			t.Errorf("spec.%s is left out of the digest but changes the pod template", name)
		}
	}
	for name, mutate := range notPodFieldMutations {
		c := goldenCluster()
		mutate(&c.Spec)
		check(name, c)
	}
	for name, mutate := range notPodStorageMutations {
		c := goldenCluster()
		mutate(&c.Spec.Storage)
		check("storage."+name, c)
	}
	for name, mutate := range notPodListenerMutations {
		c := goldenCluster()
		mutate(&c.Spec.Listeners[0])
		check("listeners[0]."+name, c)
		if got := podTemplateInputs(c, goldenOptions.DefaultBrokerImage); got != goldenDigest {
			t.Errorf("spec.listeners[0].%s changes the digest (%s): editing it would roll the brokers", name, got)
		}
	}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(kafkav1alpha1.Listener{})) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if notPodListenerMutations[name] == nil && !podListenerFields[name] {
			t.Errorf("spec.listeners[].%s is neither a pod input (podListenerFields) nor shown not to reach the pod (notPodListenerMutations)", name)
		}
	}
}

// podListenerFields are the fields of a listener that reach the pod (its arguments and ports).
var podListenerFields = map[string]bool{"name": true, "port": true, "type": true, "advertisedHost": true, "advertisedHostTemplate": true,
	"tls": true, "authentication": true} // --listener-security

func TestPinnedPodTemplate(t *testing.T) {
	desired := desiredStatefulSet(goldenCluster(), goldenOptions)
	// olderRendering is what an older operator version made of the same inputs: the same
	// image and arguments, rendered with something this version no longer adds.
	olderRendering := func(annotated bool) *appsv1.StatefulSet {
		live := desired.DeepCopy()
		live.Spec.Template.Spec.Containers[0].Env = append(live.Spec.Template.Spec.Containers[0].Env, corev1.EnvVar{Name: "FROM_AN_OLDER_OPERATOR", Value: "1"})
		if !annotated {
			delete(live.Annotations, kafkav1alpha1.AnnotationPodTemplateInputs)
		}
		return live
	}
	otherInputs := olderRendering(true)
	otherInputs.Annotations[kafkav1alpha1.AnnotationPodTemplateInputs] = "0123456789abcdef0123456789abcdef"
	otherImage := olderRendering(false)
	otherImage.Spec.Template.Spec.Containers[0].Image = "example.com/paddock:older"
	otherArgs := olderRendering(false)
	otherArgs.Spec.Template.Spec.Containers[0].Args = append(otherArgs.Spec.Template.Spec.Containers[0].Args, "--something-else")

	for _, tc := range []struct {
		rule     string
		live     *appsv1.StatefulSet
		wantKept bool
	}{
		{"no StatefulSet yet: the desired template", nil, false},
		{"the same inputs: the running template is kept, however this version renders them", olderRendering(true), true},
		{"other inputs: the desired template", otherInputs, false},
		{"no digest, the same image and arguments (an operator before the digest): the running template is kept", olderRendering(false), true},
		{"no digest and another image: the desired template", otherImage, false},
		{"no digest and other arguments: the desired template", otherArgs, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, kept := pinnedPodTemplate(desired, tc.live)
			if kept != tc.wantKept {
				t.Fatalf("kept = %v, want %v", kept, tc.wantKept)
			}
			want := desired.Spec.Template
			if tc.wantKept {
				want = tc.live.Spec.Template
			}
			if !equality.Semantic.DeepEqual(got, want) {
				t.Fatalf("got template\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestBrokerResourcesAndGOMEMLIMIT(t *testing.T) {
	gi := resource.MustParse("1Gi")
	for _, tc := range []struct {
		rule       string
		spec       corev1.ResourceRequirements
		wantLimit  string // memory limit, "" for none
		wantMemEnv string // GOMEMLIMIT, "" for none
	}{
		{"nothing asked: 500m/1Gi requested, 1Gi limit, GOMEMLIMIT at 90%", corev1.ResourceRequirements{}, "1Gi", "966367620"},
		{"a memory limit: GOMEMLIMIT at 90% of it", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}, "4Gi", "3865470480"},
		{"requests only: no limit is invented, no GOMEMLIMIT", corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: gi}}, "", ""},
		{"a CPU limit only: no GOMEMLIMIT", corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}, "", ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := goldenCluster()
			c.Spec.Resources = tc.spec
			container := desiredStatefulSet(c, goldenOptions).Spec.Template.Spec.Containers[0]
			limit, ok := container.Resources.Limits[corev1.ResourceMemory]
			if got := map[bool]string{true: limit.String()}[ok]; got != tc.wantLimit {
				t.Errorf("memory limit %q, want %q", got, tc.wantLimit)
			}
			var env string
			for _, e := range container.Env {
				if e.Name == "GOMEMLIMIT" {
					env = e.Value
				}
			}
			if env != tc.wantMemEnv {
				t.Errorf("GOMEMLIMIT %q, want %q", env, tc.wantMemEnv)
			}
		})
	}
}
