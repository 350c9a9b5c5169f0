package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
)

func TestAThrottleIsTheDelayThatBringsTheRateBackToItsBound(t *testing.T) {
	start := time.Unix(1000, 0)
	var r rate
	r.record(300_000, start)
	perSecond, window := r.measure(start)
	if window != 10*time.Second {
		t.Fatalf("a new rate's window = %v, want quotaSamples−1 whole windows (10 s)", window)
	}
	if perSecond != 30_000 {
		t.Fatalf("rate = %v, want 300,000 bytes over 10 s", perSecond)
	}
	// (30,000 − 10,000) / 10,000 × 10 s: waiting 20 s more spreads the bytes over 30 s.
	if got := throttleFor(perSecond, 10_000, window); got != 20*time.Second {
		t.Errorf("throttle = %v, want 20s", got)
	}
	if got := throttleFor(perSecond, 30_000, window); got != 0 {
		t.Errorf("throttle at the bound = %v, want 0", got)
	}
	if got := throttleFor(perSecond, 0, window); got != 0 {
		t.Errorf("throttle without a bound = %v, want 0", got)
	}
}

func TestARateForgetsWhatIsOlderThanItsSamples(t *testing.T) {
	start := time.Unix(1000, 0)
	var r rate
	r.record(1_000_000, start)
	for i := range 20 {
		r.record(1, start.Add(time.Duration(i+1)*quotaWindow))
	}
	perSecond, window := r.measure(start.Add(20 * quotaWindow))
	if perSecond > 2 {
		t.Errorf("rate %v/s over %v, want the burst of 20 windows ago forgotten", perSecond, window)
	}
}

func TestIdleRatesAreDropped(t *testing.T) {
	var qs quotas
	start := time.Unix(1000, 0)
	qs.record("User:a", quotaProduce, 1, 10, start)
	qs.record("User:b", quotaProduce, 1, 10, start.Add(quotaIdleExpiry+time.Second))
	if _, ok := qs.rates["User:a"]; ok {
		t.Error("a principal idle past quotaIdleExpiry still has rates")
	}
}

// quotaBroker is a broker with one plaintext listener whose clients (User:ANONYMOUS) have
// quotas q.
func quotaBroker(t *testing.T, q v1alpha1.UserQuotas) *securedBroker {
	t.Helper()
	state := cluster.SecuritySnapshot{Users: map[string]cluster.User{
		anonymous: {Name: "ANONYMOUS", Principal: anonymous, Quotas: &q},
	}}
	return startSecuredBroker(t, state, cluster.ListenerSpec{Name: "plain"})
}

// throttles records every throttle a kgo client is told of.
type throttles struct {
	mu   sync.Mutex
	seen []time.Duration
}

func (th *throttles) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, _ bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	th.seen = append(th.seen, d)
}

func (th *throttles) longest() time.Duration {
	th.mu.Lock()
	defer th.mu.Unlock()
	var m time.Duration
	for _, d := range th.seen {
		m = max(m, d)
	}
	return m
}

func TestAUserOverItsProduceQuotaIsThrottledNotRefused(t *testing.T) {
	sb := quotaBroker(t, v1alpha1.UserQuotas{ProducerByteRate: ptr.To[int64](50_000)})
	var th throttles
	cl := sb.client(t, "plain", kgo.WithHooks(&th), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordDeliveryTimeout(time.Minute))
	value := make([]byte, 100_000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// 600 kB against 50 kB/s: the throttle is 600 kB / 50 kB/s − the window, and the window is
	// at least 10 s, so at most 2 s (exactly 2 s when the records go within 10 s), and a
	// little more for the requests' own bytes (headers, batch framing: 5 kB allow 100 ms).
	for i := range 6 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatalf("record %d: %v (a quota throttles, never refuses)", i, err)
		}
	}
	if d := th.longest(); d <= 0 || d > 2100*time.Millisecond {
		t.Fatalf("longest throttle told %v, want one of at most 2 s (throttles %v)", d, th.seen)
	}
	t.Logf("longest throttle: %v", th.longest())
}

func TestAUserOverItsFetchQuotaGetsAnAnswerWithoutRecords(t *testing.T) {
	sb := quotaBroker(t, v1alpha1.UserQuotas{})
	cl := sb.client(t, "plain", kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := make([]byte, 100_000)
	for i := range 12 {
		if err := produceOne(cl, value); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	sb.update(func(s *cluster.SecuritySnapshot) {
		q := v1alpha1.UserQuotas{ConsumerByteRate: ptr.To[int64](100_000)}
		s.Users = map[string]cluster.User{anonymous: {Name: "ANONYMOUS", Principal: anonymous, Quotas: &q}}
	})
	fetch := func() *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.Version, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 11, 100, 50<<20, -1
		tp := kmsg.NewFetchRequestTopic()
		tp.Topic, tp.TopicID = "t", [16]byte{7} // kgo sends its newest version: by id
		p := kmsg.NewFetchRequestTopicPartition()
		p.PartitionMaxBytes = 50 << 20
		tp.Partitions = append(tp.Partitions, p)
		req.Topics = append(req.Topics, tp)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		kresp, err := cl.Broker(0).Request(ctx, req) // one connection: the one the throttle mutes
		resp, _ := kresp.(*kmsg.FetchResponse)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// 1.2 MB answered at once: 120 kB/s over the first 10 s against 100 kB/s.
	first := fetch()
	if n := fetchRecordBytes(first, nil); n < 1_200_000 {
		t.Fatalf("the first fetch carried %d record bytes, want all 1.2 MB (not yet over the quota): %+v", n, first)
	}
	// 1.2 MB (and a little: the batches' headers) / 100 kB/s − a window of at least 10 s.
	if max := int32(fetchRecordBytes(first, nil)/100 - 10_000 + 1); first.ThrottleMillis <= 0 || first.ThrottleMillis > max {
		t.Fatalf("the first fetch's throttle_time_ms = %d, want (%d bytes / 100 kB/s − the window) ≤ %d ms", first.ThrottleMillis, fetchRecordBytes(first, nil), max)
	}
	started := time.Now()
	second := fetch()
	if len(second.Topics) != 0 || second.ThrottleMillis <= 0 {
		t.Fatalf("a fetch over the quota: %d topics, throttle_time_ms %d; want no topics and a throttle", len(second.Topics), second.ThrottleMillis)
	}
	// The connection was muted for the first throttle: the second answer cannot come sooner.
	if took := time.Since(started); took < time.Duration(first.ThrottleMillis)*time.Millisecond*9/10 {
		t.Errorf("the second fetch was answered %v after it was sent, within the first's throttle of %d ms", took, first.ThrottleMillis)
	}
	t.Logf("throttles: %d ms, then %d ms (no records)", first.ThrottleMillis, second.ThrottleMillis)
}

func produceOne(cl *kgo.Client, value []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	return nil
}

func TestRequestTimeCountsAgainstTheRequestPercentageExceptForApiVersionsAndSASL(t *testing.T) {
	h := &Handler{}
	q := &v1alpha1.UserQuotas{RequestPercentage: ptr.To[int32](1)}
	for _, key := range []int16{apiVersionsKey, saslHandshakeKey, saslAuthenticateKey} {
		rq := &requestQuota{h: h, principal: "User:a", q: q, key: key}
		rq.handled(2 * time.Second)
		if rq.throttle != 0 {
			t.Errorf("key %d was throttled %v on request time, want exempt", key, rq.throttle)
		}
	}
	// 2 s of handler time in a new 10 s window: 20 % of a thread against 1 %, a throttle of
	// (20 − 1) / 1 × 10 s.
	rq := &requestQuota{h: h, principal: "User:a", q: q, key: 3}
	rq.handled(2 * time.Second)
	if want := 190 * time.Second; rq.throttle < want-time.Second || rq.throttle > want+time.Second || rq.reason != quotaRequest {
		t.Errorf("throttle %v for %s, want about %v for request", rq.throttle, quotaKindNames[rq.reason], want)
	}
	other := &requestQuota{h: h, principal: "User:b", q: q, key: 3}
	other.handled(time.Millisecond)
	if other.throttle != 0 {
		t.Errorf("another principal was throttled %v: each principal has its own rates", other.throttle)
	}
}

func TestDescribeClientQuotasAnswersTheKafkaUsersQuotasWithApachesFilter(t *testing.T) {
	q := func(produce int64) *v1alpha1.UserQuotas {
		return &v1alpha1.UserQuotas{ProducerByteRate: ptr.To(produce), RequestPercentage: ptr.To[int32](50)}
	}
	state := cluster.SecuritySnapshot{Users: map[string]cluster.User{
		"User:alice":    {Name: "alice", Principal: "User:alice", Quotas: q(1000)},
		"User:CN=bob":   {Name: "bob", Principal: "User:CN=bob", Quotas: q(2000)},
		"User:no-quota": {Name: "no-quota", Principal: "User:no-quota"},
	}}
	sb := startSecuredBroker(t, state, cluster.ListenerSpec{Name: "plain"})
	conn := dialKafka(t, sb.addrs["plain"])
	describe := func(strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components, req.Strict = comps, strict
		return roundTrip(t, conn, latest(req)).(*kmsg.DescribeClientQuotasResponse)
	}
	comp := func(typ string, match kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, match, name
		return c
	}
	names := func(resp *kmsg.DescribeClientQuotasResponse) []string {
		var out []string
		for _, e := range resp.Entries {
			out = append(out, *e.Entity[0].Name)
		}
		return out
	}
	all := describe(false)
	if got := names(all); len(got) != 2 || got[0] != "CN=bob" || got[1] != "alice" {
		t.Fatalf("every entity: %v, want CN=bob and alice (no-quota has none)", got)
	}
	if v := all.Entries[1].Values; len(v) != 2 || v[0].Key != "producer_byte_rate" || v[0].Value != 1000 || v[1].Key != "request_percentage" || v[1].Value != 50 {
		t.Errorf("alice's values: %+v", v)
	}
	if got := names(describe(true, comp("user", kmsg.QuotasMatchTypeExact, ptr.To("alice")))); len(got) != 1 || got[0] != "alice" {
		t.Errorf("exact alice: %v", got)
	}
	for what, resp := range map[string]*kmsg.DescribeClientQuotasResponse{
		"the default user":       describe(false, comp("user", kmsg.QuotasMatchTypeDefault, nil)),
		"any client-id":          describe(false, comp("client-id", kmsg.QuotasMatchTypeAny, nil)),
		"user and any client-id": describe(false, comp("user", kmsg.QuotasMatchTypeAny, nil), comp("client-id", kmsg.QuotasMatchTypeAny, nil)),
	} {
		if len(resp.Entries) != 0 || resp.ErrorCode != 0 {
			t.Errorf("%s: %v (error %d), want nothing", what, names(resp), resp.ErrorCode)
		}
	}
	for what, c := range map[string]struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
	}{
		"an unknown type":    {[]kmsg.DescribeClientQuotasRequestComponent{comp("group", kmsg.QuotasMatchTypeAny, nil)}, kerr.UnsupportedVersion.Code},
		"a type twice":       {[]kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeAny, nil), comp("user", kmsg.QuotasMatchTypeAny, nil)}, kerr.InvalidRequest.Code},
		"exact without name": {[]kmsg.DescribeClientQuotasRequestComponent{comp("user", kmsg.QuotasMatchTypeExact, nil)}, kerr.InvalidRequest.Code},
		"ip with user":       {[]kmsg.DescribeClientQuotasRequestComponent{comp("ip", kmsg.QuotasMatchTypeAny, nil), comp("user", kmsg.QuotasMatchTypeAny, nil)}, kerr.InvalidRequest.Code},
	} {
		if resp := describe(false, c.comps...); resp.ErrorCode != c.code || len(resp.Entries) != 0 {
			t.Errorf("%s: error %d with %d entries, want %d and none", what, resp.ErrorCode, len(resp.Entries), c.code)
		}
	}
}
