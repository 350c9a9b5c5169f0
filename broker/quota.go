package broker

import (
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/wire"
)

// Client quotas (docs/security.md, "Quotas"): a KafkaUser's quotas bound what its principal
// may cost one broker — bytes produced and fetched a second, and the share of a request
// thread's time its requests take — with Apache's semantics: each is a rate over
// quotaSamples windows of quotaWindow, and a request that brings the rate over the bound is
// answered with throttle_time_ms = (rate − bound) / bound × the rate's window, the time that
// brings the rate back to the bound if nothing more comes, and the connection is muted for
// that long (KIP-219). A Fetch while the consumer rate is over its bound is answered without
// records.

// Apache's quota.window.num and quota.window.size.seconds defaults.
const (
	quotaSamples = 11
	quotaWindow  = time.Second
	// quotaIdleExpiry drops a principal's rates after this long without a request (Apache's
	// inactive sensor expiration).
	quotaIdleExpiry = time.Hour
)

// quotaKind is one of a user's quotas.
type quotaKind int

const (
	quotaProduce quotaKind = iota // bytes of Produce requests a second
	quotaFetch                    // bytes of Fetch answers a second
	quotaRequest                  // percent of one request thread's time
	quotaKinds
)

var quotaKindNames = [quotaKinds]string{"produce", "fetch", "request"}

// quotaBound is kind's bound in q (bytes a second; percent), or 0 when q sets none.
func quotaBound(q *v1alpha1.UserQuotas, kind quotaKind) float64 {
	if q == nil {
		return 0
	}
	switch kind {
	case quotaProduce:
		if q.ProducerByteRate != nil {
			return float64(*q.ProducerByteRate)
		}
	case quotaFetch:
		if q.ConsumerByteRate != nil {
			return float64(*q.ConsumerByteRate)
		}
	case quotaRequest:
		if q.RequestPercentage != nil {
			return float64(*q.RequestPercentage)
		}
	}
	return 0
}

// rate is Apache's sampled rate: the values recorded in the last quotaSamples windows
// divided by the time they cover, counted as at least quotaSamples−1 whole windows so a new
// rate does not start out huge.
type rate struct {
	samples [quotaSamples]struct {
		start time.Time
		value float64
	}
	current int
}

// record adds v at now, starting a new window when the current one is over.
func (r *rate) record(v float64, now time.Time) {
	s := &r.samples[r.current]
	if s.start.IsZero() || now.Sub(s.start) >= quotaWindow {
		r.current = (r.current + 1) % quotaSamples
		s = &r.samples[r.current]
		s.start, s.value = now, 0
	}
	s.value += v
}

// measure is the rate at now (per second) and the window it is measured over.
func (r *rate) measure(now time.Time) (perSecond float64, window time.Duration) {
	var sum float64
	oldest := now
	for i := range r.samples {
		s := &r.samples[i]
		if s.start.IsZero() || now.Sub(s.start) >= quotaSamples*quotaWindow {
			continue // never used, or too old to count
		}
		sum += s.value
		if s.start.Before(oldest) {
			oldest = s.start
		}
	}
	window = now.Sub(oldest)
	if full := time.Duration(quotaSamples-1) * quotaWindow; window < full {
		window = full
	}
	return sum / window.Seconds(), window
}

// throttleFor is how long to hold a client whose rate is perSecond over window against
// bound: (rate − bound) / bound × window, 0 when within it.
func throttleFor(perSecond, bound float64, window time.Duration) time.Duration {
	if bound <= 0 || perSecond <= bound {
		return 0
	}
	return time.Duration(math.Round((perSecond - bound) / bound * float64(window)))
}

// quotas holds every principal's rates on this broker.
type quotas struct {
	mu    sync.Mutex
	rates map[string]*principalRates
}

type principalRates struct {
	kinds [quotaKinds]rate
	last  time.Time
}

// record adds v to principal's kind at now and returns how long the principal must be
// throttled for it under bound (0: not).
func (qs *quotas) record(principal string, kind quotaKind, bound, v float64, now time.Time) time.Duration {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	p := qs.principal(principal, now)
	p.kinds[kind].record(v, now)
	perSecond, window := p.kinds[kind].measure(now)
	return throttleFor(perSecond, bound, window)
}

// over is how long principal is throttled on kind at now under bound, without recording.
func (qs *quotas) over(principal string, kind quotaKind, bound float64, now time.Time) time.Duration {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	perSecond, window := qs.principal(principal, now).kinds[kind].measure(now)
	return throttleFor(perSecond, bound, window)
}

// principal is p's rates, made when missing; rates idle past quotaIdleExpiry are dropped.
func (qs *quotas) principal(principal string, now time.Time) *principalRates {
	if qs.rates == nil {
		qs.rates = map[string]*principalRates{}
	}
	p := qs.rates[principal]
	if p == nil {
		for name, other := range qs.rates {
			if now.Sub(other.last) > quotaIdleExpiry {
				delete(qs.rates, name)
			}
		}
		p = &principalRates{}
		qs.rates[principal] = p
	}
	p.last = now
	return p
}

// Kafka API keys the quotas look at, and those Apache never throttles on request time (a
// client must always be able to learn the versions and authenticate).
const (
	produceKey = 0
	fetchKey   = 1
)

func requestQuotaExempt(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}

// requestQuota is one request's quota accounting: the principal's bounds, and the longest
// throttle any of them asks for so far.
type requestQuota struct {
	h         *Handler
	principal string
	q         *v1alpha1.UserQuotas
	key       int16
	throttle  time.Duration
	// reason is the quota that asked for throttle (quotaKindNames).
	reason quotaKind
}

// quotaOf is the accounting of a request of key from principal, or nil when the principal
// has no quotas (no KafkaUser, or one without quotas): then nothing is measured.
func (h *Handler) quotaOf(principal string, key int16) *requestQuota {
	u, ok := h.security().Users[principal]
	if !ok || u.Quotas == nil {
		return nil
	}
	return &requestQuota{h: h, principal: principal, q: u.Quotas, key: key}
}

func (rq *requestQuota) raise(d time.Duration, kind quotaKind) {
	if d > rq.throttle {
		rq.throttle, rq.reason = d, kind
	}
}

// produced records a Produce request of n bytes against the producer byte rate.
func (rq *requestQuota) produced(n int) {
	if bound := quotaBound(rq.q, quotaProduce); bound > 0 {
		rq.raise(rq.h.quotas.record(rq.principal, quotaProduce, bound, float64(n), rq.h.now()), quotaProduce)
	}
}

// fetchThrottled is how long a Fetch must wait because the consumer byte rate is over its
// bound already: such a Fetch is answered without records (Apache's throttled response).
func (rq *requestQuota) fetchThrottled() time.Duration {
	bound := quotaBound(rq.q, quotaFetch)
	if bound <= 0 {
		return 0
	}
	d := rq.h.quotas.over(rq.principal, quotaFetch, bound, rq.h.now())
	rq.raise(d, quotaFetch)
	return d
}

// fetched records a Fetch answer of n record bytes against the consumer byte rate.
func (rq *requestQuota) fetched(n int64) {
	if bound := quotaBound(rq.q, quotaFetch); bound > 0 && n > 0 {
		rq.raise(rq.h.quotas.record(rq.principal, quotaFetch, bound, float64(n), rq.h.now()), quotaFetch)
	}
}

// handled records the time the request's handler took against the request percentage (100
// for one whole thread's second per second).
func (rq *requestQuota) handled(took time.Duration) {
	if bound := quotaBound(rq.q, quotaRequest); bound > 0 && !requestQuotaExempt(rq.key) {
		rq.raise(rq.h.quotas.record(rq.principal, quotaRequest, bound, took.Seconds()*100, rq.h.now()), quotaRequest)
	}
}

// apply puts the throttle into resp's throttle_time_ms (keeping a longer one already there)
// and mutes conn for it; nothing when no quota asked for one.
func (rq *requestQuota) apply(resp kmsg.Response, conn *wire.Conn) {
	if rq.throttle <= 0 {
		return
	}
	ms := int32(min(rq.throttle.Milliseconds(), math.MaxInt32))
	if t, ok := resp.(kmsg.ThrottleResponse); ok {
		if cur, _ := t.Throttle(); cur < ms {
			resp.(kmsg.SetThrottleResponse).SetThrottle(ms)
		}
	}
	conn.MuteUntil(rq.h.now().Add(rq.throttle))
	if rq.h.Metrics != nil {
		rq.h.Metrics.throttled.WithLabelValues(quotaKindNames[rq.reason]).Inc()
	}
}

// fetchRecordBytes is how many record bytes a Fetch answer carries: in its partitions, and
// held to be sent from files or memory chunks.
func fetchRecordBytes(resp *kmsg.FetchResponse, held *heldRecords) int64 {
	var n int64
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			n += int64(len(resp.Topics[i].Partitions[j].RecordBatches))
		}
	}
	if held != nil {
		for _, s := range held.files {
			n += s.Len
		}
		for _, chunks := range held.chunks {
			for _, c := range chunks {
				n += int64(len(c))
			}
		}
	}
	return n
}

// throttledFetch is the answer to a Fetch while the principal's consumer byte rate is over
// its bound: no topics, no records, throttle_time_ms set (Apache's throttled response; this
// broker keeps no fetch sessions, so the session id is 0). nil when the Fetch is served, or
// when it names a session, which the normal answer refuses.
func (h *Handler) throttledFetch(rq *requestQuota, req kmsg.Request) *kmsg.FetchResponse {
	f, ok := req.(*kmsg.FetchRequest)
	if !ok || (f.SessionEpoch != 0 && f.SessionEpoch != -1) || rq.fetchThrottled() <= 0 {
		return nil
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = f.Version
	return resp
}

// wrap applies the request's throttle to its answer: at once for an answer given now, and
// for one computed later (Produce waiting for its fsync, Fetch waiting for data) when it is,
// after counting a Fetch answer's record bytes.
func (rq *requestQuota) wrap(rc *requestContext, resp kmsg.Response, conn *wire.Conn) {
	if rc.later == nil {
		if f, ok := resp.(*kmsg.FetchResponse); ok {
			rq.fetched(fetchRecordBytes(f, &rc.held))
		}
		if resp != nil {
			rq.apply(resp, conn)
		} else if rq.throttle > 0 {
			conn.MuteUntil(rq.h.now().Add(rq.throttle)) // acks=0: no answer to carry it
		}
		return
	}
	inner := rc.later
	rc.later = func() (kmsg.Response, error) {
		resp, err := inner()
		if err != nil || resp == nil {
			return resp, err
		}
		if f, ok := resp.(*kmsg.FetchResponse); ok {
			rq.fetched(fetchRecordBytes(f, &rc.held))
		}
		rq.apply(resp, conn)
		return resp, nil
	}
}

// quotaMetrics is the throttle counter, with a zero series for every quota.
func quotaMetrics() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_broker_quota_throttles_total",
		Help: "Answers a KafkaUser's quota throttled (throttle_time_ms set, the connection muted for it), by the quota that asked for the longest throttle (produce, fetch, request).",
	}, []string{"quota"})
	for _, name := range quotaKindNames {
		c.WithLabelValues(name)
	}
	return c
}

// quotaValues are q's quotas as the client-quota APIs name them, by key.
func quotaValues(q *v1alpha1.UserQuotas) []kmsg.DescribeClientQuotasResponseEntryValue {
	var out []kmsg.DescribeClientQuotasResponseEntryValue
	add := func(key string, v float64) {
		e := kmsg.NewDescribeClientQuotasResponseEntryValue()
		e.Key, e.Value = key, v
		out = append(out, e)
	}
	if b := quotaBound(q, quotaFetch); b > 0 {
		add("consumer_byte_rate", b)
	}
	if b := quotaBound(q, quotaProduce); b > 0 {
		add("producer_byte_rate", b)
	}
	if b := quotaBound(q, quotaRequest); b > 0 {
		add("request_percentage", b)
	}
	return out
}
