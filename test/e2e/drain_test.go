package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// drainSteps are the topics scenario 13 adds before each drain: none (the victim leads
// nothing), then 300 partitions (a third each: the victim leads 100), then 2,700 more (3,000
// in all: it leads 1,000). The balancer keeps every topic and the cluster at spread ≤ 1, so
// the victim's share is exactly a third once its replacement is back.
var drainSteps = []struct {
	topic      string
	partitions int32
}{{"", 0}, {"e2e-drain-300", 300}, {"e2e-drain-2700", 2700}}

// 13. Drain timing: a broker leading 0, 100 and 1,000 partitions is drained by deleting its
// pod (SIGTERM). Each time, it exits 0, its log says it drained — the view gave it no
// partition and no group, and it held no partition log open and coordinated no group — and
// never that the drain timed out; SIGTERM → exit (the node agent's record of the run) is printed with the number of
// partitions it led. Between drains the replacement comes back and the balancer gives it its
// third of every topic again.
func drainTiming(ctx context.Context, t *testing.T, s *suite) {
	const scenario, victim = "13 drain timing", int32(1)
	podName := kafkav1alpha1.BrokerPodName(s.name, victim)
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if n, err := s.partitionsLed(ctx, -1); err != nil || n != 0 {
		t.Fatalf("the scenario starts from a cluster without topics; %d partitions exist (err %v)", n, err)
	}
	defer func() {
		for _, step := range drainSteps {
			if step.topic == "" {
				continue
			}
			if _, err := adm.DeleteTopic(ctx, step.topic); err != nil {
				t.Errorf("delete %s: %v", step.topic, err)
			}
		}
		testkit.Within(t, "the drain topics' KafkaTopics gone", 2*time.Minute, func() (bool, string) {
			n, err := s.partitionsLed(ctx, -1)
			return err == nil && n == 0, fmt.Sprintf("%d partitions left (err %v)", n, err)
		})
	}()
	total := int32(0)
	for _, step := range drainSteps {
		if step.topic != "" {
			created := time.Now()
			if _, err := adm.CreateTopic(ctx, step.partitions, 1, nil, step.topic); err != nil {
				t.Fatalf("create %s with %d partitions: %v", step.topic, step.partitions, err)
			}
			measure(t, scenario, fmt.Sprintf("kadm CreateTopics of %d partitions answered", step.partitions), time.Since(created))
		}
		total += step.partitions
		want := int(total / 3)
		started := time.Now()
		testkit.Within(t, fmt.Sprintf("broker %d leading a third of %d partitions, every broker done taking over", victim, total), 3*time.Minute, func() (bool, string) {
			if ok, detail := s.healthy(ctx, 3); !ok {
				return false, detail
			}
			led, err := s.partitionsLed(ctx, victim)
			if err != nil || led != want {
				return false, fmt.Sprintf("broker %d leads %d partitions in the KafkaTopics' status (err %v), want %d", victim, led, err, want)
			}
			for id := range int32(3) {
				n, err := s.metric(ctx, id, "paddock_broker_partitions_led")
				if err != nil {
					return false, err.Error()
				}
				under, err := s.metric(ctx, id, "paddock_broker_partitions_under_takeover")
				if err != nil {
					return false, err.Error()
				}
				if under != 0 || (id == victim && int(n) != want) {
					return false, fmt.Sprintf("broker %d leads %v partitions, %v under takeover", id, n, under)
				}
			}
			return true, ""
		})
		if step.topic != "" {
			measure(t, scenario, fmt.Sprintf("%d partitions in all: a third on broker %d and taken over", total, victim), time.Since(started))
		}

		logFile := filepath.Join(s.env.Dir(), "logs", "pods", strings.Join([]string{s.namespace, podName, kafkav1alpha1.BrokerContainerName}, "_")+".log")
		logFrom, err := fileSize(logFile)
		if err != nil {
			t.Fatal(err)
		}
		pod, err := s.pod(ctx, victim)
		if err != nil {
			t.Fatal(err)
		}
		runsBefore := len(s.env.ContainerRuns(s.namespace, podName))
		if err := s.c.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		var exited time.Duration
		testkit.EventuallyDetail(t, fmt.Sprintf("broker %d, leading %d partitions, to exit after SIGTERM", victim, want), func() (bool, string) {
			run := s.env.ContainerRuns(s.namespace, podName)[runsBefore-1]
			if run.TermSent.IsZero() || run.Exited.IsZero() {
				return false, fmt.Sprintf("SIGTERM sent %v, exited %v", !run.TermSent.IsZero(), !run.Exited.IsZero())
			}
			if run.ExitCode != 0 {
				t.Errorf("broker %d leading %d partitions exited %d after SIGTERM, want 0", victim, want, run.ExitCode)
			}
			exited = run.Exited.Sub(run.TermSent)
			return true, ""
		})
		measure(t, scenario, fmt.Sprintf("SIGTERM → exit 0, leading %d partitions", want), exited)
		drained, timedOut, err := drainLog(logFile, logFrom)
		if err != nil {
			t.Fatal(err)
		}
		if drained == "" || timedOut != "" {
			t.Errorf("broker %d leading %d partitions: its log after SIGTERM says drained %q, timed out %q; want it drained, leading nothing, before the drain timeout", victim, want, drained, timedOut)
		}
	}
}

// drainLog reads a broker's container log from offset from up to the next run's banner and
// returns its "Drained" line and its "Drain timeout" line, if any.
func drainLog(path string, from int64) (drained, timedOut string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return "", "", err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "==== "): // the next run's banner
			return drained, timedOut, nil
		case strings.Contains(line, "Drained: the cluster view gives this broker no partition and no group"):
			drained = line
		case strings.Contains(line, "Drain timeout"):
			timedOut = line
		}
	}
	return drained, timedOut, sc.Err()
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// partitionsLed counts the partitions broker id leads in the KafkaTopics' status of the
// suite's namespace; with id -1, every partition.
func (s *suite) partitionsLed(ctx context.Context, id int32) (int, error) {
	var list kafkav1alpha1.KafkaTopicList
	if err := s.c.List(ctx, &list, client.InNamespace(s.namespace)); err != nil {
		return 0, err
	}
	n := 0
	for _, kt := range list.Items {
		if id < 0 {
			n += int(kt.Spec.Partitions)
			continue
		}
		for _, p := range kt.Status.Partitions {
			if p.Leader == id {
				n++
			}
		}
	}
	return n, nil
}

// metric is the sum of broker id's /metrics series named name (any labels).
func (s *suite) metric(ctx context.Context, id int32, name string) (float64, error) {
	pod, err := s.pod(ctx, id)
	if err != nil {
		return 0, err
	}
	return scrapeMetrics(ctx, pod.Status.PodIP, func(series string) bool { return series == name || strings.HasPrefix(series, name+"{") })
}
