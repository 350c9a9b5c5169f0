package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/monitoring"
	"github.com/paddock-dev/paddock/internal/monitoring/snapshot"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// prometheusSpeedup is the suite's Prometheus clock (devcluster.Config.PrometheusSpeedup):
// the monitors scrape every 1.5 s instead of 15 s, and every alert's `for` and range window
// is a tenth of the kit's, so an alert of ten minutes fires here in one. The rules' own
// timings are proved by promtool's unit tests (config/monitoring/tests).
const prometheusSpeedup = 10

// monitoringScenario is scenario 20 (README "Monitoring"): paddock dev's Prometheus scrapes
// what the kit's PodMonitors select and evaluates the kit's rules. With a producer and a
// consumer group running: every target is up, every query of the dashboard returns data,
// and each alert fires in the failure it is for and resolves after it —
// PaddockVolumeUnwritable when a broker's volume refuses every write, PaddockBrokerDead when
// a broker stops (SIGSTOP: a process that dies without a word), and PaddockConsumerLagGrowing
// when the group's consumer stops while records keep coming.
func monitoringScenario(ctx context.Context, t *testing.T, s *suite) {
	const scenario = "20 monitoring"
	began := time.Now()
	prom := s.env.PrometheusURL()
	if prom == "" {
		t.Fatal("the suite's environment runs no Prometheus (make prometheus builds it; $PROMETHEUS names it)")
	}
	testkit.EventuallyDetail(t, "Prometheus scraping three brokers and the operator", func() (bool, string) {
		brokers, err := promQuery(ctx, prom, fmt.Sprintf(`up{job="paddock-broker",namespace=%q,cluster=%q} == 1`, s.namespace, s.name))
		if err != nil {
			return false, err.Error()
		}
		operator, err := promQuery(ctx, prom, `up{job="paddock-operator"} == 1`)
		if err != nil {
			return false, err.Error()
		}
		return len(brokers) == 3 && len(operator) == 1, fmt.Sprintf("brokers up %d, operator up %d", len(brokers), len(operator))
	})

	const topic, group, partitions = "e2e-monitoring", "e2e-lag", 3
	seeds := s.podAddrs(ctx, t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, t, adm, partitions, topic)
	defer s.deleteTopicAndWait(ctx, t, adm, topic) // the next scenario starts from a cluster without topics
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProducing(); wg.Wait() }()
	wg.Go(func() { produceSteadily(pctx, cl, topic) })
	consumer := startLagConsumer(ctx, t, seeds, group, topic)
	defer func() { consumer.stop() }()
	testkit.EventuallyDetail(t, "the group's lag recorded", func() (bool, string) {
		lag, err := promQuery(ctx, prom, fmt.Sprintf(`paddock:group_lag:sum_by_group{group=%q}`, group))
		return err == nil && len(lag) == 1, fmt.Sprintf("%d series, %v", len(lag), err)
	})

	// A client that sends a frame of an API key Kafka does not have (a port scanner, a
	// client of another protocol): the broker closes its connection and counts it, which the
	// dashboard's "bad request" panel shows.
	badRequest(t, seeds[0])

	// Every panel's every query, with Grafana's values for "All" and this Prometheus's
	// scrape interval: none may be empty.
	dashboard, err := os.ReadFile(filepath.Join("..", "..", "config", "monitoring", "dashboards", "paddock.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries, err := monitoring.DashboardQueries(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"namespace": ".*", "cluster": ".*", "datasource": "", "__rate_interval": "30s"}
	started := time.Now()
	testkit.EventuallyDetail(t, "every dashboard query answering", func() (bool, string) {
		var empty []string
		for _, q := range queries {
			expr, err := monitoring.Expand(q.Expr, vars)
			if err != nil {
				t.Fatalf("panel %q: %v", q.Panel, err)
			}
			if res, err := promQuery(ctx, prom, expr); err != nil || len(res) == 0 {
				empty = append(empty, fmt.Sprintf("%s/%s (%v)", q.Panel, q.RefID, err))
			}
		}
		return len(empty) == 0, fmt.Sprintf("%d of %d queries empty: %s", len(empty), len(queries), strings.Join(empty, "; "))
	})
	t.Logf("all %d dashboard queries answered from the dev Prometheus", len(queries))
	measure(t, scenario, fmt.Sprintf("every dashboard query (%d) answering", len(queries)), time.Since(started))

	// The volume refuses writes on one broker. A broker learns that from a write that
	// fails, so the victim must lead a partition the test then writes to: the topic is led
	// by all three brokers first, and the victim's partition gets a record until the
	// broker's probe reports the volume unwritable.
	victim, _ := s.brokerAwayFromManager(ctx, t)
	pod := kafkav1alpha1.BrokerPodName(s.name, victim)
	labels := fmt.Sprintf(`namespace=%q,cluster=%q,broker="%d"`, s.namespace, s.name, victim)
	var led int32 = -1
	testkit.EventuallyDetail(t, "the topic led by all three brokers", func() (bool, string) {
		kt, err := s.kafkaTopic(ctx, topic)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range kt.Status.Partitions {
			if p.Leader == victim {
				led = p.Partition
			}
		}
		return len(leadersPerBroker(kt)) == 3 && led >= 0, fmt.Sprintf("leaders per broker %v", leadersPerBroker(kt))
	})
	victimPod, err := s.pod(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	victimAddr, err := s.addr(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.env.SetStorageFaults(s.namespace, pod, "eio@/"); err != nil {
		t.Fatal(err)
	}
	injected := time.Now()
	cleared := false
	defer func() {
		if !cleared {
			if err := s.env.SetStorageFaults(s.namespace, pod, ""); err != nil {
				t.Errorf("clear the fault plan: %v", err)
			}
		}
	}()
	testkit.EventuallyDetail(t, fmt.Sprintf("broker %d reporting its volume unwritable", victim), func() (bool, string) {
		code, perr := produceOne(ctx, victimAddr, topic, led) // fails: the write is what the broker notices
		healthy, err := scrapeMetrics(ctx, victimPod.Status.PodIP, func(series string) bool {
			return series == "paddock_broker_storage_healthy"
		})
		return err == nil && healthy == 0, fmt.Sprintf("produce to partition %d: code %d, %v; paddock_broker_storage_healthy %v (%v)", led, code, perr, healthy, err)
	})
	waitAlert(ctx, t, prom, "PaddockVolumeUnwritable", labels, true)
	measure(t, scenario, "every write on a broker's volume fails → PaddockVolumeUnwritable firing", time.Since(injected))
	if err := s.env.SetStorageFaults(s.namespace, pod, ""); err != nil {
		t.Fatal(err)
	}
	cleared = true
	fixed := time.Now()
	waitAlert(ctx, t, prom, "PaddockVolumeUnwritable", labels, false)
	measure(t, scenario, "volume writable again → PaddockVolumeUnwritable resolved", time.Since(fixed))
	testkit.Within(t, "three healthy brokers after the volume recovered", 3*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })

	// A broker stops without a word.
	pid, err := s.env.PID(s.namespace, pod)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT) // gone already if its liveness probe restarted it
		}
	}
	defer resume()
	waitAlert(ctx, t, prom, "PaddockBrokerDead", labels, true)
	firing := time.Now()
	measure(t, scenario, "broker stopped (SIGSTOP) → PaddockBrokerDead firing", firing.Sub(stopped))
	// The picture of README "Monitoring": the dashboard as it looks now, the broker dead.
	dashboardSnapshot(ctx, t, prom, dashboard, snapshot.Options{
		Title: fmt.Sprintf("paddock: broker %d of %s/%s frozen with SIGSTOP, PaddockBrokerDead firing (e2e scenario 20; Prometheus clock ×%d)", victim, s.namespace, s.name, prometheusSpeedup),
		Start: latest(began, stopped.Add(-90*time.Second)),
		End:   firing,
		Marks: []snapshot.Mark{{At: stopped, Label: fmt.Sprintf("broker %d SIGSTOP", victim)}, {At: firing, Label: "BrokerDead firing"}},
	})
	resume()
	back := time.Now()
	waitAlert(ctx, t, prom, "PaddockBrokerDead", labels, false)
	measure(t, scenario, "broker resumed → PaddockBrokerDead resolved", time.Since(back))
	testkit.Within(t, "three healthy brokers after the broker resumed", 3*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })

	// The group's consumer stops while records keep coming.
	groupLabels := fmt.Sprintf(`namespace=%q,cluster=%q,group=%q`, s.namespace, s.name, group)
	consumer.stop()
	left := time.Now()
	waitAlert(ctx, t, prom, "PaddockConsumerLagGrowing", groupLabels, true)
	measure(t, scenario, fmt.Sprintf("consumer stopped → PaddockConsumerLagGrowing firing (kit: 10 min window + 10 min; here ÷%d)", prometheusSpeedup), time.Since(left))
	consumer = startLagConsumer(ctx, t, seeds, group, topic)
	stopProducing()
	wg.Wait()
	caughtUp := time.Now()
	waitAlert(ctx, t, prom, "PaddockConsumerLagGrowing", groupLabels, false)
	measure(t, scenario, "consumer back, producer stopped → PaddockConsumerLagGrowing resolved", time.Since(caughtUp))
}

// dashboardSnapshot draws the dashboard over opt's window from the suite's Prometheus
// (package snapshot) to $DASHBOARD_SNAPSHOT (make test and make e2e: bin/test-results; make
// dashboard-snapshot: docs/images, README "Monitoring"), or to a temporary file when it is
// unset, and fails if a panel drew no series. The window is drawn at the scrape interval, and
// $__rate_interval is Grafana's for it: four scrape intervals.
func dashboardSnapshot(ctx context.Context, t *testing.T, prom string, dashboard []byte, opt snapshot.Options) {
	t.Helper()
	panels, err := monitoring.DashboardPanels(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	scrape := monitoring.Scaled(15*time.Second, prometheusSpeedup) // the kit's PodMonitors' interval, on the suite's clock
	opt.Step = scrape
	opt.Vars = map[string]string{"namespace": ".*", "cluster": ".*", "datasource": "", "__rate_interval": (4 * scrape).String()}
	started := time.Now()
	png, reports, err := snapshot.Render(ctx, panels, snapshot.Prometheus(prom, nil), opt)
	if err != nil {
		t.Fatal(err)
	}
	var empty []string
	for _, r := range reports {
		if r.Series == 0 {
			empty = append(empty, r.Title)
		}
	}
	if len(empty) > 0 {
		t.Errorf("dashboard snapshot: %d of %d panels drew nothing: %s", len(empty), len(reports), strings.Join(empty, "; "))
	}
	out := os.Getenv("DASHBOARD_SNAPSHOT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "dashboard.png")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("dashboard snapshot: %d panels over %s, %d KiB, drawn in %s: %s", len(reports), opt.End.Sub(opt.Start).Round(time.Second), len(png)>>10, time.Since(started).Round(time.Millisecond), out)
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// badRequest sends addr a frame of API key 9999 and waits for the broker to close the
// connection without an answer.
func badRequest(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }() // closed by the broker already
	// size 10: api key 9999, version 0, correlation id 1, a null client id
	frame := []byte{0, 0, 0, 10, 0x27, 0x0f, 0, 0, 0, 0, 0, 1, 0xff, 0xff}
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(testkit.Deadline)); err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, conn); err != nil || n != 0 {
		t.Fatalf("a frame of an unknown API key was answered (%d bytes, %v), not closed", n, err)
	}
}

// waitAlert waits (up to four minutes: the slowest alert here needs two) until alert with
// the given labels is firing in Prometheus, or, with firing false, until it is neither
// firing nor pending.
func waitAlert(ctx context.Context, t *testing.T, prom, alert, labels string, firing bool) {
	t.Helper()
	state := `,alertstate="firing"`
	what := alert + "{" + labels + "} firing"
	if !firing {
		state, what = "", alert+"{"+labels+"} resolved"
	}
	expr := fmt.Sprintf(`ALERTS{alertname=%q,%s%s}`, alert, labels, state)
	testkit.Within(t, what, 4*time.Minute, func() (bool, string) {
		res, err := promQuery(ctx, prom, expr)
		if err != nil {
			return false, err.Error()
		}
		return (len(res) > 0) == firing, fmt.Sprintf("%s: %v", expr, res)
	})
}

// promSample is one series of an instant query's answer.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (p promSample) String() string {
	keys := make([]string, 0, len(p.Metric))
	for k := range p.Metric {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s ", k, p.Metric[k])
	}
	return fmt.Sprintf("{%s} %v", strings.TrimSpace(b.String()), p.Value[1])
}

// promQuery runs an instant query against Prometheus's HTTP API.
func promQuery(ctx context.Context, prom, expr string) ([]promSample, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, prom+"/api/v1/query?query="+url.QueryEscape(expr), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end below
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", expr, body.Error)
	}
	if body.Data.ResultType == "scalar" { // a scalar always answers
		return []promSample{{}}, nil
	}
	return body.Data.Result, nil
}

// produceSteadily produces a record every 20 ms, round-robin over the topic's partitions,
// until ctx ends; errors (a broker stopped, a partition moving) are the client's to retry.
func produceSteadily(ctx context.Context, cl *kgo.Client, topic string) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte("monitored")}, nil)
		}
	}
}

// lagConsumer is a group member consuming in the background and committing each second.
type lagConsumer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func startLagConsumer(ctx context.Context, t *testing.T, seeds []string, group, topic string) *lagConsumer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AutoCommitInterval(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &lagConsumer{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for cctx.Err() == nil {
			cl.PollFetches(cctx)
		}
	}()
	return c
}

// stop leaves the group (committing what was consumed) and closes the client.
func (c *lagConsumer) stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
		c.cl.Close()
	})
}
