package broker

import (
	"errors"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/broker/storage"
)

// dataPlaneMetrics are the series of Produce, Fetch and partition ownership
// (docs/dataplane.md, "Metrics").
type dataPlaneMetrics struct {
	bytesIn, bytesOut *prometheus.CounterVec
	produce, fetch    prometheus.Histogram
	takeoverSeconds   prometheus.Histogram
	takeovers         *prometheus.CounterVec
	led, takingOver   prometheus.Gauge
	fsync             prometheus.Histogram
	drainTimeouts     prometheus.Counter
	selfFenced        prometheus.Counter
	partitionFailures prometheus.Counter
	fenceChecks       *prometheus.CounterVec
	fenceCheck        prometheus.Histogram
}

func newDataPlaneMetrics(r *prometheus.Registry) dataPlaneMetrics {
	// 0.5 ms … ~16 s: an fsync on a local disk is around a millisecond, on a network volume
	// tens; a long-polling Fetch waits up to its max_wait_ms.
	latency := prometheus.ExponentialBuckets(0.0005, 2, 16)
	m := dataPlaneMetrics{
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_bytes_in_total",
			Help: "Record-batch bytes appended by Produce, by topic.",
		}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_bytes_out_total",
			Help: "Record-batch bytes returned by Fetch, by topic.",
		}, []string{"topic"}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paddock_broker_produce_latency_seconds",
			Help:    "Time from a Produce request's decode to its answer (for acks=-1 this includes the group-commit fsync).",
			Buckets: latency,
		}),
		fetch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paddock_broker_fetch_latency_seconds",
			Help:    "Time from a Fetch request's decode to its answer, long-poll wait included.",
			Buckets: latency,
		}),
		takeoverSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paddock_broker_takeover_duration_seconds",
			Help:    "Duration of successful partition takeovers (claim the fence, recover the tail, roll).",
			Buckets: latency,
		}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_takeovers_total",
			Help: "Partition takeovers finished, by result: served, fenced (claimed at a newer epoch), failed (a storage error).",
		}, []string{"result"}),
		led: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_broker_partitions_led",
			Help: "Partitions this broker has taken over and serves.",
		}),
		takingOver: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_broker_partitions_under_takeover",
			Help: "Partitions given to this broker whose takeover is queued or running.",
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "paddock_broker_fsync_duration_seconds",
			Help:    "Duration of every file sync the partition logs make (segments, snapshots, indexes, fence entries).",
			Buckets: latency,
		}),
		drainTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_broker_drain_timeouts_total",
			Help: "Drains that reached --drain-timeout with partitions or groups still assigned here.",
		}),
		selfFenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_broker_self_fenced_appends_total",
			Help: "Produce partitions refused (NOT_LEADER_OR_FOLLOWER) because the broker had not renewed its Lease for a session timeout.",
		}),
		partitionFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "paddock_broker_partition_failures_total",
			Help: "Storage failures that took a partition offline on this broker (a failed takeover, or a serving log that hit a storage error); each is announced on the broker's Lease for the operator to take the partition over again or move it.",
		}),
	}
	m.fenceChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_broker_fence_checks_total",
		Help: "Fence checks of the partition logs (before an acknowledgement, at a takeover's steps, on a storage error), by result: ok, fenced (a newer leader claimed), error (the fence could not be read).",
	}, []string{"result"})
	m.fenceCheck = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "paddock_broker_fence_check_duration_seconds",
		Help:    "Duration of every fence check of the partition logs: reads of the fence by name, never a listing (docs/storage.md).",
		Buckets: latency,
	})
	for _, result := range []string{"served", "fenced", "failed"} {
		m.takeovers.WithLabelValues(result) // every result shows from the first scrape: rate() needs the zero
	}
	for _, result := range []string{"ok", "fenced", "error"} {
		m.fenceChecks.WithLabelValues(result)
	}
	r.MustRegister(m.bytesIn, m.bytesOut, m.produce, m.fetch, m.takeoverSeconds, m.takeovers, m.led, m.takingOver, m.fsync, m.drainTimeouts, m.selfFenced, m.partitionFailures,
		m.fenceChecks, m.fenceCheck)
	return m
}

func (m *Metrics) bytesIn(topic string, n int) {
	if m != nil {
		m.dp.bytesIn.WithLabelValues(topic).Add(float64(n))
	}
}

func (m *Metrics) bytesOut(topic string, n int) {
	if m != nil {
		m.dp.bytesOut.WithLabelValues(topic).Add(float64(n))
	}
}

func (m *Metrics) produceLatency(d time.Duration) {
	if m != nil {
		m.dp.produce.Observe(d.Seconds())
	}
}

func (m *Metrics) fetchLatency(d time.Duration) {
	if m != nil {
		m.dp.fetch.Observe(d.Seconds())
	}
}

// takeover counts a finished takeover; a served one's duration goes to the histogram.
func (m *Metrics) takeover(result string, d time.Duration) {
	if m == nil {
		return
	}
	m.dp.takeovers.WithLabelValues(result).Inc()
	if result == "served" {
		m.dp.takeoverSeconds.Observe(d.Seconds())
	}
}

// fenceChecked counts and times a partition log's fence check (storage.Options.FenceChecked).
func (m *Metrics) fenceChecked(took time.Duration, err error) {
	if m == nil {
		return
	}
	result := "ok"
	switch {
	case errors.Is(err, storage.ErrFenced):
		result = "fenced"
	case err != nil:
		result = "error"
	}
	m.dp.fenceChecks.WithLabelValues(result).Inc()
	m.dp.fenceCheck.Observe(took.Seconds())
}

func (m *Metrics) partitionFailed() {
	if m != nil {
		m.dp.partitionFailures.Inc()
	}
}

func (m *Metrics) partitionsLed(delta int) {
	if m != nil {
		m.dp.led.Add(float64(delta))
	}
}

func (m *Metrics) underTakeover(delta int) {
	if m != nil {
		m.dp.takingOver.Add(float64(delta))
	}
}

func (m *Metrics) drainTimedOut() {
	if m != nil {
		m.dp.drainTimeouts.Inc()
	}
}

func (m *Metrics) selfFencedAppend() {
	if m != nil {
		m.dp.selfFenced.Inc()
	}
}

// timedFS is the storage file system with every File.Sync timed into
// paddock_broker_fsync_duration_seconds: storage exposes no fsync hook, but every byte it
// writes goes through its FS seam.
type timedFS struct {
	storage.FS
	m *Metrics
}

func (t timedFS) OpenFile(name string, flag int, perm os.FileMode) (storage.File, error) {
	f, err := t.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return timedFile{File: f, m: t.m}, nil
}

type timedFile struct {
	storage.File
	m *Metrics
}

// OSFile passes the wrapped file's *os.File on, so a Fetch can send records from it
// (storage.OSFileOf).
func (f timedFile) OSFile() *os.File { return storage.OSFileOf(f.File) }

func (f timedFile) Sync() error {
	start := time.Now()
	err := f.File.Sync()
	if f.m != nil {
		f.m.dp.fsync.Observe(time.Since(start).Seconds())
	}
	return err
}
