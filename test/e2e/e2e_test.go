package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/coordinator"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// devConfig is the configuration of an environment of the test's own: this checkout's
// config/ and binaries, this run's paddock binary, a host address of its own.
func devConfig(t *testing.T) devcluster.Config {
	t.Helper()
	cfg := devcluster.DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "dev")
	if os.Getenv("KUBEBUILDER_ASSETS") == "" { // `go test` outside make: the checkout's binaries
		cfg.K8sBinDir = filepath.Join("..", "..", "bin", "k8s", "1.37.2")
	}
	cfg.ConfigDir = filepath.Join("..", "..", "config")
	cfg.PaddockBinary = paddockBinary
	cfg.HostAddress = devcluster.TestHostAddress()
	cfg.PrometheusBinary = "" // withPrometheus adds it
	return cfg
}

// withPrometheus is cfg with paddock dev's Prometheus ($PROMETHEUS, which the Makefile
// exports, else the checkout's bin/prometheus-*) on the suite's faster clock.
func withPrometheus(cfg devcluster.Config) devcluster.Config {
	cfg.PrometheusBinary = os.Getenv("PROMETHEUS")
	if cfg.PrometheusBinary == "" {
		if found, _ := filepath.Glob(filepath.Join("..", "..", "bin", "prometheus-v*")); len(found) > 0 {
			cfg.PrometheusBinary = found[len(found)-1]
		}
	}
	cfg.PrometheusSpeedup = prometheusSpeedup
	return cfg
}

// startEnv starts an environment of cfg, stopped (its logs kept when the test failed, or
// always with PADDOCK_E2E_KEEP_LOGS=1) when the test ends, and measures its start as
// scenario's what.
func startEnv(ctx context.Context, t *testing.T, cfg devcluster.Config, scenario, what string) *devcluster.Env {
	t.Helper()
	started := time.Now()
	env, err := devcluster.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("PADDOCK_E2E_KEEP_LOGS") == "1" {
			keepLogs(t, env.Dir())
		}
		env.Stop()
	})
	measure(t, scenario, what, time.Since(started))
	return env
}

// TestFencingScenarios runs the scenarios on one environment, in an order where each starts
// from three healthy brokers (scale-down, which ends with two, comes last).
func TestFencingScenarios(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh); the e2e suite does not run without it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 26*time.Minute)
	defer cancel()
	cfg := withPrometheus(devConfig(t))
	if cfg.PrometheusBinary == "" {
		t.Fatal("no Prometheus: run `make prometheus` (scenario 20 needs it)")
	}
	env := startEnv(ctx, t, cfg, "environment", "start (control plane, nodes, operator Deployment Available)")

	s := &suite{env: env, c: env.Client(), namespace: "e2e", name: "e2e", port: 9092}
	if err := s.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}); err != nil {
		t.Fatal(err)
	}
	kc := devcluster.SampleCluster(s.namespace, s.name, 3, env.HostAddress())
	kc.Spec.DrainTimeout = &metav1.Duration{Duration: 20 * time.Second}
	// A lost node's broker is replaced at the default nodeLossTimeout (5 s) after its Node
	// turns NotReady at Kubernetes' default node-monitor grace (scenario 14).
	kc.Spec.Listeners = append(kc.Spec.Listeners, kafkav1alpha1.Listener{Name: nodesListener, Port: 9095, Type: kafkav1alpha1.ListenerNodePort})
	applied := time.Now()
	if err := s.c.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}

	scenarios := []struct {
		name string
		run  func(context.Context, *testing.T, *suite)
	}{
		{"1 bring-up", func(ctx context.Context, t *testing.T, s *suite) { bringUp(ctx, t, s, applied) }},
		{"18 storage verified", func(ctx context.Context, t *testing.T, s *suite) { storageVerified(ctx, t, s, applied) }},
		{"8 identities", identities},
		{"16 trust boundary", trustBoundary},
		{"9 from outside", fromOutside},
		{"10 topics", topics},
		{"17 failed partition", failedPartition},
		{"20 monitoring", monitoringScenario},
		{"13 drain timing", drainTiming},
		{"2 crash", crash},
		{"3 graceful", graceful},
		{"7 operator down", operatorDown},
		{"11 no acknowledged record lost", noLoss},
		{"12 group coordinator moves", groupCoordinatorMoves},
		{"19 exactly once under faults", exactlyOnce},
		{"5 rolling restart", rollingRestart},
		{"6 node loss", nodeLoss},
		{"15 node frozen and back", nodeFrozenAndBack},
		{"14 node never returns", nodeNeverReturns},
		{"4 scale-down", scaleDown},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			testkit.Within(t, "three healthy brokers before the scenario", 3*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
			sc.run(ctx, t, s)
		})
	}
}

// keepLogs copies the environment's logs next to the test binary's working directory so a
// failed run can be read after the temporary directory is gone.
func keepLogs(t *testing.T, dir string) {
	dst, err := os.MkdirTemp("", "paddock-e2e-logs-")
	if err != nil {
		return
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(dir, "logs"), dst).CombinedOutput(); err != nil {
		t.Logf("copy logs: %v %s", err, out)
		return
	}
	t.Logf("environment logs kept in %s", dst)
}

// 1. Bring-up: 3 brokers Serving/Alive; 3 Broker objects; Metadata, DescribeCluster and kcat
// list 3. Inside .paddock/dev/shell (run from the host's network, as a person does), the
// bootstrap Service's name resolves to its ClusterIP and kcat lists every broker at its pod
// DNS name, which the internal listener advertises by default (PodDNS); kcat -P and -C there
// write one record to each broker's partition and read them back through those names.
func bringUp(ctx context.Context, t *testing.T, s *suite, applied time.Time) {
	measure(t, "1 bring-up", "apply → 3 brokers Serving/Alive", time.Since(applied))
	for id := range int32(3) {
		addr, err := s.addr(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyDetail(t, fmt.Sprintf("broker %d's Metadata and DescribeCluster to list 3", id), func() (bool, string) {
			ids, err := metadataBrokers(ctx, addr)
			if err != nil || !slices.Equal(ids, []int32{0, 1, 2}) {
				return false, fmt.Sprintf("metadata %v %v", ids, err)
			}
			fenced, err := describeCluster(ctx, addr, true)
			if err != nil || len(fenced) != 3 || fenced[0] || fenced[1] || fenced[2] {
				return false, fmt.Sprintf("describe cluster %v %v", fenced, err)
			}
			return true, ""
		})
	}
	addr, _ := s.addr(ctx, 0)
	n, out, err := kcatBrokers(ctx, addr)
	if err != nil || n != 3 {
		t.Fatalf("kcat -L listed %d brokers (err %v):\n%s", n, err, out)
	}

	bootstrap, err := s.env.ServiceAddress(ctx, s.namespace, kafkav1alpha1.InternalBootstrapServiceName(s.name), devcluster.SampleInternalListener)
	if err != nil {
		t.Fatal(err)
	}
	clusterIP, _, _ := net.SplitHostPort(bootstrap)
	short := kafkav1alpha1.InternalBootstrapServiceName(s.name) + "." + s.namespace // the shell's search path is the default namespace's
	got, err := devcluster.HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, s.env.ShellPath(), "getent", "hosts", short)
	if f := strings.Fields(string(got)); err != nil || len(f) < 1 || f[0] != clusterIP {
		t.Fatalf("%s getent hosts %s: %q (err %v), want %s", s.env.ShellPath(), short, got, err, clusterIP)
	}
	started := time.Now()
	brokers, out, err := hostKcat(ctx, s.env.ShellPath(), net.JoinHostPort(short, strconv.Itoa(int(s.port))))
	if err != nil || len(brokers) != 3 {
		t.Fatalf("kcat -L in %s listed %v (err %v):\n%s", s.env.ShellPath(), brokers, err, out)
	}
	for id := range int32(3) {
		if want := net.JoinHostPort(s.dnsName(id), strconv.Itoa(int(s.port))); brokers[id] != want {
			t.Errorf("kcat -L in the shell lists broker %d at %s, want its pod DNS name %s\n%s", id, brokers[id], want, out)
		}
	}
	measure(t, "1 bring-up", "kcat -L in the shell, by the bootstrap Service's name", time.Since(started))
	started = time.Now()
	s.shellProduceConsume(ctx, t, net.JoinHostPort(short, strconv.Itoa(int(s.port))))
	measure(t, "1 bring-up", "kcat -P and -C in the shell, through every broker's pod DNS name", time.Since(started))
}

// shellTopic is the topic bring-up produces to and consumes from inside the shell.
const shellTopic = "e2e-shell"

// shellProduceConsume creates a topic of three partitions (one led by each broker), then,
// inside .paddock/dev/shell as a person would, produces one record to each partition with
// kcat -P and reads them back with kcat -C: kcat reaches each leader at the pod DNS name it
// advertises. The topic is deleted again (the drain-timing scenario wants a cluster without
// topics).
func (s *suite) shellProduceConsume(ctx context.Context, t *testing.T, bootstrap string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	createTopic(ctx, t, adm, 3, shellTopic)
	testkit.EventuallyDetail(t, shellTopic+" led on every partition", func() (bool, string) { return s.topicLed(ctx, shellTopic) })
	env := []string{"PATH=" + os.Getenv("PATH")}
	kctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	want := map[string]bool{}
	for p := range 3 {
		v := fmt.Sprintf("from-the-shell-%d", p)
		want[fmt.Sprintf("%d %s", p, v)] = true
		out, err := devcluster.HostCommand(kctx, env, s.env.ShellPath(), "sh", "-c",
			fmt.Sprintf("echo %s | kcat -P -b %s -t %s -p %d -X acks=all", v, bootstrap, shellTopic, p))
		if err != nil {
			t.Fatalf("kcat -P to partition %d in the shell: %v\n%s", p, err, out)
		}
	}
	out, err := devcluster.HostCommand(kctx, env, s.env.ShellPath(),
		"kcat", "-C", "-b", bootstrap, "-t", shellTopic, "-o", "beginning", "-e", "-q", "-f", "%p %s\n")
	if err != nil {
		t.Fatalf("kcat -C in the shell: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		got[line] = true
	}
	if !maps.Equal(got, want) {
		t.Errorf("kcat -C in the shell read %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	if _, err := adm.DeleteTopic(ctx, shellTopic); err != nil {
		t.Fatalf("delete %s: %v", shellTopic, err)
	}
	testkit.EventuallyDetail(t, shellTopic+"'s KafkaTopic gone", func() (bool, string) {
		_, err := s.kafkaTopic(ctx, shellTopic)
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// 2. Crash: kill -9 → Fenced as soon as the pod is not ready (Metadata omits it,
// DescribeCluster v2 lists it fenced, the others unfenced); Dead as soon as its container is
// reported terminated (death seen; the session timeout at the latest) while it stays down; back to Serving/Alive with a higher epoch after the restart.
func crash(ctx context.Context, t *testing.T, s *suite) {
	const victim = int32(1)
	pod := kafkav1alpha1.BrokerPodName(s.name, victim)
	before, err := s.brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	witness, err := s.addr(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	pid := readPID(t, s.env, s.namespace, pod)
	s.env.HoldRestarts(s.namespace, pod, true)
	defer s.env.HoldRestarts(s.namespace, pod, false)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyDetail(t, "a client to see the crashed broker fenced", func() (bool, string) {
		fenced, err := describeCluster(ctx, witness, true)
		if err != nil {
			return false, err.Error()
		}
		return len(fenced) == 3 && fenced[victim] && !fenced[0] && !fenced[2], fmt.Sprintf("IsFenced %v", fenced)
	})
	measure(t, "2 crash", "kill -9 → Fenced seen by a client", time.Since(killed))
	ids, err := metadataBrokers(ctx, witness)
	if err != nil || slices.Contains(ids, victim) {
		t.Errorf("Metadata lists %v (err %v); want the fenced broker %d omitted", ids, err, victim)
	}
	testkit.EventuallyDetail(t, "the crashed broker Dead", func() (bool, string) {
		b, err := s.brokers(ctx)
		if err != nil {
			return false, err.Error()
		}
		return b[victim].Status.Health == kafkav1alpha1.BrokerDead, string(b[victim].Status.Health)
	})
	measure(t, "2 crash", "kill -9 → Dead", time.Since(killed))
	s.env.HoldRestarts(s.namespace, pod, false)
	testkit.EventuallyDetail(t, "the restarted broker Serving/Alive with a higher epoch", func() (bool, string) {
		b, err := s.brokers(ctx)
		if err != nil {
			return false, err.Error()
		}
		st := b[victim].Status
		return st.State == kafkav1alpha1.BrokerServing && st.Health == kafkav1alpha1.BrokerAlive && st.Epoch > before[victim].Status.Epoch,
			fmt.Sprintf("%s/%s epoch %d (was %d)", st.State, st.Health, st.Epoch, before[victim].Status.Epoch)
	})
	measure(t, "2 crash", "kill -9 → Serving/Alive again", time.Since(killed))
}

// 3. Graceful: deleting a broker's pod shows it Draining before the process exits;
// FindCoordinator for its groups answers other brokers while it is still up; it exits 0
// inside the grace period; the replacement comes back Serving.
func graceful(ctx context.Context, t *testing.T, s *suite) {
	const victim = int32(2)
	podName := kafkav1alpha1.BrokerPodName(s.name, victim)
	witness, err := s.addr(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var group string
	for i := range 200 {
		g := "e2e-group-" + strconv.Itoa(i)
		if id, err := findCoordinator(ctx, witness, g); err == nil && id == victim {
			group = g
			break
		}
	}
	if group == "" {
		t.Fatalf("no group of 200 is coordinated by broker %d", victim)
	}
	pod, err := s.pod(ctx, victim)
	if err != nil {
		t.Fatal(err)
	}
	runsBefore := len(s.env.ContainerRuns(s.namespace, podName))
	if err := s.c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var run devcluster.ContainerRun
	testkit.EventuallyDetail(t, "the node agent to SIGTERM the broker", func() (bool, string) {
		runs := s.env.ContainerRuns(s.namespace, podName)
		run = runs[runsBefore-1]
		return !run.TermSent.IsZero(), ""
	})
	sigterm := run.TermSent
	// The registry reports Draining in the cluster's status row first and on the Broker
	// object right after; the earlier of the two is when the registry said it.
	var drainingSeen, objectDrainingSeen, movedSeen time.Time
	testkit.EventuallyDetail(t, "Draining on the Broker object and the group's coordinator moved", func() (bool, string) {
		now := time.Now()
		if drainingSeen.IsZero() {
			if kc, err := s.cluster(ctx); err == nil {
				for _, row := range kc.Status.Brokers {
					if row.ID == victim && row.Health == kafkav1alpha1.BrokerDraining {
						drainingSeen = now
					}
				}
			}
		}
		if objectDrainingSeen.IsZero() {
			if b, err := s.brokers(ctx); err == nil && b[victim].Status.Health == kafkav1alpha1.BrokerDraining {
				objectDrainingSeen = now
				if drainingSeen.IsZero() {
					drainingSeen = now
				}
			}
		}
		if movedSeen.IsZero() {
			if id, err := findCoordinator(ctx, witness, group); err == nil && id != victim {
				movedSeen = now
			}
		}
		return !objectDrainingSeen.IsZero() && !movedSeen.IsZero(),
			fmt.Sprintf("draining seen %v, moved seen %v", !objectDrainingSeen.IsZero(), !movedSeen.IsZero())
	})
	measure(t, "3 graceful", "SIGTERM → Draining seen (status row)", drainingSeen.Sub(sigterm))
	measure(t, "3 graceful", "SIGTERM → Draining seen (Broker object)", objectDrainingSeen.Sub(sigterm))
	measure(t, "3 graceful", "SIGTERM → coordinator moved", movedSeen.Sub(sigterm))
	testkit.EventuallyDetail(t, "the broker process to exit", func() (bool, string) {
		run = s.env.ContainerRuns(s.namespace, podName)[runsBefore-1]
		return !run.Exited.IsZero(), ""
	})
	if !drainingSeen.Before(run.Exited) {
		t.Errorf("Draining first seen at %s, after the process exited at %s", drainingSeen, run.Exited)
	}
	if !movedSeen.Before(run.Exited) {
		t.Errorf("the coordinator moved at %s, after the process exited at %s", movedSeen, run.Exited)
	}
	if run.ExitCode != 0 {
		t.Errorf("broker exited %d after SIGTERM, want 0", run.ExitCode)
	}
	grace := time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	if took := run.Exited.Sub(sigterm); took >= grace {
		t.Errorf("SIGTERM → exit took %s, not inside the %s grace period", took, grace)
	}
	measure(t, "3 graceful", "SIGTERM → exit 0", run.Exited.Sub(sigterm))
	testkit.EventuallyDetail(t, "the replacement Serving/Alive", func() (bool, string) { return s.healthy(ctx, 3) })
	measure(t, "3 graceful", "SIGTERM → replacement Serving/Alive", time.Since(sigterm))
}

// 7. Operator down: with the manager Deployment scaled to zero, brokers keep answering from
// their last view; after it is scaled back up the state converges without spurious
// transitions.
func operatorDown(ctx context.Context, t *testing.T, s *suite) {
	before, err := s.brokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.env.StopManager(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for time.Since(stopped) < 10*time.Second {
		for id := range int32(3) {
			addr, err := s.addr(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			ids, err := metadataBrokers(ctx, addr)
			if err != nil || !slices.Equal(ids, []int32{0, 1, 2}) {
				t.Fatalf("operator down: broker %d Metadata lists %v (err %v)", id, ids, err)
			}
			fenced, err := describeCluster(ctx, addr, true)
			if err != nil || len(fenced) != 3 || fenced[0] || fenced[1] || fenced[2] {
				t.Fatalf("operator down: broker %d DescribeCluster %v (err %v)", id, fenced, err)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err := s.env.StartManager(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	for time.Since(restarted) < 10*time.Second {
		now, err := s.brokers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for id, b := range now {
			st, was := b.Status, before[id].Status
			if st.State != kafkav1alpha1.BrokerServing || st.Health != kafkav1alpha1.BrokerAlive || st.Epoch != was.Epoch {
				t.Fatalf("operator restart: broker %d went %s/%s epoch %d (was %s/%s epoch %d)",
					id, st.State, st.Health, st.Epoch, was.State, was.Health, was.Epoch)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	measure(t, "7 operator down", "brokers answered with the manager stopped for", restarted.Sub(stopped))
}

// 5. Rolling restart: a spec change rolls every pod; the registered count never drops below
// 3 and each broker is Fenced while it restarts, never Gone. A franz-go client made before
// the roll, which learnt every broker's advertised pod DNS name from Metadata, reaches every
// broker again afterwards at its new pod IP, without being recreated and without a dial
// failing (names, not cached IPs: PodDNS), and keeps producing: every record it had
// acknowledged before and after the roll is read back by a new consumer.
func rollingRestart(ctx context.Context, t *testing.T, s *suite) {
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dials := &dialLog{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.WithHooks(dials))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ipsBefore := s.roundTripsByName(ctx, t, cl, dials, "before the roll", time.Time{})
	createTopic(ctx, t, kadm.NewClient(cl), 3, rollTopic)
	acked := produceAcked(ctx, t, cl, "before", 30)
	orig := kc.DeepCopy()
	kc.Spec.DrainTimeout = &metav1.Duration{Duration: 21 * time.Second}
	if err := s.c.Patch(ctx, kc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	fencedSeen := map[int32]bool{}
	uids := s.podUIDs(ctx, t)
	testkit.Within(t, "every pod replaced and all brokers Serving/Alive", 4*time.Minute, func() (bool, string) {
		kc, err := s.cluster(ctx)
		if err != nil {
			return false, err.Error()
		}
		brokers, err := s.brokers(ctx)
		if err != nil {
			return false, err.Error()
		}
		if kc.Status.Counts.Registered < 3 || len(brokers) < 3 {
			t.Fatalf("rolling restart: registered %d, %d Broker objects", kc.Status.Counts.Registered, len(brokers))
		}
		for id, b := range brokers {
			if b.Status.State == kafkav1alpha1.BrokerFenced {
				fencedSeen[id] = true
			}
		}
		replaced := 0
		for id := range int32(3) {
			if pod, err := s.pod(ctx, id); err == nil && string(pod.UID) != uids[id] {
				replaced++
			}
		}
		ok, detail := s.healthy(ctx, 3)
		return ok && replaced == 3, fmt.Sprintf("%d pods replaced; %s", replaced, detail)
	})
	for id := range int32(3) {
		if !fencedSeen[id] {
			t.Errorf("broker %d was never seen Fenced while it restarted", id)
		}
	}
	measure(t, "5 rolling restart", "spec change → all 3 replaced and Serving/Alive", time.Since(started))

	rolled := time.Now()
	ipsAfter := s.roundTripsByName(ctx, t, cl, dials, "after the roll", rolled)
	measure(t, "5 rolling restart", "client made before the roll: round trips to all 3 by name", time.Since(rolled))
	for id := range int32(3) {
		if ipsAfter[id] == ipsBefore[id] {
			t.Errorf("broker %d kept pod IP %s through the roll; the test proves nothing about names", id, ipsAfter[id])
		}
	}
	produced := time.Now()
	acked = append(acked, produceAcked(ctx, t, cl, "after", 30)...)
	measure(t, "5 rolling restart", "client made before the roll: 30 records produced and acknowledged", time.Since(produced))
	if failed := dials.failedSince(rolled); len(failed) > 0 {
		t.Errorf("dials failed after the roll: %v", failed)
	}
	// Every record acknowledged before and after the roll is there, read by a new consumer.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(s.bootstrapName()), kgo.ConsumeTopics(rollTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	got := map[string]bool{}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(got) < len(acked) && cctx.Err() == nil {
		consumer.PollFetches(cctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	for _, v := range acked {
		if !got[v] {
			t.Errorf("acknowledged record %q is not in %s after the roll (read %d of %d)", v, rollTopic, len(got), len(acked))
		}
	}
}

// rollTopic is the topic the rolling restart produces to before and after the roll.
const rollTopic = "e2e-roll"

// produceAcked produces n records named <round>-<i> to rollTopic through cl and returns
// their values once every one is acknowledged.
func produceAcked(ctx context.Context, t *testing.T, cl *kgo.Client, round string, n int) []string {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	var values []string
	for i := range n {
		v := fmt.Sprintf("%s-%d", round, i)
		values = append(values, v)
		recs = append(recs, &kgo.Record{Topic: rollTopic, Value: []byte(v)})
	}
	if err := cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		t.Fatalf("%s the roll: produce to %s: %v", round, rollTopic, err)
	}
	return values
}

// dialLog records every connection a franz-go client opens (kgo.HookBrokerConnect).
type dialLog struct {
	mu    sync.Mutex
	dials []dial // guarded by mu
}

type dial struct {
	at     time.Time
	id     int32
	host   string // the advertised host the client dialled
	remote string // the IP it reached
	err    error
}

func (d *dialLog) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, conn net.Conn, err error) {
	dl := dial{at: time.Now(), id: meta.NodeID, host: meta.Host, err: err}
	if conn != nil {
		dl.remote, _, _ = net.SplitHostPort(conn.RemoteAddr().String())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dials = append(d.dials, dl)
}

// lastOK is the last successful dial to broker id, if it was at since or later.
func (d *dialLog) lastOK(id int32, since time.Time) (dial, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := len(d.dials) - 1; i >= 0; i-- {
		if dl := d.dials[i]; dl.id == id && dl.err == nil {
			return dl, !dl.at.Before(since)
		}
	}
	return dial{}, false
}

func (d *dialLog) failedSince(t time.Time) []string { return d.failedBetween(t, time.Time{}) }

// failedBetween lists the dials that failed at from or later and, with a non-zero to, not
// after to.
func (d *dialLog) failedBetween(from, to time.Time) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, dl := range d.dials {
		if dl.err != nil && !dl.at.Before(from) && (to.IsZero() || !dl.at.After(to)) {
			out = append(out, fmt.Sprintf("%s broker %d at %s: %v", dl.at.Format("15:04:05.000"), dl.id, dl.host, dl.err))
		}
	}
	return out
}

// roundTripsByName sends ApiVersions and Metadata to each broker through cl, by broker id —
// so at the address the client's Metadata gave it — and checks that the broker itself
// answered (its request counter), that the client dialled its pod DNS name, and that the
// name led to the broker's current pod IP. With a zero rolled, a Metadata request first
// teaches the client the brokers (and checks they advertise their names). Otherwise the
// client uses what it learnt before the roll that ended at rolled: a connection it opened
// before then led to a process that is gone, and the first request on it may fail (Broker
// requests are not retried by franz-go, unlike a producer's); that request is sent once
// more, and must then go over a new connection, dialled by name. It returns the pod IPs
// reached.
func (s *suite) roundTripsByName(ctx context.Context, t *testing.T, cl *kgo.Client, dials *dialLog, round string, rolled time.Time) map[int32]string {
	t.Helper()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	request := func(id int32, req kmsg.Request) (kmsg.Response, error) {
		resp, err := cl.Broker(int(id)).Request(rctx, req)
		if _, redialled := dials.lastOK(id, rolled); err != nil && !rolled.IsZero() && !redialled {
			t.Logf("%s: %s to broker %d over its connection from before the roll: %v; once more", round, kmsg.NameForKey(req.Key()), id, err)
			resp, err = cl.Broker(int(id)).Request(rctx, req)
		}
		return resp, err
	}
	if rolled.IsZero() {
		meta, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
		if err != nil || len(meta.Brokers) != 3 {
			t.Fatalf("%s: Metadata through %s: %+v %v", round, s.bootstrapName(), meta, err)
		}
		for _, b := range meta.Brokers {
			if b.Host != s.dnsName(b.NodeID) || b.Port != s.port {
				t.Fatalf("%s: broker %d advertises %s:%d, want its pod DNS name %s:%d", round, b.NodeID, b.Host, b.Port, s.dnsName(b.NodeID), s.port)
			}
		}
	}
	reached := map[int32]string{}
	for id := range int32(3) {
		pod, err := s.pod(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		before, err := s.requestCount(ctx, id, "ApiVersions")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := request(id, kmsg.NewPtrApiVersionsRequest()); err != nil {
			t.Fatalf("%s: ApiVersions to broker %d by its cached address: %v", round, id, err)
		}
		meta, err := request(id, kmsg.NewPtrMetadataRequest())
		if err != nil {
			t.Fatalf("%s: Metadata to broker %d by its cached address: %v", round, id, err)
		}
		for _, b := range meta.(*kmsg.MetadataResponse).Brokers {
			if b.Host != s.dnsName(b.NodeID) {
				t.Errorf("%s: broker %d's Metadata lists broker %d at %s, want %s", round, id, b.NodeID, b.Host, s.dnsName(b.NodeID))
			}
		}
		if after, err := s.requestCount(ctx, id, "ApiVersions"); err != nil || after-before < 1 {
			t.Errorf("%s: broker %d answered %v ApiVersions requests sent to it (err %v), want 1", round, id, after-before, err)
		}
		dl, ok := dials.lastOK(id, rolled)
		if !ok || dl.host != s.dnsName(id) || dl.remote != pod.Status.PodIP {
			t.Errorf("%s: the client's last connection to broker %d dialled %q and reached %q (ok %v), want %s at pod IP %s",
				round, id, dl.host, dl.remote, ok, s.dnsName(id), pod.Status.PodIP)
		}
		reached[id] = dl.remote
	}
	return reached
}

// 6. Node loss, with Kubernetes' default node-monitor grace period: stopping a node's agent
// kills its broker and stops the node's kubelet, so no readiness probe runs and its endpoint
// keeps saying serving for the grace period (40 s or more). The registry fences the broker on
// its expired heartbeat instead: it is Fenced for HeartbeatExpired, and gone from another
// broker's Metadata, while the node still reads Ready — the order, not a guess at how fast a
// loaded machine is; the delays are printed. The registered count holds, and the broker
// comes back Serving/Alive when the node returns. The node is one the operator does not run on
// (losing the operator too is another scenario, 7).
func nodeLoss(ctx context.Context, t *testing.T, s *suite) {
	victim, node := s.brokerAwayFromManager(ctx, t)
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The witness is a broker on another node than the victim's: its Metadata must drop the
	// victim.
	witness := ""
	for id := range int32(3) {
		if id == victim {
			continue
		}
		pod, err := s.pod(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if pod.Spec.NodeName != node {
			if witness, err = s.addr(ctx, id); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if witness == "" {
		t.Fatalf("every broker runs on %s, the victim's node", node)
	}
	lost := time.Now()
	if err := s.env.StopNode(node); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = s.env.StartNode(node)
		}
	}()
	var fencedAt, goneAt time.Time
	var fencedFor string
	var nodeReadyWhenFenced, nodeReadyWhenGone bool
	testkit.EventuallyDetail(t, "the lost broker Fenced and gone from Metadata", func() (bool, string) {
		kc, err := s.cluster(ctx)
		if err != nil {
			return false, err.Error()
		}
		if kc.Status.Counts.Registered != 3 {
			t.Fatalf("node loss: registered count %d, want 3", kc.Status.Counts.Registered)
		}
		var row kafkav1alpha1.BrokerRow
		for _, r := range kc.Status.Brokers {
			if r.ID == victim {
				row = r
			}
		}
		if fencedAt.IsZero() && row.State == kafkav1alpha1.BrokerFenced {
			if ready, err := s.nodeReady(ctx, node); err == nil { // else seen at the next poll
				fencedAt, fencedFor, nodeReadyWhenFenced = time.Now(), row.Reason, ready
			}
		}
		if goneAt.IsZero() {
			if ids, err := metadataBrokers(ctx, witness); err == nil && !slices.Contains(ids, victim) {
				if ready, err := s.nodeReady(ctx, node); err == nil {
					goneAt, nodeReadyWhenGone = time.Now(), ready
				}
			}
		}
		return !fencedAt.IsZero() && !goneAt.IsZero(), fmt.Sprintf("%s/%s (%s)", row.State, row.Health, row.Reason)
	})
	measure(t, "6 node loss", "node stopped → Fenced (heartbeat expired)", fencedAt.Sub(lost))
	measure(t, "6 node loss", "node stopped → gone from Metadata", goneAt.Sub(lost))
	if fencedFor != kafkav1alpha1.ReasonHeartbeatExpired || !nodeReadyWhenFenced {
		t.Errorf("node stopped → Fenced for %q %s after, node Ready then: %v; want HeartbeatExpired while the node still reads Ready (session timeout %s), not its endpoint's or node's loss",
			fencedFor, fencedAt.Sub(lost).Round(time.Millisecond), nodeReadyWhenFenced, kc.Spec.SessionTimeout())
	}
	if !nodeReadyWhenGone {
		t.Errorf("node stopped → gone from Metadata %s after, once the node was NotReady; want it gone on the expired heartbeat, while the node still reads Ready",
			goneAt.Sub(lost).Round(time.Millisecond))
	}
	restarted = true
	if err := s.env.StartNode(node); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	testkit.Within(t, "the node's broker back Serving/Alive", 2*time.Minute, func() (bool, string) { return s.healthy(ctx, 3) })
	measure(t, "6 node loss", "node back → Serving/Alive", time.Since(back))
	testkit.EventuallyDetail(t, "the broker back in Metadata", func() (bool, string) {
		ids, err := metadataBrokers(ctx, witness)
		return err == nil && slices.Contains(ids, victim), fmt.Sprintf("metadata %v %v", ids, err)
	})
}

// 4. Scale-down 3 → 2: broker 2 is deregistered (Broker object and row gone, absent from
// DescribeCluster v2 even with fenced brokers) and the coordinator divisor is 2.
func scaleDown(ctx context.Context, t *testing.T, s *suite) {
	kc, err := s.cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orig := kc.DeepCopy()
	kc.Spec.Replicas = 2
	if err := s.c.Patch(ctx, kc, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	witness, err := s.addr(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Within(t, "broker 2 deregistered everywhere", 2*time.Minute, func() (bool, string) {
		kc, err := s.cluster(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, row := range kc.Status.Brokers {
			if row.ID == 2 {
				return false, "row 2 still in status"
			}
		}
		var b kafkav1alpha1.Broker
		err = s.c.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: kafkav1alpha1.BrokerObjectName(s.name, 2)}, &b)
		if err == nil {
			return false, "Broker object 2 still exists"
		}
		fenced, err := describeCluster(ctx, witness, true)
		if err != nil {
			return false, err.Error()
		}
		_, listed := fenced[2]
		return !listed && len(fenced) == 2 && kc.Status.Counts.Registered == 2, fmt.Sprintf("DescribeCluster %v, registered %d", fenced, kc.Status.Counts.Registered)
	})
	measure(t, "4 scale-down", "replicas 3→2 → broker 2 deregistered", time.Since(started))
	for i := range 50 {
		g := "e2e-divisor-" + strconv.Itoa(i)
		want, _ := coordinator.Pick(g, coordinator.DefaultPartitions, []int32{0, 1}, []int32{0, 1})
		got, err := findCoordinator(ctx, witness, g)
		if err != nil || got != want {
			t.Fatalf("FindCoordinator(%s) = %d (err %v), want %d: the divisor is not 2", g, got, err, want)
		}
	}
}

func readPID(t *testing.T, env *devcluster.Env, namespace, pod string) int {
	t.Helper()
	pid, err := env.PID(namespace, pod)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}
