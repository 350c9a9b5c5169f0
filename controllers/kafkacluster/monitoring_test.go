package kafkacluster

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/monitoring"
)

// operatorPodMonitor is desiredPodMonitor(c) read back as the Prometheus Operator reads it,
// after checking that c controls it (deleting the cluster deletes it).
func operatorPodMonitor(t *testing.T, c *kafkav1alpha1.KafkaCluster) monitoring.PodMonitor {
	t.Helper()
	u := desiredPodMonitor(c)
	if u == nil {
		t.Fatal("desiredPodMonitor is nil for a cluster that enables it")
	}
	if !metav1.IsControlledBy(u, c) {
		t.Errorf("PodMonitor owners %v: not controlled by cluster %s", u.GetOwnerReferences(), c.Name)
	}
	u = u.DeepCopy()
	u.SetOwnerReferences(nil) // not a field paddock dev's reader declares
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	pm, err := monitoring.PodMonitorOf(b)
	if err != nil {
		t.Fatal(err)
	}
	return pm
}

func monitoredCluster(name, ns string, spec *kafkav1alpha1.PodMonitorSpec) *kafkav1alpha1.KafkaCluster {
	return &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "u-1"},
		Spec:       kafkav1alpha1.KafkaClusterSpec{Monitoring: &kafkav1alpha1.Monitoring{PodMonitor: spec}},
	}
}

// TestOperatorPodMonitorScrapesAsTheKitDoes: the operator's PodMonitor scrapes the same port
// and path with the same relabelings as the kit's paddock-brokers PodMonitor, so its series
// carry the job, cluster and broker labels the kit's rules and dashboard group by.
func TestOperatorPodMonitorScrapesAsTheKitDoes(t *testing.T) {
	b, err := os.ReadFile("../../config/monitoring/podmonitor-brokers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if b, err = yaml.YAMLToJSON(b); err != nil {
		t.Fatal(err)
	}
	kit, err := monitoring.PodMonitorOf(b)
	if err != nil {
		t.Fatal(err)
	}
	got := operatorPodMonitor(t, monitoredCluster("c", "team-a", &kafkav1alpha1.PodMonitorSpec{Enabled: true}))
	if diff := cmp.Diff(kit.Spec.PodMetricsEndpoints, got.Spec.PodMetricsEndpoints, cmp.AllowUnexported(kit.Spec.PodMetricsEndpoints[0])); diff != "" {
		t.Errorf("endpoints differ from the kit's (-kit +operator):\n%s", diff)
	}
}

// TestOperatorPodMonitorSelectsOnlyItsClustersBrokers: the PodMonitor lives in the cluster's
// namespace, looks only there, and selects this cluster's broker pods (its StatefulSet's pod
// template) and not those of another cluster in the namespace.
func TestOperatorPodMonitorSelectsOnlyItsClustersBrokers(t *testing.T) {
	c := monitoredCluster("c", "team-a", &kafkav1alpha1.PodMonitorSpec{Enabled: true})
	pm := operatorPodMonitor(t, c)
	if pm.Metadata.Name != "c-broker" || pm.Metadata.Namespace != "team-a" {
		t.Errorf("PodMonitor is %s/%s, want team-a/c-broker", pm.Metadata.Namespace, pm.Metadata.Name)
	}
	if pm.Spec.NamespaceSelector.Any || !cmp.Equal(pm.Spec.NamespaceSelector.MatchNames, []string{"team-a"}) {
		t.Errorf("namespaceSelector %+v, want only team-a", pm.Spec.NamespaceSelector)
	}
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil || sel.Empty() {
		t.Fatalf("selector %v: %v", sel, err)
	}
	opts := Options{DefaultBrokerImage: testImage}
	ours := desiredStatefulSet(c, opts).Spec.Template.Labels
	if !sel.Matches(labels.Set(ours)) {
		t.Errorf("selector %s does not match the broker pods' labels %v", sel, ours)
	}
	other := desiredStatefulSet(monitoredCluster("d", "team-a", nil), opts).Spec.Template.Labels
	if sel.Matches(labels.Set(other)) {
		t.Errorf("selector %s matches cluster d's broker pods %v", sel, other)
	}
}

// TestOperatorPodMonitorLabelsCannotReplaceTheClusters: the user's labels are added (a
// Prometheus selects monitors by them), the cluster's own labels win over the user's, and
// the interval is the spec's.
func TestOperatorPodMonitorLabelsCannotReplaceTheClusters(t *testing.T) {
	pm := operatorPodMonitor(t, monitoredCluster("c", "team-a", &kafkav1alpha1.PodMonitorSpec{
		Enabled:  true,
		Labels:   map[string]string{"release": "kube-prometheus", kafkav1alpha1.LabelCluster: "not-c"},
		Interval: &metav1.Duration{Duration: 30 * time.Second},
	}))
	if got := pm.Metadata.Labels["release"]; got != "kube-prometheus" {
		t.Errorf("label release = %q, want the user's kube-prometheus", got)
	}
	for k, v := range kafkav1alpha1.ClusterLabels("c") {
		if pm.Metadata.Labels[k] != v {
			t.Errorf("label %s = %q, want the cluster's %q", k, pm.Metadata.Labels[k], v)
		}
	}
	if got := pm.Spec.PodMetricsEndpoints[0].Interval; got != "30s" {
		t.Errorf("interval %q, want 30s", got)
	}
}

// TestNoPodMonitorUnlessEnabled: no monitoring section, no podMonitor, or enabled: false
// asks for no PodMonitor.
func TestNoPodMonitorUnlessEnabled(t *testing.T) {
	for name, c := range map[string]*kafkav1alpha1.KafkaCluster{
		"no monitoring": {ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}},
		"no podMonitor": monitoredCluster("c", "ns", nil),
		"disabled":      monitoredCluster("c", "ns", &kafkav1alpha1.PodMonitorSpec{Enabled: false, Labels: map[string]string{"a": "b"}}),
	} {
		if u := desiredPodMonitor(c); u != nil {
			t.Errorf("%s: desiredPodMonitor = %v, want nil", name, u.Object)
		}
	}
}
