package txn

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the transaction coordinator's Prometheus series. They outlive coordinators
// (one per coordinator epoch): the broker creates them once, registers them (Register) and
// hands them to each Coordinator (Config.Metrics), which Follow points the per-state gauge
// at. A nil *Metrics counts nothing.
type Metrics struct {
	durations *prometheus.HistogramVec
	aborts    *prometheus.CounterVec
	markers   *prometheus.CounterVec
	states    *prometheus.Desc
	// cur is the coordinator the per-state gauge reads at each scrape; nil: none.
	cur atomic.Pointer[Coordinator]
}

// NewMetrics creates the series (not registered anywhere yet), each labelled series at zero
// from the start, so an alert on a rate has something to read before the first transaction.
func NewMetrics() *Metrics {
	m := newMetrics()
	for _, r := range []string{"commit", "abort"} {
		m.durations.WithLabelValues(r)
	}
	for _, r := range []string{"client", "timeout", "fenced"} {
		m.aborts.WithLabelValues(r)
	}
	for _, o := range []string{"written", "dropped", "retried", "refused"} {
		m.markers.WithLabelValues(o)
	}
	return m
}

func newMetrics() *Metrics {
	return &Metrics{
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paddock_txn_transaction_seconds",
			Help:    "Time from a transaction's first partition to its Complete state (every marker written), by result (commit, abort).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}, []string{"result"}),
		aborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_txn_aborts_total",
			Help: "Transactions this coordinator decided to abort, by reason: client (EndTxn abort), timeout (transaction.timeout.ms passed), fenced (a new InitProducerId for the id).",
		}, []string{"reason"}),
		markers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_txn_markers_total",
			Help: "Transaction markers the coordinator had written, by outcome: written, dropped (a partition that cannot hold one), retried (not led there now, a timeout, a storage error), refused (the producer or coordinator epoch moved on).",
		}, []string{"outcome"}),
		states: prometheus.NewDesc("paddock_txn_transactional_ids",
			"Transactional ids this broker's coordinator holds, by state (Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort).",
			[]string{"state"}, nil),
	}
}

// Register registers every series on r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.durations, m.aborts, m.markers, m} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// Follow makes the per-state gauge read c (nil: none), the broker's current coordinator.
func (m *Metrics) Follow(c *Coordinator) {
	if m != nil {
		m.cur.Store(c)
	}
}

// Describe and Collect make the per-state gauge: read from the coordinator at each scrape.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.states }

func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	counts := map[State]int{}
	if c := m.cur.Load(); c != nil {
		counts = c.StateCounts()
	}
	for _, s := range []State{Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort} {
		ch <- prometheus.MustNewConstMetric(m.states, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
}

func (m *Metrics) completed(t Txn, now int64) {
	if m == nil || t.StartMs < 0 {
		return
	}
	result := "commit"
	if t.State == PrepareAbort {
		result = "abort"
	}
	m.durations.WithLabelValues(result).Observe(float64(max(now-t.StartMs, 0)) / 1000)
}

func (m *Metrics) abort(reason string) {
	if m != nil {
		m.aborts.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) marker(outcome string, n int) {
	if m != nil && n > 0 {
		m.markers.WithLabelValues(outcome).Add(float64(n))
	}
}
