package broker

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/monitoring"
)

// TestEveryBrokerSeriesIsInDocsMetrics: docs/metrics.md lists every series the broker
// registers — a new series without a row, or a row whose series was renamed away, fails.
func TestEveryBrokerSeriesIsInDocsMetrics(t *testing.T) {
	b := NewBroker(Config{Cluster: "c"}, cluster.NewMemoryView(cluster.Snapshot{}), logr.Discard())
	ch := make(chan *prometheus.Desc)
	go func() {
		b.metrics.Registry.Describe(ch)
		close(ch)
	}()
	var descs []string
	for d := range ch {
		descs = append(descs, d.String())
	}
	md, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := monitoring.DocumentedSeries(md)
	if err != nil {
		t.Fatal(err)
	}
	undocumented, unregistered := monitoring.Compare("broker", monitoring.DescNames(descs), doc)
	for _, n := range undocumented {
		t.Errorf("%s is registered by the broker but has no row in docs/metrics.md", n)
	}
	for _, n := range unregistered {
		t.Errorf("docs/metrics.md lists %s for the broker, which registers no such series", n)
	}
}
