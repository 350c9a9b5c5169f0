package buildinfo

import "github.com/prometheus/client_golang/prometheus"

// Collector is paddock_build_info: always 1, with what Get says of this binary as labels, so
// a dashboard can show which version every process runs and a query can join on it.
func Collector() prometheus.Collector {
	info := Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "paddock_build_info",
		Help: "Always 1; the labels say which paddock build this process runs: version, commit, Go version, flavour (dev or slim).",
		ConstLabels: prometheus.Labels{
			"version": info.Version, "commit": info.Commit, "goversion": info.GoVersion, "flavour": info.Flavour,
		},
	})
	g.Set(1)
	return g
}
