package e2e

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/brokertest"
	"github.com/paddock-dev/paddock/internal/testkit"
)

const neverTopic = "e2e-never"

// 14. Node never returns: the node of a broker that leads partitions is stopped for good with
// `paddock dev node stop --freeze` — its broker process frozen (SIGSTOP), alive and
// unreachable — while an idempotent acks=all producer runs. The partitions move, the recovery
// reconciler force-deletes the pod once its gates hold (node NotReady for nodeLossTimeout,
// Lease expired, nothing assigned, every partition claimed by its new leader), the StatefulSet
// recreates it on another node, and it comes back Serving/Alive. Then the zombie is resumed
// (`node thaw`, SIGCONT) and tries to write to the partitions it led: none of it is
// acknowledged, and a consumer reads back exactly the records the producer had acknowledged.
// The node is started again at the end (its zombie, whose pod is gone, is killed).
func nodeNeverReturns(ctx context.Context, t *testing.T, s *suite) {
	kt := &kafkav1alpha1.KafkaTopic{ObjectMeta: metav1.ObjectMeta{Name: neverTopic, Namespace: s.namespace},
		Spec: kafkav1alpha1.KafkaTopicSpec{Cluster: s.name, Partitions: 6}}
	if err := s.c.Create(ctx, kt); err != nil {
		t.Fatal(err)
	}
	victim, node := s.brokerAwayFromManager(ctx, t)
	var led []kafkav1alpha1.PartitionStatus
	testkit.EventuallyDetail(t, "every partition of "+neverTopic+" assigned, the victim leading some", func() (bool, string) {
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(kt), kt); err != nil {
			return false, err.Error()
		}
		led = nil
		for _, p := range kt.Status.Partitions {
			if p.Leader < 0 {
				return false, fmt.Sprintf("partition %d has no leader", p.Partition)
			}
			if p.Leader == victim {
				led = append(led, p)
			}
		}
		return len(kt.Status.Partitions) == 6 && len(led) > 0, fmt.Sprintf("%d partitions, broker %d leads %d", len(kt.Status.Partitions), victim, len(led))
	})
	testkit.EventuallyDetail(t, "three healthy brokers with the topic taken over", func() (bool, string) { return s.healthy(ctx, 3) })
	oldPod, err := s.pod(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	zombieAddr := net.JoinHostPort(oldPod.Status.PodIP, strconv.Itoa(int(s.port)))

	p := startProducer(t, s)
	time.Sleep(2 * time.Second) // records flowing to every partition before the loss
	t.Log(devNode(ctx, t, s, "list"))
	lost := time.Now()
	t.Log(devNode(ctx, t, s, "stop", node, "--freeze"))
	started := false
	defer func() {
		if !started {
			_ = s.env.StartNode(node)
		}
	}()

	var movedAt, notReadyAt, deletedAt, replacedAt time.Time
	var newNode string
	testkit.Within(t, "partitions moved off the lost broker and its pod replaced on another node", 5*time.Minute, func() (bool, string) {
		if notReadyAt.IsZero() {
			n := &corev1.Node{}
			if err := s.c.Get(ctx, client.ObjectKey{Name: node}, n); err == nil {
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
						notReadyAt = time.Now()
					}
				}
			}
		}
		if movedAt.IsZero() {
			if err := s.c.Get(ctx, client.ObjectKeyFromObject(kt), kt); err == nil && leadsNone(kt, victim) {
				movedAt = time.Now()
			}
		}
		pod, err := s.pod(ctx, victim)
		switch {
		case err != nil && deletedAt.IsZero():
			deletedAt = time.Now() // gone before the StatefulSet recreated it
		case err == nil && pod.UID != oldPod.UID:
			if deletedAt.IsZero() {
				deletedAt = time.Now()
			}
			if pod.Spec.NodeName != "" && replacedAt.IsZero() {
				replacedAt, newNode = time.Now(), pod.Spec.NodeName
			}
		}
		return !movedAt.IsZero() && !replacedAt.IsZero(), fmt.Sprintf("moved %v, deleted %v, replaced %v; broker %d: %s",
			!movedAt.IsZero(), !deletedAt.IsZero(), !replacedAt.IsZero(), victim, s.recoveryReason(ctx, victim))
	})
	if newNode == node {
		t.Fatalf("the replacement pod was scheduled on the lost node %s", node)
	}
	measure(t, "14 node never returns", "node lost → partitions moved", movedAt.Sub(lost))
	if !notReadyAt.IsZero() {
		measure(t, "14 node never returns", "node lost → Node NotReady (node monitor grace period)", notReadyAt.Sub(lost))
	}
	measure(t, "14 node never returns", "node lost → pod force-deleted (NotReady + the default nodeLossTimeout 5s + a reconcile)", deletedAt.Sub(lost))
	measure(t, "14 node never returns", "node lost → pod replaced (on "+newNode+")", replacedAt.Sub(lost))
	testkit.Within(t, "the replaced broker Serving/Alive", 3*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
	measure(t, "14 node never returns", "node lost → Serving/Alive again", time.Since(lost))
	if !s.clusterEventSeen(ctx, kafkav1alpha1.EventPodForceDeleted) {
		t.Errorf("no %s Event on the KafkaCluster", kafkav1alpha1.EventPodForceDeleted)
	}
	t.Logf("broker %d's BrokerRecovery: %s", victim, s.recoveryReason(ctx, victim))

	// The zombie wakes up and tries to write where it led.
	t.Log(devNode(ctx, t, s, "thaw", node))
	time.Sleep(2 * time.Second)
	zombieAcks, refused, unanswered := 0, 0, 0
	codes := map[int16]int{}
	for _, part := range led {
		for i := range 3 {
			value := fmt.Sprintf("zombie-%d-%d", part.Partition, i)
			resp, err := kafka(ctx, zombieAddr, zombieProduce(part.Partition, value))
			if err != nil {
				unanswered++
				continue
			}
			pr := resp.(*kmsg.ProduceResponse)
			switch {
			case len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1:
				refused++
			case pr.Topics[0].Partitions[0].ErrorCode == 0:
				zombieAcks++
			default:
				refused++
				codes[pr.Topics[0].Partitions[0].ErrorCode]++
			}
		}
	}
	selfFenced := zombieMetric(ctx, oldPod.Status.PodIP, "paddock_broker_self_fenced_appends_total")
	t.Logf("the zombie's answers by error code: %v (6 = NOT_LEADER_OR_FOLLOWER)", codes)
	what := fmt.Sprintf("zombie acknowledgements (must be 0; %d refused, %d unanswered, its self-fenced appends %s)", refused, unanswered, selfFenced)
	t.Logf("14 node never returns: %s = %d", what, zombieAcks)
	count("14 node never returns", what, zombieAcks)
	if zombieAcks != 0 {
		t.Errorf("the zombie acknowledged %d appends", zombieAcks)
	}

	l := p.stop(t)
	checkReadBack(ctx, t, s, l)

	t.Log(devNode(ctx, t, s, "start", node))
	started = true
	testkit.Within(t, "the node Ready again and three healthy brokers", 3*time.Minute, func() (bool, string) {
		n := &corev1.Node{}
		if err := s.c.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
				return false, "node " + node + " Ready " + string(c.Status)
			}
		}
		return s.healthy(ctx, 3)
	})
	if err := s.c.Delete(ctx, kt); err != nil {
		t.Errorf("delete topic %s: %v", neverTopic, err)
	}
}

// devNode runs `paddock dev node <args>` against the suite's environment, as a person would
// from another terminal, and returns its output.
func devNode(ctx context.Context, t *testing.T, s *suite, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, paddockBinary, append([]string{"dev", "--dir=" + s.env.Dir(), "node"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("paddock dev node %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return "paddock dev node " + strings.Join(args, " ") + ":\n" + string(out)
}

func leadsNone(kt *kafkav1alpha1.KafkaTopic, id int32) bool {
	for _, p := range kt.Status.Partitions {
		if p.Leader == id || p.Leader < 0 {
			return false
		}
	}
	return len(kt.Status.Partitions) > 0
}

func (s *suite) recoveryReason(ctx context.Context, id int32) string {
	b := &kafkav1alpha1.Broker{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerObjectName(s.name, id)}, b); err != nil {
		return err.Error()
	}
	c := meta.FindStatusCondition(b.Status.Conditions, kafkav1alpha1.ConditionBrokerRecovery)
	if c == nil {
		return "no BrokerRecovery condition"
	}
	return fmt.Sprintf("%s %s: %s", c.Status, c.Reason, c.Message)
}

func (s *suite) clusterEventSeen(ctx context.Context, reason string) bool {
	list := &eventsv1.EventList{}
	if err := s.c.List(ctx, list, client.InNamespace(s.namespace)); err != nil {
		return false
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == "KafkaCluster" && e.Regarding.Name == s.name && e.Reason == reason {
			return true
		}
	}
	return false
}

// zombieProduce is one acks=all Produce of value to partition of the topic, as a client that
// still believes the zombie leads it would send.
func zombieProduce(partition int32, value string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, -1, 2000
	tp := kmsg.NewProduceRequestTopic()
	tp.Topic = neverTopic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition, pp.Records = partition, brokertest.Plain([]byte(value)).Bytes()
	tp.Partitions = append(tp.Partitions, pp)
	req.Topics = append(req.Topics, tp)
	return req
}

// zombieMetric reads one counter from the broker's /metrics at ip ("?" when unreadable).
func zombieMetric(ctx context.Context, ip, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	v, err := scrapeMetrics(ctx, ip, func(series string) bool { return series == name })
	if err != nil {
		return "?"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// producer writes numbered records round robin over the topic's partitions with an
// idempotent acks=all franz-go client through the bootstrap Service, and keeps what was
// acknowledged.
type producer struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	acked  map[string]bool // guarded by mu
	failed []error         // guarded by mu
	sent   int             // guarded by mu
}

func startProducer(t *testing.T, s *suite) *producer {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.DefaultProduceTopic(neverTopic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &producer{cl: cl, cancel: cancel, done: make(chan struct{}), acked: map[string]bool{}}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			v := "p-" + strconv.Itoa(n)
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
			cl.Produce(context.Background(), &kgo.Record{Partition: int32(n % 6), Value: []byte(v)}, func(r *kgo.Record, err error) {
				p.mu.Lock()
				defer p.mu.Unlock()
				if err != nil {
					p.failed = append(p.failed, err)
					return
				}
				p.acked[string(r.Value)] = true
			})
		}
	}()
	return p
}

// stop ends the producer once every record sent has its outcome, and returns the acknowledged
// values.
func (p *producer) stop(t *testing.T) map[string]bool {
	t.Helper()
	p.cancel()
	<-p.done
	fctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.cl.Flush(fctx); err != nil {
		t.Fatalf("flush the producer: %v", err)
	}
	p.cl.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("producer: %d sent, %d acknowledged, %d failed", p.sent, len(p.acked), len(p.failed))
	if len(p.failed) > 0 {
		t.Logf("first producer failure: %v", p.failed[0])
	}
	return p.acked
}

// checkReadBack consumes the whole topic and checks that what is read is exactly what the
// producer had acknowledged: none missing, none extra (the zombie's attempts included), no
// duplicate.
func checkReadBack(ctx context.Context, t *testing.T, s *suite, acked map[string]bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.ConsumeTopics(neverTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	read := map[string]int{}
	deadline := time.Now().Add(90 * time.Second)
	quietSince := time.Now()
	for time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fetches := cl.PollFetches(pctx)
		cancel()
		n := 0
		fetches.EachRecord(func(r *kgo.Record) { read[string(r.Value)]++; n++ })
		if n > 0 {
			quietSince = time.Now()
		}
		if len(read) >= len(acked) && time.Since(quietSince) > 3*time.Second {
			break
		}
	}
	missing, extra, dup := 0, 0, 0
	var firstExtra string
	for v := range acked {
		if read[v] == 0 {
			missing++
		}
	}
	for v, c := range read {
		if !acked[v] {
			extra++
			if firstExtra == "" {
				firstExtra = v
			}
		}
		if c > 1 {
			dup++
		}
	}
	t.Logf("read back %d records: %d acknowledged, %d missing, %d extra, %d duplicated", len(read), len(acked), missing, extra, dup)
	count("14 node never returns", fmt.Sprintf("records read back (acknowledged %d; missing %d, extra %d, duplicated %d)", len(acked), missing, extra, dup), len(read))
	if missing > 0 || extra > 0 || dup > 0 {
		t.Errorf("read back ≠ acknowledged: %d missing, %d extra (first %q), %d duplicated", missing, extra, firstExtra, dup)
	}
}

// 15. Node frozen and back: a node is frozen (`paddock dev node stop --freeze`) long enough for
// its broker's heartbeat to expire — Fenced and Dead, its partitions moved — but not for the
// Node to turn NotReady, and then started again: the node agent adopts the frozen process
// (same PID, no container restart) and resumes it, and the broker comes back Serving/Alive
// on its own. Nothing is force-deleted (its node never counted as lost).
func nodeFrozenAndBack(ctx context.Context, t *testing.T, s *suite) {
	victim, node := s.brokerAwayFromManager(ctx, t)
	pod, err := s.pod(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	podName := kafkav1alpha1.BrokerPodName(s.name, victim)
	pid := readPID(t, s.env, s.namespace, podName)
	runs := len(s.env.ContainerRuns(s.namespace, podName))
	frozen := time.Now()
	t.Log(devNode(ctx, t, s, "stop", node, "--freeze"))
	started := false
	defer func() {
		if !started {
			_ = s.env.StartNode(node)
		}
	}()
	testkit.EventuallyDetail(t, "the frozen broker Dead", func() (bool, string) {
		row := s.row(ctx, victim)
		return row.Health == kafkav1alpha1.BrokerDead, fmt.Sprintf("%s/%s (%s)", row.State, row.Health, row.Reason)
	})
	measure(t, "15 node frozen and back", "frozen → broker Dead", time.Since(frozen))
	t.Log(devNode(ctx, t, s, "list"))
	back := time.Now()
	t.Log(devNode(ctx, t, s, "start", node))
	started = true
	testkit.Within(t, "the resumed broker Serving/Alive", 2*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
	measure(t, "15 node frozen and back", "node started → resumed broker Serving/Alive", time.Since(back))
	after, err := s.pod(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != pod.UID {
		t.Errorf("the pod was replaced (uid %s → %s); its node was never NotReady for the node loss timeout", pod.UID, after.UID)
	}
	if got := readPID(t, s.env, s.namespace, podName); got != pid {
		t.Errorf("the broker runs as pid %d, was %d: the frozen process was not resumed", got, pid)
	}
	if got := len(s.env.ContainerRuns(s.namespace, podName)); got != runs {
		t.Errorf("%d container runs, was %d: the container was restarted instead of resumed", got, runs)
	}
}

// row is broker id's registry row (empty when absent).
func (s *suite) row(ctx context.Context, id int32) kafkav1alpha1.BrokerRow {
	kc, err := s.cluster(ctx)
	if err != nil {
		return kafkav1alpha1.BrokerRow{Reason: err.Error()}
	}
	for _, r := range kc.Status.Brokers {
		if r.ID == id {
			return r
		}
	}
	return kafkav1alpha1.BrokerRow{}
}
