package broker

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// inProcessBroker runs a Broker over view with a heartbeat against the envtest apiserver.
type inProcessBroker struct {
	b       *Broker
	signals chan os.Signal
	result  chan error
	kafka   string
	health  string
}

func startInProcessBroker(t *testing.T, c client.Client, ns string, view cluster.View, drainTimeout, interval time.Duration) *inProcessBroker {
	t.Helper()
	cfg := Config{
		Cluster:     "c",
		Listeners:   []cluster.ListenerSpec{{Name: "kafka", Port: int32(testkit.FreePort(t)), Host: "127.0.0.1"}},
		HealthPort:  testkit.FreePort(t),
		BindAddress: "127.0.0.1", DrainTimeout: drainTimeout,
		Identity: cluster.Identity{ID: 0, Pod: "c-broker-0", UID: "u0", Namespace: ns},
	}
	ib := &inProcessBroker{signals: make(chan os.Signal, 2), result: make(chan error, 1)}
	ib.b = NewBroker(cfg, view, testr.New(t))
	ib.b.Heartbeat = &cluster.Heartbeat{
		Client: c, Cluster: "c", Identity: cfg.Identity,
		Interval: interval, SessionTimeout: 60 * time.Second,
		Healthy: ib.b.Healthy, Draining: ib.b.Draining, Log: testr.New(t),
	}
	listening := make(chan struct{})
	ib.b.OnListening = func(kafka []net.Addr, health net.Addr) {
		ib.kafka, ib.health = kafka[0].String(), health.String()
		close(listening)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { ib.result <- ib.b.Run(ctx, ib.signals) }()
	t.Cleanup(cancel)
	select {
	case <-listening:
	case err := <-ib.result:
		t.Fatalf("broker stopped at start: %v", err)
	}
	return ib
}

func (ib *inProcessBroker) stillRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-ib.result:
		t.Fatalf("broker stopped early: %v", err)
	default:
	}
	expectServing(t, ib.kafka)
}

func leaseDraining(t *testing.T, c client.Client, ns string) bool {
	l, err := testenv.BrokerLease(c, ns, "c", 0)
	return err == nil && l.Annotations[v1alpha1.AnnotationDraining] == "true"
}

func TestDrainWaitsForTheViewToMoveWorkAway(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	self := v1alpha1.BrokerRow{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}
	view := cluster.NewMemoryView(cluster.Snapshot{
		Brokers: []v1alpha1.BrokerRow{self},
		Topics:  []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 0}}}},
	})
	// An hour between loop beats: only the immediate draining beat can write draining=true.
	ib := startInProcessBroker(t, c, ns, view, time.Minute, time.Hour)
	testkit.Eventually(t, "the first beat", func() bool { _, err := testenv.BrokerLease(c, ns, "c", 0); return err == nil })
	if leaseDraining(t, c, ns) {
		t.Fatal("lease draining before SIGTERM")
	}

	ib.signals <- syscall.SIGTERM
	testkit.Eventually(t, "the draining beat", func() bool { return leaseDraining(t, c, ns) })
	ib.stillRunning(t)

	// The registry saw the drain: groups move away, but a partition is still led here.
	self.Health = v1alpha1.BrokerDraining
	view.Set(cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{self}, Topics: []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 0}}}}})
	time.Sleep(200 * time.Millisecond)
	ib.stillRunning(t)

	// The partition moves too: nothing is left here.
	view.Set(cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{self}, Topics: []cluster.Topic{{Name: "t", Partitions: []cluster.Partition{{Index: 0, Leader: 1}}}}})
	select {
	case err := <-ib.result:
		if err != nil {
			t.Fatalf("Run returned %v, want nil (exit 0)", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker still running after the view moved all work away")
	}
	if _, err := net.DialTimeout("tcp", ib.kafka, time.Second); err == nil {
		t.Fatal("listener still open after the drain")
	}
}

func TestDrainTimeoutClosesWithWorkStillAssigned(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	view := cluster.NewMemoryView(cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}}})
	ib := startInProcessBroker(t, c, ns, view, 300*time.Millisecond, time.Second)
	ib.signals <- syscall.SIGTERM
	select {
	case err := <-ib.result:
		if err != nil {
			t.Fatalf("Run returned %v, want nil", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("drain timeout ignored")
	}
	if !leaseDraining(t, c, ns) {
		t.Fatal("listeners closed before the draining beat was written")
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	view := cluster.NewMemoryView(cluster.Snapshot{Brokers: []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}}})
	ib := startInProcessBroker(t, c, ns, view, time.Hour, time.Second)
	ib.signals <- syscall.SIGTERM
	testkit.Eventually(t, "the draining beat", func() bool { return leaseDraining(t, c, ns) })
	ib.signals <- os.Interrupt
	select {
	case err := <-ib.result:
		if !errors.Is(err, errInterrupted) {
			t.Fatalf("Run returned %v, want errInterrupted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second signal ignored")
	}
}

func TestHealthEndpoints(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	view := cluster.NewMemoryView(cluster.Snapshot{})
	ib := startInProcessBroker(t, c, ns, view, time.Second, 100*time.Millisecond)
	expectServing(t, ib.kafka)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + ib.health + path)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := get(path)
		var r healthReport
		if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 || !r.Ready || !r.Healthy {
			t.Fatalf("%s: %d %s", path, code, body)
		}
	}
	testkit.Eventually(t, "a heartbeat age", func() bool { _, body := get("/healthz"); return !strings.Contains(body, `"heartbeatAgeSeconds":-1`) })
	_, metrics := get("/metrics")
	for _, want := range []string{
		`paddock_broker_requests_total{api="Metadata",version="0"} 1`,
		`paddock_broker_open_connections`,
		`paddock_broker_heartbeat_age_seconds`,
		`paddock_broker_draining 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	ib.signals <- syscall.SIGTERM
	if err := <-ib.result; err != nil {
		t.Fatal(err)
	}
}

func TestLivenessGoesUnhealthyAfterFiveSecondsWithoutATick(t *testing.T) {
	var now time.Duration // the monotonic clock; the wall clock is never read
	l := NewLiveness(func() time.Duration { return now })
	now += 4 * time.Second
	if !l.Healthy() {
		t.Fatal("unhealthy 4s after a tick")
	}
	now += time.Second
	if l.Healthy() {
		t.Fatal("healthy 5s after the last tick")
	}
	l.Tick()
	if !l.Healthy() {
		t.Fatal("a tick did not restore health")
	}
}

// TestBinaryDrainsOnSIGTERM builds the real `paddock` binary and runs `paddock broker` against
// the envtest apiserver through $KUBECONFIG, with the KafkaCluster status written by the test
// in place of the registry.
func TestBinaryDrainsOnSIGTERM(t *testing.T) {
	c := apiServer(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "paddock")
	build := exec.Command("go", "build", "-o", bin, "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kubeconfig, err := testEnv.Get(t).AdminKubeconfig("broker-test")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	self := v1alpha1.BrokerRow{ID: 0, Host: "127.0.0.1", State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}
	ns := newNamespaceWithCluster(t, c, []v1alpha1.BrokerRow{self})
	kafkaPort, healthPort := testkit.FreePort(t), testkit.FreePort(t)
	cmd := exec.Command(bin, "broker", "--cluster=c",
		"--listeners=kafka:"+strconv.Itoa(kafkaPort)+":PodIP",
		"--health-port="+strconv.Itoa(healthPort),
		"--heartbeat-interval=1s", "--session-timeout=6s", "--drain-timeout=1m",
		"--data-dir="+dir, "--bind-address=127.0.0.1")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kcPath, "POD_NAME=c-broker-0", "POD_NAMESPACE="+ns,
		"POD_UID=uid-bin", "POD_IP=127.0.0.1", "NODE_NAME=n1")
	logPath := filepath.Join(dir, "broker.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("broker output:\n%s", out)
		}
	})
	kafka := "127.0.0.1:" + strconv.Itoa(kafkaPort)

	testkit.Eventually(t, "/readyz", func() bool {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(healthPort) + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 200
	})
	conn := dialKafka(t, kafka)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey = "g"
	if resp := roundTrip(t, conn, req).(*kmsg.FindCoordinatorResponse); resp.NodeID != 0 || resp.Port != int32(kafkaPort) {
		t.Fatalf("FindCoordinator %+v, want broker 0 at its listener", resp)
	}
	testkit.Eventually(t, "a healthy lease", func() bool {
		l, err := testenv.BrokerLease(c, ns, "c", 0)
		return err == nil && l.Annotations[v1alpha1.AnnotationHealthy] == "true"
	})

	_ = cmd.Process.Signal(syscall.SIGTERM)
	testkit.Eventually(t, "the draining lease", func() bool { return leaseDraining(t, c, ns) })
	// Draining, but the registry still lists it Alive (it still coordinates groups): serving.
	roundTrip(t, conn, kmsg.NewPtrMetadataRequest())
	expectServing(t, kafka)

	// The registry marks it Draining: no group can land here any more, no partition is led.
	self.Health = v1alpha1.BrokerDraining
	setRows(t, c, ns, []v1alpha1.BrokerRow{self})
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("broker exited with %v, want exit code 0", waitErr)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("broker did not exit after the view stopped assigning it work")
	}
	if _, err := net.DialTimeout("tcp", kafka, time.Second); err == nil {
		t.Fatal("listener still open after exit")
	}
}

// /readyz is 503 until the listeners are bound, the first cluster view was read and the
// broker is healthy; /healthz is 503 when it is unhealthy. The handler reads only atomics and
// the view pointer, so it answers before Run has bound anything.
func TestReadyzIs503UntilBoundSyncedAndHealthy(t *testing.T) {
	var mono atomic.Int64
	for _, tc := range []struct {
		name                string
		bound, synced, wedg bool
		wantReady, wantLive int
	}{
		{"before the listeners bind", false, true, false, 503, 200},
		{"before the first view was read", true, false, false, 503, 200},
		{"unhealthy: the request path did not tick for 5 s", true, true, true, 503, 503},
		{"bound, synced and healthy", true, true, false, 200, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var view cluster.View = cluster.NewMemoryView(cluster.Snapshot{})
			if !tc.synced {
				view = &cluster.MemoryView{} // nothing set yet: Synced is false
			}
			b := NewBroker(Config{}, view, testr.New(t))
			b.liveness = NewLiveness(func() time.Duration { return time.Duration(mono.Load()) })
			b.listenersBound.Store(tc.bound)
			if tc.wedg {
				mono.Add(int64(WedgedAfter))
			}
			h := b.healthHandler()
			for path, want := range map[string]int{"/readyz": tc.wantReady, "/healthz": tc.wantLive} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				if rec.Code != want {
					t.Errorf("%s = %d %s, want %d", path, rec.Code, rec.Body, want)
				}
			}
		})
	}
}
