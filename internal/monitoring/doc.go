// Package monitoring is the code side of the monitoring kit in config/monitoring: it reads
// docs/metrics.md's tables (so a test can compare them with what each process registers and
// serves), turns the kit's PrometheusRule into the rule file Prometheus and promtool read, and
// lists the queries of the Grafana dashboard (so a test can evaluate each one).
//
// Pure: plain inputs and outputs, no I/O, no clock, no paddock imports.
package monitoring
