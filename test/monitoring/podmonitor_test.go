package monitoring

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// podMonitor is the part of a Prometheus Operator PodMonitor this test reads.
type podMonitor struct {
	Spec struct {
		Selector            metav1.LabelSelector `json:"selector"`
		PodMetricsEndpoints []struct {
			Port string `json:"port"`
			Path string `json:"path"`
		} `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

// podTemplate reads the pod template of the workload (StatefulSet or Deployment) in the YAML
// document of path whose kind is kind.
func podTemplate(t *testing.T, path, kind string) corev1.PodTemplateSpec {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if obj.Kind == kind {
			return obj.Spec.Template
		}
	}
	t.Fatalf("%s has no %s", path, kind)
	return corev1.PodTemplateSpec{}
}

// TestEachPodMonitorSelectsItsPodsAndANamedPort: the brokers' PodMonitor selects the broker
// pods the provisioning reconciler creates (its golden StatefulSet) and not the operator, the
// operator's selects the manager Deployment's pods and not the brokers, and each scrapes a
// container port its pods declare by that name, at /metrics.
func TestEachPodMonitorSelectsItsPodsAndANamedPort(t *testing.T) {
	broker := podTemplate(t, "../../controllers/kafkacluster/testdata/golden/statefulset.yaml", "StatefulSet")
	manager := podTemplate(t, "../../config/manager/manager.yaml", "Deployment")
	for _, m := range []struct {
		file           string
		scrapes, skips corev1.PodTemplateSpec
	}{
		{"podmonitor-brokers.yaml", broker, manager},
		{"podmonitor-operator.yaml", manager, broker},
	} {
		b, err := os.ReadFile(filepath.Join(kit, m.file))
		if err != nil {
			t.Fatal(err)
		}
		var pm podMonitor
		if err := yaml.Unmarshal(b, &pm); err != nil {
			t.Fatal(err)
		}
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil || sel.Empty() {
			t.Fatalf("%s: selector %v %v", m.file, sel, err)
		}
		if !sel.Matches(labels.Set(m.scrapes.Labels)) {
			t.Errorf("%s selects %s, which does not match its pods' labels %v", m.file, sel, m.scrapes.Labels)
		}
		if sel.Matches(labels.Set(m.skips.Labels)) {
			t.Errorf("%s selects %s, which matches the other pods' labels %v too", m.file, sel, m.skips.Labels)
		}
		if len(pm.Spec.PodMetricsEndpoints) == 0 {
			t.Fatalf("%s has no endpoint", m.file)
		}
		for _, e := range pm.Spec.PodMetricsEndpoints {
			if e.Path != "/metrics" {
				t.Errorf("%s scrapes %q, not /metrics", m.file, e.Path)
			}
			named := slices.ContainsFunc(m.scrapes.Spec.Containers, func(c corev1.Container) bool {
				return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == e.Port })
			})
			if !named {
				t.Errorf("%s scrapes port %q, which its pods' containers do not declare", m.file, e.Port)
			}
		}
	}
}
