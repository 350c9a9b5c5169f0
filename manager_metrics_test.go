package main

import (
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/paddock-dev/paddock/controllers"
	"github.com/paddock-dev/paddock/internal/monitoring"
)

// TestEveryManagerSeriesIsInDocsMetrics: docs/metrics.md lists every series the manager's
// /metrics registers (controller-runtime's registry, with paddock's own on it) — a new
// series without a row, or a row whose series is gone, fails.
func TestEveryManagerSeriesIsInDocsMetrics(t *testing.T) {
	controllers.RegisterMetrics(nil)
	reg, ok := ctrlmetrics.Registry.(*prometheus.Registry)
	if !ok {
		t.Fatalf("controller-runtime's registry is a %T, not a *prometheus.Registry", ctrlmetrics.Registry)
	}
	ch := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(ch)
		close(ch)
	}()
	var descs []string
	for d := range ch {
		descs = append(descs, d.String())
	}
	md, err := os.ReadFile("docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := monitoring.DocumentedSeries(md)
	if err != nil {
		t.Fatal(err)
	}
	undocumented, unregistered := monitoring.Compare("manager", monitoring.DescNames(descs), doc)
	for _, n := range undocumented {
		t.Errorf("%s is registered by the manager but has no row in docs/metrics.md", n)
	}
	for _, n := range unregistered {
		t.Errorf("docs/metrics.md lists %s for the manager, which registers no such series", n)
	}
}
