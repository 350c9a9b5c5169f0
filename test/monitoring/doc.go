// Package monitoring proves the monitoring kit of config/monitoring with promtool (built into
// bin/ by `make promtool`; $PROMTOOL names it): every alert's unit tests, the rules and the
// processes' /metrics linted, and every dashboard query answered from what real brokers and
// the manager serve after a little traffic (in-process brokers on envtest, test/kubebrokers).
// docs/metrics.md says what each series means; README "Monitoring" how to install the kit.
package monitoring
