package monitoring

import (
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/controllers"
	"github.com/paddock-dev/paddock/internal/monitoring"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// target is one scrape: what Prometheus read from a process's /metrics, and the target labels
// the kit's PodMonitors give its series (config/monitoring: job, namespace, pod, cluster,
// broker; the operator's honorLabels keep the labels its series carry).
type target struct {
	name     string
	text     []byte
	labels   map[string]string
	families map[string]*dto.MetricFamily
}

// scrape reads url's /metrics as Prometheus does (the text format).
func scrape(t *testing.T, name, url string, labels map[string]string) target {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	text, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %d %v", name, resp.StatusCode, err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(text)))
	if err != nil {
		t.Fatalf("scrape %s: %v", name, err)
	}
	return target{name: name, text: text, labels: labels, families: families}
}

// traffic runs what a small production cluster sees: two brokers, a topic of two
// partitions, a producer, a group consumer that committed and is still a member, a request
// answered with an error code and a connection closed for an unknown API key. It returns the
// scrapes of both brokers and of the manager's /metrics (controller-runtime's registry, with
// paddock's series reading the envtest objects, served as the manager serves it).
func traffic(t *testing.T) (brokers []target, manager target) {
	c := kubebrokers.NewCluster(t, 2, kubebrokers.Options{Namespace: "monitoring",
		GroupConfig: func(cfg *groups.Config) {
			cfg.InitialRebalanceDelay, cfg.ConsumerHeartbeatInterval = 100*time.Millisecond, 250*time.Millisecond
		}})
	ctx := testkit.Context(t)
	const topic, group = "orders", "billing"
	if resp, err := kadm.NewClient(c.Kgo()).CreateTopic(ctx, 2, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	// Records alternate between the partitions: the group commits on both, so its coordinator
	// (one of the two brokers) leads one of them and exports its lag (docs/metrics.md).
	producer := c.Kgo(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(n int) {
		for i := range n {
			r := &kgo.Record{Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))}
			if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(20)
	// A compacted topic, so the cleaner's per-partition series are served.
	compact := "compact"
	if resp, err := kadm.NewClient(c.Kgo()).CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, "changelog"); err != nil || resp.Err != nil {
		t.Fatalf("create changelog: %v %v", err, resp.Err)
	}
	for i := range 5 {
		r := &kgo.Record{Topic: "changelog", Key: []byte(strconv.Itoa(i % 2)), Value: []byte(strconv.Itoa(i))}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to changelog: %v", err)
		}
	}
	consumer := c.Kgo(kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for read := 0; read < 20; {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer read %d records: %v", read, ctx.Err())
		}
		read += fs.NumRecords()
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	produce(5) // the group is 5 behind
	// A consumer-protocol (KIP-848) group beside the classic one, still a member when scraped.
	nextGen := c.Kgo(kgo.ConsumerGroup("shipping"), kgo.ConsumeTopics(topic), kgo.ServerSideBalancer(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for read := 0; read == 0; {
		fs := nextGen.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumer-protocol member read nothing: %v", ctx.Err())
		}
		read += fs.NumRecords()
	}

	meta := kmsg.NewPtrMetadataRequest()
	meta.AllowAutoTopicCreation = false
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("no-such-topic")
	meta.Topics = append(meta.Topics, mt)
	if resp, err := meta.RequestWith(ctx, producer); err != nil || resp.Topics[0].ErrorCode == 0 {
		t.Fatalf("Metadata of a missing topic: %v %+v", err, resp)
	}
	unknownKey(t, c.Addrs[0])

	controllers.RegisterMetrics(kubebrokers.Env.Client)
	mgr := httptest.NewServer(promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	t.Cleanup(mgr.Close)
	testkit.Eventually(t, "the group's committed offsets, the consumer-protocol group and the topic's leaders in /metrics", func() bool {
		brokers = brokers[:0]
		committed, nextGenHeld := false, false
		for id, addr := range c.HealthAddrs {
			b := scrape(t, fmt.Sprintf("broker %d", id), "http://"+addr+"/metrics", map[string]string{
				"job": "paddock-broker", "namespace": c.NS, "cluster": kubebrokers.ClusterName, "broker": strconv.Itoa(id),
				"pod": v1alpha1.BrokerPodName(kubebrokers.ClusterName, int32(id)), "instance": addr,
			})
			committed = committed || b.families["paddock_group_committed_offset"] != nil
			nextGenHeld = nextGenHeld || b.families["paddock_groups_consumer_groups"] != nil
			brokers = append(brokers, b)
		}
		manager = scrape(t, "manager", mgr.URL, map[string]string{
			"job": "paddock-operator", "namespace": "paddock-system", "pod": "paddock-manager-0", "instance": mgr.Listener.Addr().String(),
		})
		leaders := false
		for _, m := range manager.families["paddock_topic_partitions_without_serving_leader"].GetMetric() {
			leaders = leaders || slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == topic })
		}
		return committed && nextGenHeld && leaders
	})
	return brokers, manager
}

// unknownKey sends addr a request of an API key Kafka does not have; the broker closes the
// connection (docs/metrics.md: paddock_broker_connection_errors_total{reason="unknown_key"}).
func unknownKey(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	// size, api key 9999, version 0, correlation id 1, null client id
	frame := binary.BigEndian.AppendUint32(nil, 10)
	frame = binary.BigEndian.AppendUint16(frame, 9999)
	frame = binary.BigEndian.AppendUint16(frame, 0)
	frame = binary.BigEndian.AppendUint32(frame, 1)
	frame = binary.BigEndian.AppendUint16(frame, 0xffff)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(testkit.Deadline)); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, conn); err != nil || n != 0 {
		t.Fatalf("an unknown API key was answered (%d bytes, %v), not closed", n, err)
	}
}

// TestTheKitHoldsOnRealMetrics scrapes two real brokers and the manager after some traffic:
// docs/metrics.md lists exactly what they serve, promtool's linter accepts it, and every
// query of the dashboard returns data from it.
func TestTheKitHoldsOnRealMetrics(t *testing.T) {
	brokers, manager := traffic(t)
	md, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := monitoring.DocumentedSeries(md)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("every documented broker series is served, with its documented type", func(t *testing.T) {
		served := map[string]*dto.MetricFamily{}
		for _, b := range brokers {
			maps.Copy(served, b.families)
		}
		// Every one but the certificate expiry, which only a TLS listener serves (these
		// brokers have none): broker's TestMetricsShowWhenEachTLSListenersCertificateExpires
		// proves it, its type included.
		checkServed(t, "broker", served, doc, func(s monitoring.Series) bool {
			return s.Name != "paddock_tls_certificate_expiry_timestamp_seconds"
		})
	})
	t.Run("a consumer-protocol group shows its own state and its member", func(t *testing.T) {
		var states []string
		members := -1.0
		for _, b := range brokers {
			for _, s := range samples(b.families["paddock_group_state"]) {
				if s.labels["group"] == "shipping" {
					states = append(states, s.labels["state"])
				}
			}
			for _, s := range samples(b.families["paddock_group_members"]) {
				if s.labels["group"] == "shipping" {
					members = s.value
				}
			}
		}
		if len(states) != 1 || !slices.Contains([]string{"Assigning", "Reconciling", "Stable"}, states[0]) || members != 1 {
			t.Errorf("group shipping: states %v, members %v; want one of Assigning, Reconciling, Stable and 1 member", states, members)
		}
	})
	t.Run("every series the manager serves is documented, and its gauges are served", func(t *testing.T) {
		// The manager's counters count events this traffic has none of (recovery decisions,
		// leader elections, certificate reloads): only its gauges must be there.
		checkServed(t, "manager", manager.families, doc, func(s monitoring.Series) bool { return s.Type == "gauge" })
	})
	t.Run("promtool check metrics accepts the brokers' and the manager's /metrics", func(t *testing.T) {
		for _, target := range append(slices.Clone(brokers), manager) {
			promtool(t, t.TempDir(), target.text, "check", "metrics")
		}
	})
	t.Run("every dashboard query returns data", func(t *testing.T) {
		dashboardAnswers(t, append(slices.Clone(brokers), manager))
	})
}

// checkServed compares what a process served with docs/metrics.md's rows of process: every
// row required holds a served family of its type (a prefix row, at least one family), and
// every served family has a row.
func checkServed(t *testing.T, process string, served map[string]*dto.MetricFamily, doc []monitoring.Series, required func(monitoring.Series) bool) {
	undocumented, _ := monitoring.Compare(process, slices.Sorted(maps.Keys(served)), doc)
	for _, n := range undocumented {
		t.Errorf("%s serves %s, which docs/metrics.md does not list", process, n)
	}
	for _, s := range doc {
		if s.Process != process || !required(s) {
			continue
		}
		if prefix, ok := strings.CutSuffix(s.Name, "*"); ok {
			if !slices.ContainsFunc(slices.Collect(maps.Keys(served)), func(n string) bool { return strings.HasPrefix(n, prefix) }) {
				t.Errorf("docs/metrics.md lists %s for the %s, which serves no such series", s.Name, process)
			}
			continue
		}
		f := served[s.Name]
		if f == nil {
			t.Errorf("docs/metrics.md lists %s for the %s, which does not serve it after the traffic", s.Name, process)
			continue
		}
		if got := strings.ToLower(f.GetType().String()); got != s.Type {
			t.Errorf("%s is a %s; docs/metrics.md says %s", s.Name, got, s.Type)
		}
	}
}

// dashboardAnswers evaluates every query of the kit's dashboard with promtool, on the scraped
// series and the kit's recording rules: each query is the expression of an alert
// "DashboardQueryEmpty" (absent(query)), and the unit test expects that alert never to fire.
// The dashboard's variables take Grafana's values for "All" and a 15 s scrape.
func dashboardAnswers(t *testing.T, targets []target) {
	b, err := os.ReadFile(filepath.Join(kit, "dashboards", "paddock.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := monitoring.DashboardQueries(b)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"namespace": ".*", "cluster": ".*", "datasource": "", "__rate_interval": "1m"}
	panels := monitoring.RuleGroup{Name: "dashboard"}
	for _, q := range queries {
		expr, err := monitoring.Expand(q.Expr, vars)
		if err != nil {
			t.Fatalf("panel %q: %v", q.Panel, err)
		}
		panels.Rules = append(panels.Rules, monitoring.Rule{Alert: "DashboardQueryEmpty", Expr: "absent(" + expr + ")",
			Labels: map[string]string{"panel": q.Panel, "query": q.RefID}})
	}
	dir := t.TempDir()
	writeRules(t, dir, "rules.yaml", kitRules(t))
	writeRules(t, dir, "dashboard.yaml", monitoring.RuleFile{Groups: []monitoring.RuleGroup{panels}})

	var series []map[string]string
	for _, tg := range targets {
		series = append(series, map[string]string{"series": selector("up", nil, tg.labels), "values": "1+0x40"})
		for _, name := range slices.Sorted(maps.Keys(tg.families)) {
			for _, s := range samples(tg.families[name]) {
				if !math.IsNaN(s.value) && !math.IsInf(s.value, 0) {
					series = append(series, map[string]string{"series": selector(s.name, s.labels, tg.labels),
						"values": strconv.FormatFloat(s.value, 'g', -1, 64) + "+0x40"})
				}
			}
		}
	}
	unit := map[string]any{
		"rule_files":          []string{"rules.yaml", "dashboard.yaml"},
		"evaluation_interval": "15s",
		"tests": []any{map[string]any{
			"name":            "every dashboard query returns data",
			"interval":        "15s",
			"input_series":    series,
			"alert_rule_test": []any{map[string]any{"eval_time": "5m", "alertname": "DashboardQueryEmpty", "exp_alerts": []any{}}},
		}},
	}
	ub, err := yaml.Marshal(unit)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboard_test.yaml"), ub, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d dashboard queries over %d scraped series", len(queries), len(series))
	promtool(t, dir, nil, "test", "rules", "dashboard_test.yaml")
}

// sample is one series of a family as Prometheus stores it from a scrape: a histogram's
// _bucket, _sum and _count, a summary's quantiles, _sum and _count.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// samples lists a family's series.
func samples(f *dto.MetricFamily) []sample {
	var out []sample
	for _, m := range f.GetMetric() {
		base := map[string]string{}
		for _, l := range m.GetLabel() {
			base[l.GetName()] = l.GetValue()
		}
		put := func(suffix string, extra map[string]string, v float64) {
			ls := maps.Clone(base)
			maps.Copy(ls, extra)
			out = append(out, sample{f.GetName() + suffix, ls, v})
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			put("", nil, m.GetCounter().GetValue())
		case dto.MetricType_GAUGE:
			put("", nil, m.GetGauge().GetValue())
		case dto.MetricType_UNTYPED:
			put("", nil, m.GetUntyped().GetValue())
		case dto.MetricType_HISTOGRAM:
			h := m.GetHistogram()
			for _, b := range h.GetBucket() {
				put("_bucket", map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)}, float64(b.GetCumulativeCount()))
			}
			put("_bucket", map[string]string{"le": "+Inf"}, float64(h.GetSampleCount()))
			put("_sum", nil, h.GetSampleSum())
			put("_count", nil, float64(h.GetSampleCount()))
		case dto.MetricType_SUMMARY:
			s := m.GetSummary()
			for _, q := range s.GetQuantile() {
				put("", map[string]string{"quantile": strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)}, q.GetValue())
			}
			put("_sum", nil, s.GetSampleSum())
			put("_count", nil, float64(s.GetSampleCount()))
		}
	}
	return out
}

// selector is a promtool input series: name with its own labels, and each target label the
// series does not carry itself (honorLabels: the scraped one wins).
func selector(name string, own, targetLabels map[string]string) string {
	ls := maps.Clone(own)
	if ls == nil {
		ls = map[string]string{}
	}
	for k, v := range targetLabels {
		if _, ok := ls[k]; !ok {
			ls[k] = v
		}
	}
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(ls)) {
		pairs = append(pairs, k+"="+strconv.Quote(ls[k]))
	}
	return name + "{" + strings.Join(pairs, ",") + "}"
}
