package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// failedPartition is scenario 17 (docs/storage.md, "A failed partition comes back"): EIO is
// injected into one partition's files on its leader, through the broker's fault plan that
// paddock dev switches at run time. The partition must serve again on another broker within
// the session timeout + 2 s with no human, the other partitions keep their leaders and
// epochs, the leader stays healthy, and no acknowledged record of the partition is lost.
func failedPartition(ctx context.Context, t *testing.T, s *suite) {
	const topic, partitions = "e2e-failing", 3
	seeds := s.podAddrs(ctx, t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, t, adm, partitions, topic)
	var before *kafkav1alpha1.KafkaTopic
	testkit.EventuallyDetail(t, "the topic led by all three brokers", func() (bool, string) {
		var err error
		if before, err = s.kafkaTopic(ctx, topic); err != nil {
			return false, err.Error()
		}
		return len(leadersPerBroker(before)) == 3, fmt.Sprintf("leaders per broker %v", leadersPerBroker(before))
	})
	defer s.deleteTopicAndWait(ctx, t, adm, topic) // the next scenario starts from a cluster without topics
	victim := before.Status.Partitions[0]
	id, err := kafkav1alpha1.ParseKafkaUUID(before.Status.TopicID)
	if err != nil {
		t.Fatal(err)
	}
	pod := kafkav1alpha1.BrokerPodName(s.name, victim.Leader)

	// Produce to every partition, one record at a time each, until the end: what is
	// acknowledged must be read back, and the gaps are printed.
	prod := &gapProducer{cl: cl, topic: topic, acked: map[int32][]int64{},
		last: map[int32]time.Time{}, gap: map[int32]time.Duration{}}
	pctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := range int32(partitions) {
		wg.Go(func() { prod.run(pctx, p) })
	}
	defer func() { stop(); wg.Wait() }()
	testkit.EventuallyDetail(t, "every partition acknowledging", func() (bool, string) {
		return prod.ackedEach(partitions), "waiting for a first acknowledgement on each"
	})

	plan := "eio@" + strings.TrimPrefix(storage.PartitionDir("", "", topic, id, 0), "/") + "/"
	injected := time.Now()
	if err := s.env.SetStorageFaults(s.namespace, pod, plan); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.env.SetStorageFaults(s.namespace, pod, ""); err != nil {
			t.Errorf("clear the fault plan: %v", err)
		}
	}()
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bound := kc.Spec.SessionTimeout() + 2*time.Second
	var now *kafkav1alpha1.KafkaTopic
	testkit.EventuallyDetail(t, "partition 0 led elsewhere and answering a Produce", func() (bool, string) {
		if now, err = s.kafkaTopic(ctx, topic); err != nil {
			return false, err.Error()
		}
		p := now.Status.Partitions[0]
		if p.Leader == victim.Leader || p.Leader < 0 {
			return false, fmt.Sprintf("partition 0 on broker %d at epoch %d", p.Leader, p.LeaderEpoch)
		}
		addr, err := s.addr(ctx, p.Leader)
		if err != nil {
			return false, err.Error()
		}
		code, err := produceOne(ctx, addr, topic, 0)
		if err != nil || code != 0 {
			return false, fmt.Sprintf("produce to broker %d: %v %v", p.Leader, err, kerr.ErrorForCode(code))
		}
		return true, ""
	})
	served := time.Now()
	took := served.Sub(injected)
	measure(t, "17 failed partition", "EIO on one partition's files → served by another broker", took)
	if took > bound {
		t.Errorf("EIO → served elsewhere took %s, want at most the session timeout + 2 s (%s)", took, bound)
	}
	for _, p := range now.Status.Partitions[1:] {
		if was := before.Status.Partitions[p.Partition]; p != was {
			t.Errorf("partition %d changed: %+v → %+v; only the failed partition may move", p.Partition, was, p)
		}
	}
	t.Logf("partition 0: broker %d epoch %d → broker %d epoch %d", victim.Leader, victim.LeaderEpoch, now.Status.Partitions[0].Leader, now.Status.Partitions[0].LeaderEpoch)

	testkit.EventuallyDetail(t, "a PartitionFailed event on the topic", func() (bool, string) {
		reasons, err := testenv.EventReasons(ctx, s.c, s.namespace, now.Name)
		return err == nil && slices.Contains(reasons, kafkav1alpha1.EventPartitionFailed), fmt.Sprintf("reasons %v, %v", reasons, err)
	})
	victimPod, err := s.pod(ctx, victim.Leader)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := scrapeMetrics(ctx, victimPod.Status.PodIP, func(series string) bool {
		return series == "paddock_broker_partition_failures_total"
	}); err != nil || n < 1 {
		t.Errorf("broker %d's paddock_broker_partition_failures_total = %v (%v), want ≥ 1", victim.Leader, n, err)
	}
	if ok, why := s.healthy(ctx, 3); !ok {
		t.Errorf("the brokers after one partition failed: %s; the failing broker stays healthy", why)
	}
	// The producer made before the fault acknowledges on partition 0 again (its gap is the
	// client's: a failed partition costs it a metadata refresh), then everything is read back.
	testkit.EventuallyDetail(t, "partition 0 acknowledging again through the client made before the fault", func() (bool, string) {
		return prod.lastAck(0).After(served), "no acknowledgement since the partition was served elsewhere"
	})
	stop()
	wg.Wait()
	for p := range int32(partitions) {
		measure(t, "17 failed partition", fmt.Sprintf("the client made before the fault: longest time without an acknowledgement, partition %d", p), prod.longestGap(p))
	}

	lost := prod.verify(ctx, t, seeds)
	count("17 failed partition", "records acknowledged", prod.total())
	count("17 failed partition", "acknowledged and lost (must be 0)", lost)
	if lost > 0 {
		t.Errorf("%d acknowledged records lost", lost)
	}
}

// produceOne produces one acks=all record to partition of topic through a new client seeded
// with addr alone (fresh metadata, no retry), and returns its error code.
func produceOne(ctx context.Context, addr, topic string, partition int32) (int16, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(1), kgo.DisableIdempotentWrite())
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	err = cl.ProduceSync(pctx, &kgo.Record{Topic: topic, Partition: partition, Value: []byte("probe")}).FirstErr()
	var ke *kerr.Error
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &ke):
		return ke.Code, nil
	}
	return 0, err
}

// gapProducer produces to each partition in turn, one record in flight per partition, and
// keeps what was acknowledged and the longest time each partition acknowledged nothing.
type gapProducer struct {
	cl    *kgo.Client
	topic string

	mu    sync.Mutex
	seq   int
	acked map[int32][]int64 // offsets acknowledged, per partition
	last  map[int32]time.Time
	gap   map[int32]time.Duration
}

func (g *gapProducer) run(ctx context.Context, p int32) {
	for ctx.Err() == nil {
		g.mu.Lock()
		g.seq++
		value := fmt.Sprintf("%d-%d", p, g.seq)
		g.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := g.cl.ProduceSync(rctx, &kgo.Record{Topic: g.topic, Partition: p, Value: []byte(value)}).First()
		cancel()
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		now := time.Now()
		g.mu.Lock()
		if last, ok := g.last[p]; ok && now.Sub(last) > g.gap[p] {
			g.gap[p] = now.Sub(last)
		}
		g.last[p] = now
		g.acked[p] = append(g.acked[p], r.Offset)
		g.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gapProducer) ackedEach(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.last) == n
}

func (g *gapProducer) lastAck(p int32) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last[p]
}

func (g *gapProducer) longestGap(p int32) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gap[p]
}

func (g *gapProducer) total() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, offs := range g.acked {
		n += len(offs)
	}
	return n
}

// verify reads every partition back and counts the acknowledged offsets that are missing.
func (g *gapProducer) verify(ctx context.Context, t *testing.T, seeds []string) int {
	t.Helper()
	g.mu.Lock()
	acked := map[int32][]int64{}
	for p, offs := range g.acked {
		acked[p] = append([]int64(nil), offs...)
	}
	g.mu.Unlock()
	offsets := map[string]map[int32]kgo.Offset{g.topic: {}}
	for p := range acked {
		offsets[g.topic][p] = kgo.NewOffset().AtStart()
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(offsets))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	want := map[int32]map[int64]bool{}
	left := 0
	for p, offs := range acked {
		want[p] = map[int64]bool{}
		for _, o := range offs {
			if !want[p][o] {
				want[p][o] = true
				left++
			}
		}
	}
	deadline := time.Now().Add(time.Minute)
	for left > 0 && time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := rd.PollFetches(fctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			if want[r.Partition][r.Offset] {
				delete(want[r.Partition], r.Offset)
				left--
			}
		})
	}
	for p, missing := range want {
		if len(missing) > 0 {
			t.Logf("partition %d: %d acknowledged offsets not read back", p, len(missing))
		}
	}
	return left
}
