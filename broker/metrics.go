package broker

import (
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/buildinfo"
)

// Metrics are the broker's Prometheus series, on a registry of their own (not the process
// global), so tests and several in-process brokers never collide. A nil *Metrics counts
// nothing.
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.CounterVec
	errors      *prometheus.CounterVec
	connections prometheus.Gauge
	// authentications counts SASL authentications by mechanism and result (authn.go).
	authentications *prometheus.CounterVec
	// throttled counts answers a client quota throttled, by quota (quota.go).
	throttled *prometheus.CounterVec
	// latency and answerErrors are per API key and version, created on first use: a key
	// nobody sends costs no series (metrics_requests.go).
	latency      *prometheus.HistogramVec
	answerErrors *prometheus.CounterVec

	// dp are the data plane's series (metrics_dataplane.go).
	dp dataPlaneMetrics

	// byKey caches the request counter of every advertised key and version, so the request
	// path does no label lookup. Written only by NewMetrics.
	byKey map[int16][]prometheus.Counter
}

// NewMetrics registers the broker's series. heartbeatAge and draining are read at scrape time.
func NewMetrics(heartbeatAge func() float64, draining func() bool) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_requests_total",
			Help: "Kafka requests answered, by API key name and version.",
		}, []string{"api", "version"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_connection_errors_total",
			Help: "Connections closed because of a bad request, by reason (unknown_key, unsupported_version, bad_frame, bad_header, bad_body, panic, handler, read).",
		}, []string{"reason"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "paddock_broker_open_connections",
			Help: "Client connections currently open.",
		}),
		authentications: authMetrics(),
		throttled:       quotaMetrics(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "paddock_broker_request_duration_seconds",
			Help: "Time from a request's decode to its encoded answer (long-poll waits and acks=-1 fsyncs included), by API key name and version.",
			// 0.25 ms … ~8 s.
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"api", "version"}),
		answerErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "paddock_broker_response_errors_total",
			Help: "Error codes in answers (the top-level one and each partition's, group's or topic's), by API key name and Kafka error name.",
		}, []string{"api", "error"}),
		byKey: map[int16][]prometheus.Counter{},
	}
	m.Registry.MustRegister(m.requests, m.errors, m.connections, m.authentications, m.throttled, m.latency, m.answerErrors,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		buildinfo.Collector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "paddock_broker_heartbeat_age_seconds",
			Help: "Seconds since the heartbeat Lease was last renewed; -1 before the first renewal.",
		}, heartbeatAge),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "paddock_broker_draining",
			Help: "1 once the broker got SIGTERM and is handing its work over, else 0.",
		}, func() float64 {
			if draining() {
				return 1
			}
			return 0
		}),
	)
	m.dp = newDataPlaneMetrics(m.Registry)
	for key, a := range apis {
		cs := make([]prometheus.Counter, a.max+1)
		for v := a.min; v <= a.max; v++ {
			cs[v] = m.requests.WithLabelValues(kmsg.NameForKey(key), strconv.Itoa(int(v)))
		}
		m.byKey[key] = cs
	}
	return m
}

func (m *Metrics) request(key, version int16) {
	if m == nil {
		return
	}
	if cs, ok := m.byKey[key]; ok && version >= 0 && int(version) < len(cs) && cs[version] != nil {
		cs[version].Inc()
		return
	}
	m.requests.WithLabelValues(kmsg.NameForKey(key), strconv.Itoa(int(version))).Inc()
}

// answered records one answered request: its latency since start and the error codes resp
// carries.
func (m *Metrics) answered(key, version int16, start time.Time, resp kmsg.Response) {
	if m == nil {
		return
	}
	name := kmsg.NameForKey(key)
	m.latency.WithLabelValues(name, strconv.Itoa(int(version))).Observe(time.Since(start).Seconds())
	if resp != nil {
		eachErrorCode(resp, func(code int16) { m.answerErrors.WithLabelValues(name, errorName(code)).Inc() })
	}
}

func (m *Metrics) connError(reason string) {
	if m != nil {
		m.errors.WithLabelValues(reason).Inc()
	}
}

// connState follows the open connections (wire.Server.ConnState).
func (m *Metrics) connState(_ net.Conn, state wire.ConnState) {
	if m == nil {
		return
	}
	switch state {
	case wire.StateNew:
		m.connections.Inc()
	case wire.StateClosed:
		m.connections.Dec()
	}
}
