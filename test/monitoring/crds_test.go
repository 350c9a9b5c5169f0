package monitoring

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestTheKitsObjectsAreValidPrometheusOperatorObjects: every PodMonitor and the
// PrometheusRule of the kit are accepted by the Prometheus Operator's own CRDs (the real
// schemas, installed on the suite's API server) with strict field validation, so a misspelt
// or misplaced field is an error here rather than a field the API server drops in silence.
func TestTheKitsObjectsAreValidPrometheusOperatorObjects(t *testing.T) {
	uninstall, err := kubebrokers.Env.InstallMonitoringCRDs()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := uninstall(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	ns, err := testenv.NewNamespace(ctx, kubebrokers.Env.Client, "kit")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"podmonitor-brokers.yaml", "podmonitor-operator.yaml", "prometheusrule.yaml"} {
		b, err := os.ReadFile(filepath.Join(kit, file))
		if err != nil {
			t.Fatal(err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &obj.Object); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		obj.SetNamespace(ns)
		if err := kubebrokers.Env.Client.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
			t.Errorf("%s: the Prometheus Operator's CRD refuses it: %v", file, err)
		}
	}
}
