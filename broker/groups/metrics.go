package groups

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Metrics are the coordinator's Prometheus series. They are plain collectors: the broker
// registers them on its own registry (Register). A nil *Metrics counts nothing.
type Metrics struct {
	groups      *prometheus.GaugeVec
	cgroups     *prometheus.GaugeVec
	members     prometheus.Gauge
	rebalances  prometheus.Counter
	commits     *prometheus.HistogramVec
	takeovers   *prometheus.CounterVec
	storageErrs prometheus.Counter
	compactions prometheus.Counter
	expired     prometheus.Counter
	held        prometheus.Gauge
	epoch       prometheus.Gauge
}

// NewMetrics creates the series (not registered anywhere yet).
func NewMetrics() *Metrics {
	return &Metrics{
		groups: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paddock_groups_groups",
			Help: "Groups this coordinator holds, by state (Empty, PreparingRebalance, CompletingRebalance, Stable, Dead).",
		}, []string{"state"}),
		cgroups: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "paddock_groups_consumer_groups",
			Help: "Consumer-protocol (KIP-848) groups this coordinator holds, by state (Empty, Assigning, Reconciling, Stable, Dead).",
		}, []string{"state"}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_groups_members",
			Help: "Members of the groups this coordinator holds (both protocols).",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_groups_rebalances_total",
			Help: "Rebalances completed (a leader's SyncGroup delivered the assignment), as Apache's group-completed-rebalance-count.",
		}),
		commits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "paddock_groups_offset_commit_seconds",
			Help:    "Time to make an offset commit durable and check the fence, by result (ok, fenced, error).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"result"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_groups_takeovers_total",
			Help: "Group takeovers, by result: claimed (new epoch), resumed (this process's claim), fenced (the fence held a newer epoch), error.",
		}, []string{"result"}),
		storageErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_groups_storage_errors_total",
			Help: "Storage errors on group files (each unloads the group; nothing is acknowledged).",
		}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_groups_compactions_total",
			Help: "Offsets files rewritten as a snapshot of their group's state by their owner (within a coordinator epoch).",
		}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_groups_offsets_expired_total",
			Help: "Committed offsets removed by offsets.retention.minutes.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_groups_coordinated",
			Help: "Groups this coordinator holds (loading, serving or unloading); the drain waits for 0.",
		}),
		epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_groups_coordinator_epoch",
			Help: "The coordinator epoch of the last view given to the coordinator.",
		}),
	}
}

// Register registers every series on r.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.groups, m.cgroups, m.members, m.rebalances, m.commits, m.takeovers, m.storageErrs, m.compactions, m.expired, m.held, m.epoch} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// groupState moves one group from one state's gauge to another's; -1 is "none".
func (m *Metrics) groupState(from, to State) {
	if m == nil {
		return
	}
	if from >= 0 {
		m.groups.WithLabelValues(from.String()).Dec()
	}
	if to >= 0 {
		m.groups.WithLabelValues(to.String()).Inc()
	}
}

// consumerGroupState moves one consumer group between state gauges; "" is "none".
func (m *Metrics) consumerGroupState(from, to string) {
	if m == nil {
		return
	}
	if from != "" {
		m.cgroups.WithLabelValues(from).Dec()
	}
	if to != "" {
		m.cgroups.WithLabelValues(to).Inc()
	}
}

func (m *Metrics) membersDelta(n int) {
	if m != nil && n != 0 {
		m.members.Add(float64(n))
	}
}

func (m *Metrics) rebalanceCompleted() {
	if m != nil {
		m.rebalances.Inc()
	}
}

func (m *Metrics) commit(d time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, storage.ErrFenced):
		result = "fenced"
	default:
		result = "error"
	}
	m.commits.WithLabelValues(result).Observe(d.Seconds())
}

func (m *Metrics) takeover(result string) {
	if m != nil {
		m.takeovers.WithLabelValues(result).Inc()
	}
}

func (m *Metrics) storageError() {
	if m != nil {
		m.storageErrs.Inc()
	}
}

func (m *Metrics) coordinated(n int) {
	if m != nil {
		m.held.Set(float64(n))
	}
}

func (m *Metrics) setEpoch(e int32) {
	if m != nil {
		m.epoch.Set(float64(e))
	}
}

func (m *Metrics) compaction() {
	if m != nil {
		m.compactions.Inc()
	}
}

func (m *Metrics) offsetsExpired(n int) {
	if m != nil {
		m.expired.Add(float64(n))
	}
}
