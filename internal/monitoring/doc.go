// Package monitoring is the code side of the monitoring kit in config/monitoring: it reads
// docs/metrics.md's tables (so a test can compare them with what each process registers),
// turns the kit's PodMonitors into the Prometheus scrape configuration `paddock dev` runs
// (the same selection and relabelling, through Kubernetes service discovery), and lists the
// queries of the Grafana dashboard (so the e2e suite can ask a real Prometheus for each).
//
// Pure: plain inputs and outputs, no I/O, no clock, no paddock imports.
package monitoring
