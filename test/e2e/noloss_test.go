package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

const (
	// nolossTopic is the topic scenario 11 produces to, with nolossPartitions partitions.
	nolossTopic      = "e2e-noloss"
	nolossPartitions = 12
	// nolossInterval is the pace of scenario 11's producer: one record every interval,
	// round-robin over the partitions (≈ 400 records/s).
	nolossInterval = 2500 * time.Microsecond
)

// 11. No acknowledged record lost: an idempotent acks=all franz-go producer, bootstrapped by
// the bootstrap Service's DNS name (so it reaches every broker at its advertised pod DNS name,
// PodDNS), writes numbered records round-robin to a 12-partition topic for the whole scenario
// while, one after another, a broker is killed with kill -9 (the node agent restarts it), a
// broker pod is deleted (SIGTERM drain; the StatefulSet recreates it), the StatefulSet is
// rolled with `kubectl rollout restart` from the host's network, and the operator is stopped
// and started. After each event the scenario waits until the cluster is healthy again — three
// brokers Serving/Alive, every partition led, and every partition acknowledged a record since
// — and measures the client-side gap: the longest time without an acknowledgement, on any
// partition and on the worst one. Then a new consumer reads the topic to its end: every
// acknowledged record is there exactly once, at the offset its acknowledgement gave, and each
// partition's records are in the order they were produced; an unacknowledged record may be
// missing.
func noLoss(ctx context.Context, t *testing.T, s *suite) {
	const scenario = "11 no acknowledged record lost"
	p := startAckedProducer(ctx, t, s, scenario)

	events := []struct {
		name string
		do   func(t *testing.T) (settled func() (bool, string))
	}{
		{"kill -9 of broker 1", func(t *testing.T) func() (bool, string) { return s.killBroker(ctx, t, 1) }},
		{"pod delete of broker 2 (SIGTERM drain)", func(t *testing.T) func() (bool, string) { return s.deleteBrokerPod(ctx, t, 2) }},
		{"kubectl rollout restart", func(t *testing.T) func() (bool, string) { return s.rolloutRestart(ctx, t) }},
		{"operator stopped and started", func(t *testing.T) func() (bool, string) { return s.restartOperator(ctx, t, 5*time.Second) }},
	}
	type window struct {
		name       string
		start, end time.Time
	}
	var windows []window
	for _, ev := range events {
		start := time.Now()
		settled := ev.do(t)
		var recovered time.Time
		testkit.Within(t, ev.name+": the cluster healthy again, every partition led and acknowledging", 4*time.Minute, func() (bool, string) {
			if ok, detail := settled(); !ok {
				return false, detail
			}
			if ok, detail := s.healthy(ctx, 3); !ok {
				recovered = time.Time{}
				return false, detail
			}
			if ok, detail := s.topicLed(ctx, nolossTopic); !ok {
				recovered = time.Time{}
				return false, detail
			}
			if recovered.IsZero() {
				recovered = time.Now()
			}
			return p.ackedAllSince(recovered)
		})
		end := time.Now()
		windows = append(windows, window{ev.name, start, end})
		measure(t, scenario, ev.name+" → healthy, every partition acknowledging again", end.Sub(start))
	}

	produced := p.stop(ctx)
	acks, failures := p.results()
	for _, w := range windows {
		anyGap, worstGap, worst := gaps(acks, w.start, w.end)
		measure(t, scenario, w.name+": longest time without an acknowledgement, any partition", anyGap.took)
		measure(t, scenario, fmt.Sprintf("%s: longest time without an acknowledgement, worst partition (%d)", w.name, worst), worstGap.took)
		t.Logf("%s: event at %s; partition %d acknowledged nothing from %s to %s; %d dials failed in the window %v",
			w.name, w.start.Format(timeOfDay), worst, worstGap.from.Format(timeOfDay), worstGap.from.Add(worstGap.took).Format(timeOfDay),
			len(p.dials.failedBetween(w.start, w.end)), p.dials.failedBetween(w.start, w.end))
	}

	records, err := readTopic(ctx, s, nolossTopic)
	if err != nil {
		t.Fatal(err)
	}
	c := check(acks, records)
	var table strings.Builder
	w := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "produced\tacknowledged\tnot acknowledged\tread\tfound\tlost\tduplicated\tout of order\tmisplaced\t\n")
	fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", produced, c.acknowledged, produced-c.acknowledged, c.read, c.found, len(c.lost), c.duplicated, c.outOfOrder, len(c.misplaced))
	_ = w.Flush()
	t.Logf("%s, %s through 4 events:\n%s", scenario, nolossTopic, table.String())
	for _, what := range []struct {
		name string
		n    int
	}{
		{"records produced", produced}, {"acknowledged", c.acknowledged}, {"not acknowledged", produced - c.acknowledged},
		{"read back", c.read}, {"acknowledged and found", c.found}, {"lost (must be 0)", len(c.lost)},
		{"duplicated (must be 0)", c.duplicated}, {"out of order (must be 0)", c.outOfOrder},
	} {
		count(scenario, what.name, what.n)
	}
	if len(failures) > 0 {
		t.Logf("%s: %d produce failures, first: %v", scenario, len(failures), failures[0])
	}
	if c.acknowledged == 0 {
		t.Fatalf("no record was acknowledged")
	}
	if len(c.lost) > 0 {
		t.Errorf("%d acknowledged records lost, first %v", len(c.lost), c.lost[:min(len(c.lost), 10)])
	}
	if c.duplicated > 0 {
		t.Errorf("%d records duplicated", c.duplicated)
	}
	if c.outOfOrder > 0 {
		t.Errorf("%d records out of order within their partition", c.outOfOrder)
	}
	if len(c.misplaced) > 0 {
		t.Errorf("%d acknowledged records are not at the offset their acknowledgement gave, first %v", len(c.misplaced), c.misplaced[:min(len(c.misplaced), 10)])
	}
	adm, err := kgo.NewClient(kgo.SeedBrokers(s.seeds()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).DeleteTopic(ctx, nolossTopic); err != nil {
		t.Errorf("delete %s: %v", nolossTopic, err)
	}
}

// timeOfDay is how the scenario logs the instants it measured between.
const timeOfDay = "15:04:05.000"

// ack is one acknowledged record: the k-th record produced to its partition, at offset.
type ack struct {
	partition int32
	k         int
	offset    int64
	at        time.Time
}

// nolossProducer produces record "<partition>-<k>" to each partition in turn, k counting up
// per partition, and records every acknowledgement.
type nolossProducer struct {
	cl      *kgo.Client
	dials   *dialLog
	stopped chan struct{}
	done    chan struct{}
	// running is set by start, on the scenario's goroutine: close waits for run only then
	// (a scenario that fails before producing must not wait forever).
	running bool

	mu       sync.Mutex
	produced int     // guarded by mu
	acks     []ack   // guarded by mu; in acknowledgement order (per partition: produce order)
	failures []error // guarded by mu
}

// startAckedProducer creates nolossTopic and starts producing to it, closed when the test
// ends, and returns once every partition has acknowledged a record.
func startAckedProducer(ctx context.Context, t *testing.T, s *suite, scenario string) *nolossProducer {
	t.Helper()
	p, err := startNolossProducer(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	created := time.Now()
	createTopic(ctx, t, kadm.NewClient(p.cl), nolossPartitions, nolossTopic)
	p.start(ctx)
	testkit.EventuallyDetail(t, "every partition of "+nolossTopic+" to acknowledge a record", func() (bool, string) {
		return p.ackedAllSince(created)
	})
	measure(t, scenario, "topic created → every partition acknowledged a record", time.Since(created))
	return p
}

// clientLog is the kgo option that logs a client's every request at debug level to
// $PADDOCK_E2E_KGO_LOG/<name>.log, to read what a measured gap was made of; none when unset.
func clientLog(name string) []kgo.Opt {
	dir := os.Getenv("PADDOCK_E2E_KGO_LOG")
	if dir == "" {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil
	}
	return []kgo.Opt{kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelDebug, func() string { return time.Now().Format("15:04:05.000 ") }))}
}

func startNolossProducer(s *suite) (*nolossProducer, error) {
	dials := &dialLog{}
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.seeds()...), kgo.DefaultProduceTopic(nolossTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(dials)}, clientLog("producer")...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &nolossProducer{cl: cl, dials: dials, stopped: make(chan struct{}), done: make(chan struct{})}, nil
}

// start runs the producer in the background until stop or close.
func (p *nolossProducer) start(ctx context.Context) {
	p.running = true
	go p.run(ctx)
}

func (p *nolossProducer) run(ctx context.Context) {
	defer close(p.done)
	next := make([]int, nolossPartitions)
	tick := time.NewTicker(nolossInterval)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-p.stopped:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		part := int32(i % nolossPartitions)
		k := next[part]
		next[part]++
		p.mu.Lock()
		p.produced++
		p.mu.Unlock()
		rec := &kgo.Record{Partition: part, Value: []byte(fmt.Sprintf("%d-%d", part, k))}
		p.cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
			now := time.Now()
			p.mu.Lock()
			defer p.mu.Unlock()
			if err != nil {
				p.failures = append(p.failures, fmt.Errorf("record %s: %w", r.Value, err))
				return
			}
			p.acks = append(p.acks, ack{partition: r.Partition, k: k, offset: r.Offset, at: now})
		})
	}
}

// ackedAllSince reports whether every partition acknowledged a record at since or later.
func (p *nolossProducer) ackedAllSince(since time.Time) (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := map[int32]bool{}
	for i := len(p.acks) - 1; i >= 0 && p.acks[i].at.After(since); i-- {
		seen[p.acks[i].partition] = true
	}
	return len(seen) == nolossPartitions, fmt.Sprintf("%d of %d partitions acknowledged a record since %s (%d acknowledged, %d failed in all)",
		len(seen), nolossPartitions, since.Format(time.TimeOnly), len(p.acks), len(p.failures))
}

// stop ends producing, waits up to a minute for every record in flight to be acknowledged,
// and closes the client (failing what is left); it returns how many records were produced.
func (p *nolossProducer) stop(ctx context.Context) int {
	close(p.stopped)
	<-p.done
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = p.cl.Flush(fctx)
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produced
}

func (p *nolossProducer) close() {
	select {
	case <-p.stopped:
	default:
		close(p.stopped)
		if p.running {
			<-p.done
		}
	}
	p.cl.Close()
}

func (p *nolossProducer) results() ([]ack, []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.acks), slices.Clone(p.failures)
}

// gap is the longest time without an acknowledgement in a window: from, and how long.
type gap struct {
	from time.Time
	took time.Duration
}

// gaps returns, for the window [start, end], the longest time without an acknowledgement on
// any partition, and the longest on a single partition with that partition.
func gaps(acks []ack, start, end time.Time) (anyGap, worstGap gap, worst int32) {
	longest := func(times []time.Time) gap {
		var g gap
		last := start
		for _, at := range times {
			if at.Before(start) || at.After(end) {
				continue
			}
			if at.Sub(last) > g.took {
				g = gap{last, at.Sub(last)}
			}
			last = at
		}
		if end.Sub(last) > g.took {
			g = gap{last, end.Sub(last)}
		}
		return g
	}
	var all []time.Time
	per := map[int32][]time.Time{}
	for _, a := range acks {
		all = append(all, a.at)
		per[a.partition] = append(per[a.partition], a.at)
	}
	slices.SortFunc(all, func(a, b time.Time) int { return a.Compare(b) })
	anyGap = longest(all)
	for part := range int32(nolossPartitions) {
		if g := longest(per[part]); g.took > worstGap.took {
			worstGap, worst = g, part
		}
	}
	return anyGap, worstGap, worst
}

// readTopic reads topic from its start to the end offsets it has now, by partition in offset
// order, with a new consumer.
func readTopic(ctx context.Context, s *suite, topic string) (map[int32][]*kgo.Record, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.seeds()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	if len(want) != nolossPartitions {
		return nil, fmt.Errorf("end offsets of %d partitions of %s: %v", len(want), topic, ends)
	}
	out := map[int32][]*kgo.Record{}
	next := map[int32]int64{}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		behind := 0
		for part, end := range want {
			if next[part] < end {
				behind++
			}
		}
		if behind == 0 {
			return out, nil
		}
		fs := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("read %s: %d partitions short of their end offsets after 2 minutes (%v of %v)", topic, behind, next, want)
		}
		fs.EachError(func(_ string, part int32, err error) {
			fmt.Fprintf(os.Stderr, "e2e: read %s/%d: %v\n", topic, part, err)
		})
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			next[r.Partition] = r.Offset + 1
		})
	}
}

// checked is what reading the topic back found about the acknowledged records.
type checked struct {
	acknowledged, read, found int
	duplicated, outOfOrder    int
	lost, misplaced           []string
}

// check compares the acknowledged records with what was read: each acknowledged record must
// be read exactly once, at its acknowledged offset; every value at most once; and a
// partition's values in increasing k (the order they were produced in).
func check(acks []ack, records map[int32][]*kgo.Record) checked {
	var c checked
	type at struct {
		partition int32
		offset    int64
	}
	seen := map[string][]at{}
	for part, recs := range records {
		last := -1
		for _, r := range recs {
			c.read++
			v := string(r.Value)
			seen[v] = append(seen[v], at{part, r.Offset})
			if len(seen[v]) > 1 {
				c.duplicated++
				continue
			}
			pk := strings.SplitN(v, "-", 2)
			k, err := strconv.Atoi(pk[len(pk)-1])
			if len(pk) != 2 || pk[0] != strconv.Itoa(int(part)) || err != nil || k <= last {
				c.outOfOrder++
				continue
			}
			last = k
		}
	}
	c.acknowledged = len(acks)
	for _, a := range acks {
		v := fmt.Sprintf("%d-%d", a.partition, a.k)
		where := seen[v]
		switch {
		case len(where) == 0:
			c.lost = append(c.lost, fmt.Sprintf("%s@%d", v, a.offset))
		case where[0] != at{a.partition, a.offset}:
			c.found++
			c.misplaced = append(c.misplaced, fmt.Sprintf("%s acknowledged at %d, read at %d/%d", v, a.offset, where[0].partition, where[0].offset))
		default:
			c.found++
		}
	}
	return c
}

// topicLed reports whether every partition of topic has a leader in its KafkaTopic's status.
func (s *suite) topicLed(ctx context.Context, topic string) (bool, string) {
	kt, err := s.kafkaTopic(ctx, topic)
	if err != nil {
		return false, err.Error()
	}
	led := 0
	for _, p := range kt.Status.Partitions {
		if p.Leader >= 0 {
			led++
		}
	}
	return led == int(kt.Spec.Partitions) && led > 0, fmt.Sprintf("%d of %d partitions of %s led", led, kt.Spec.Partitions, topic)
}

// killBroker kills broker id's process with SIGKILL and leaves the restart to the node agent;
// the event is over once a new process runs for the pod and the broker registered again at a
// higher epoch.
func (s *suite) killBroker(ctx context.Context, t *testing.T, id int32) func() (bool, string) {
	t.Helper()
	pod := kafkav1alpha1.BrokerPodName(s.name, id)
	before, err := s.brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	runs := len(s.env.ContainerRuns(s.namespace, pod))
	if err := syscall.Kill(readPID(t, s.env, s.namespace, pod), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return func() (bool, string) {
		if n := len(s.env.ContainerRuns(s.namespace, pod)); n <= runs {
			return false, "the killed broker not restarted yet"
		}
		b, err := s.brokers(ctx)
		if err != nil {
			return false, err.Error()
		}
		return b[id].Status.Epoch > before[id].Status.Epoch, fmt.Sprintf("broker %d at epoch %d (was %d)", id, b[id].Status.Epoch, before[id].Status.Epoch)
	}
}

// deleteBrokerPod deletes broker id's pod (the node agent sends SIGTERM: the broker drains);
// the event is over once the StatefulSet's replacement pod exists.
func (s *suite) deleteBrokerPod(ctx context.Context, t *testing.T, id int32) func() (bool, string) {
	t.Helper()
	pod, err := s.pod(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return func() (bool, string) {
		now, err := s.pod(ctx, id)
		if err != nil {
			return false, err.Error()
		}
		return now.UID != pod.UID, fmt.Sprintf("pod of broker %d not replaced yet", id)
	}
}

// rolloutRestart runs `kubectl rollout restart` on the brokers' StatefulSet from the host's
// network with the environment's kubeconfig, as a person does; the event is over once every
// broker pod was replaced.
func (s *suite) rolloutRestart(ctx context.Context, t *testing.T) func() (bool, string) {
	t.Helper()
	uids := s.podUIDs(ctx, t)
	out, err := devcluster.HostCommand(ctx, []string{"KUBECONFIG=" + s.env.KubeconfigPath(), "HOME=" + t.TempDir()},
		kubectlBinary(t), "rollout", "restart", "-n", s.namespace, "statefulset/"+kafkav1alpha1.StatefulSetName(s.name))
	if err != nil {
		t.Fatalf("kubectl rollout restart: %v\n%s", err, out)
	}
	t.Logf("kubectl rollout restart: %s", strings.TrimSpace(string(out)))
	return func() (bool, string) {
		replaced := 0
		for id := range int32(3) {
			if pod, err := s.pod(ctx, id); err == nil && string(pod.UID) != uids[id] {
				replaced++
			}
		}
		return replaced == 3, fmt.Sprintf("%d of 3 pods replaced", replaced)
	}
}

// restartOperator stops the operator, waits down, and starts it again (Available).
func (s *suite) restartOperator(_ context.Context, t *testing.T, down time.Duration) func() (bool, string) {
	t.Helper()
	if err := s.env.StopManager(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down)
	if err := s.env.StartManager(); err != nil {
		t.Fatal(err)
	}
	return func() (bool, string) { return true, "" }
}
