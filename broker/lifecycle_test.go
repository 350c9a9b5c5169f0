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
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kmsg"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// eventually polls cond every 50ms until it holds or 20s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getLease(t *testing.T, c client.Client, ns string, id int32) (*coordinationv1.Lease, error) {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v1alpha1.LeaseName("c", id)}, l)
	return l, err
}

func TestHeartbeatLeaseFollowsTheContract(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	healthy, draining := true, false
	hb := &Heartbeat{
		Client: c, Cluster: "c",
		Identity:       Identity{ID: 1, Pod: "c-broker-1", UID: "uid-a", Namespace: ns},
		Interval:       time.Second,
		SessionTimeout: 6 * time.Second,
		Healthy:        func() bool { return healthy },
		Draining:       func() bool { return draining },
		Log:            testr.New(t),
		Now:            func() time.Time { return clock },
	}
	announced := []v1alpha1.ListenerAddress{
		{Name: "internal", Host: "c-broker-1.c-brokers." + ns + ".svc.cluster.local", Port: 9092},
		{Name: "external", Host: "10.1.2.3", Port: 9094},
	}
	hb.Listeners = func() []v1alpha1.ListenerAddress { return announced }
	claims := []v1alpha1.PartitionClaim{{TopicID: "AAAAAAAAAAAAAAAAAAAAAA", Partition: 3, Epoch: 7}}
	hb.Claims = func() []v1alpha1.PartitionClaim { return claims }
	ctx := testCtx(t)
	if err := hb.Beat(ctx); err != nil {
		t.Fatalf("first beat: %v", err)
	}
	l, err := getLease(t, c, ns, 1)
	if err != nil {
		t.Fatal(err)
	}
	kc := &v1alpha1.KafkaCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "c"}, kc); err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		"app.kubernetes.io/name": "paddock", "app.kubernetes.io/instance": "c",
		"kafka.paddock.dev/cluster": "c", "kafka.paddock.dev/broker-id": "1",
	}
	for k, v := range wantLabels {
		if l.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, l.Labels[k], v)
		}
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != kc.UID || l.OwnerReferences[0].Kind != "KafkaCluster" ||
		ptr.Deref(l.OwnerReferences[0].Controller, false) || l.OwnerReferences[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references %+v, want the KafkaCluster, not controller, no blockOwnerDeletion", l.OwnerReferences)
	}
	if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-a" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 6 ||
		ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 || l.Spec.AcquireTime == nil || !l.Spec.RenewTime.Time.Equal(clock) {
		t.Errorf("spec %+v: want holder c-broker-1_uid-a, 6s, transitions 0, acquired and renewed at %s", l.Spec, clock)
	}
	if l.Annotations[v1alpha1.AnnotationHealthy] != "true" || l.Annotations[v1alpha1.AnnotationDraining] != "false" {
		t.Errorf("annotations %v", l.Annotations)
	}
	if got := v1alpha1.ParseListeners(l.Annotations[v1alpha1.AnnotationListeners]); !slices.Equal(got, announced) {
		t.Errorf("the Lease announces listeners %+v, want every listener's advertised address %+v", got, announced)
	}
	if got, want := l.Annotations[v1alpha1.AnnotationClaimed], v1alpha1.FormatClaims(claims); got != want {
		t.Errorf("the Lease announces claims %q, want %q", got, want)
	}

	t.Run("renewed on every beat, same incarnation keeps its epoch", func(t *testing.T) {
		clock = clock.Add(time.Second)
		healthy = false
		if err := hb.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := getLease(t, c, ns, 1)
		if !l.Spec.RenewTime.Time.Equal(clock) || ptr.Deref(l.Spec.LeaseTransitions, -1) != 0 || l.Annotations[v1alpha1.AnnotationHealthy] != "false" {
			t.Fatalf("spec %+v annotations %v", l.Spec, l.Annotations)
		}
	})

	t.Run("a conflicting write is retried", func(t *testing.T) {
		l, _ := getLease(t, c, ns, 1)
		l.Annotations["someone"] = "else" // bumps resourceVersion under the heartbeat's feet
		if err := c.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(time.Second)
		if err := hb.Beat(ctx); err != nil {
			t.Fatalf("beat after a conflicting write: %v", err)
		}
		l, _ = getLease(t, c, ns, 1)
		if !l.Spec.RenewTime.Time.Equal(clock) {
			t.Fatalf("renewTime %v, want %v", l.Spec.RenewTime, clock)
		}
	})

	t.Run("a new incarnation bumps leaseTransitions and acquireTime", func(t *testing.T) {
		clock = clock.Add(time.Minute)
		next := &Heartbeat{
			Client: c, Cluster: "c",
			Identity:       Identity{ID: 1, Pod: "c-broker-1", UID: "uid-b", Namespace: ns},
			Interval:       time.Second,
			SessionTimeout: 6 * time.Second,
			Healthy:        hb.Healthy, Draining: hb.Draining, Log: hb.Log, Now: hb.Now,
		}
		if err := next.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ := getLease(t, c, ns, 1)
		if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-b" || ptr.Deref(l.Spec.LeaseTransitions, -1) != 1 || !l.Spec.AcquireTime.Time.Equal(clock) {
			t.Fatalf("spec %+v: want holder uid-b, transitions 1, acquired at %s", l.Spec, clock)
		}

		// The same pod's container restarted after a crash: same holder, new process.
		clock = clock.Add(time.Minute)
		restarted := &Heartbeat{
			Client: c, Cluster: "c", Identity: next.Identity, Interval: time.Second, SessionTimeout: 6 * time.Second,
			Healthy: hb.Healthy, Draining: hb.Draining, Log: hb.Log, Now: hb.Now,
		}
		if err := restarted.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		l, _ = getLease(t, c, ns, 1)
		if ptr.Deref(l.Spec.HolderIdentity, "") != "c-broker-1_uid-b" || ptr.Deref(l.Spec.LeaseTransitions, -1) != 2 || !l.Spec.AcquireTime.Time.Equal(clock) {
			t.Fatalf("spec %+v: a restarted container must bump the epoch to 2, acquired at %s", l.Spec, clock)
		}
		clock = clock.Add(time.Second)
		if err := restarted.Beat(ctx); err != nil {
			t.Fatal(err)
		}
		if l, _ = getLease(t, c, ns, 1); ptr.Deref(l.Spec.LeaseTransitions, -1) != 2 {
			t.Fatalf("transitions %d after a renewal; the epoch moves only with a new incarnation", ptr.Deref(l.Spec.LeaseTransitions, -1))
		}
	})
}

func TestHeartbeatRunRenewsUntilStopped(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	hb := &Heartbeat{
		Client: c, Cluster: "c",
		Identity: Identity{ID: 0, Pod: "c-broker-0", UID: "u", Namespace: ns},
		Interval: 100 * time.Millisecond, SessionTimeout: 2 * time.Second,
		Healthy: func() bool { return true }, Draining: func() bool { return false },
		Log: testr.New(t),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { hb.Run(ctx); close(done) }()
	var first time.Time
	eventually(t, "the lease to exist", func() bool {
		l, err := getLease(t, c, ns, 0)
		if err == nil {
			first = l.Spec.RenewTime.Time
		}
		return err == nil
	})
	eventually(t, "a renewal", func() bool {
		l, err := getLease(t, c, ns, 0)
		return err == nil && l.Spec.RenewTime.After(first)
	})
	if hb.Age() < 0 || hb.Age() > 5*time.Second {
		t.Fatalf("heartbeat age %s", hb.Age())
	}
	cancel()
	<-done
}

// inProcessBroker runs a Broker over view with a heartbeat against the envtest apiserver.
type inProcessBroker struct {
	b       *Broker
	signals chan os.Signal
	result  chan error
	kafka   string
	health  string
}

func startInProcessBroker(t *testing.T, c client.Client, ns string, view View, drainTimeout, interval time.Duration) *inProcessBroker {
	t.Helper()
	cfg := Config{
		Cluster:     "c",
		Listeners:   []ListenerSpec{{Name: "kafka", Port: int32(freeLoopbackPort(t)), Host: "127.0.0.1"}},
		HealthPort:  freeLoopbackPort(t),
		BindAddress: "127.0.0.1", DrainTimeout: drainTimeout,
		Identity: Identity{ID: 0, Pod: "c-broker-0", UID: "u0", Namespace: ns},
	}
	ib := &inProcessBroker{signals: make(chan os.Signal, 2), result: make(chan error, 1)}
	ib.b = NewBroker(cfg, view, testr.New(t))
	ib.b.Heartbeat = &Heartbeat{
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
	l, err := getLease(t, c, ns, 0)
	return err == nil && l.Annotations[v1alpha1.AnnotationDraining] == "true"
}

func TestDrainWaitsForTheViewToMoveWorkAway(t *testing.T) {
	c := apiServer(t)
	ns := newNamespaceWithCluster(t, c, nil)
	self := v1alpha1.BrokerRow{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}
	view := NewMemoryView(Snapshot{
		Brokers: []v1alpha1.BrokerRow{self},
		Topics:  []Topic{{Name: "t", Partitions: []Partition{{Index: 0, Leader: 0}}}},
	})
	// An hour between loop beats: only the immediate draining beat can write draining=true.
	ib := startInProcessBroker(t, c, ns, view, time.Minute, time.Hour)
	eventually(t, "the first beat", func() bool { _, err := getLease(t, c, ns, 0); return err == nil })
	if leaseDraining(t, c, ns) {
		t.Fatal("lease draining before SIGTERM")
	}

	ib.signals <- syscall.SIGTERM
	eventually(t, "the draining beat", func() bool { return leaseDraining(t, c, ns) })
	ib.stillRunning(t)

	// The registry saw the drain: groups move away, but a partition is still led here.
	self.Health = v1alpha1.BrokerDraining
	view.Set(Snapshot{Brokers: []v1alpha1.BrokerRow{self}, Topics: []Topic{{Name: "t", Partitions: []Partition{{Index: 0, Leader: 0}}}}})
	time.Sleep(200 * time.Millisecond)
	ib.stillRunning(t)

	// The partition moves too: nothing is left here.
	view.Set(Snapshot{Brokers: []v1alpha1.BrokerRow{self}, Topics: []Topic{{Name: "t", Partitions: []Partition{{Index: 0, Leader: 1}}}}})
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
	view := NewMemoryView(Snapshot{Brokers: []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}}})
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
	view := NewMemoryView(Snapshot{Brokers: []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}}})
	ib := startInProcessBroker(t, c, ns, view, time.Hour, time.Second)
	ib.signals <- syscall.SIGTERM
	eventually(t, "the draining beat", func() bool { return leaseDraining(t, c, ns) })
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
	view := NewMemoryView(Snapshot{})
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
	eventually(t, "a heartbeat age", func() bool { _, body := get("/healthz"); return !strings.Contains(body, `"heartbeatAgeSeconds":-1`) })
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
	kubeconfig, err := testEnv.AdminKubeconfig("broker-test")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}

	self := v1alpha1.BrokerRow{ID: 0, Host: "127.0.0.1", State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}
	ns := newNamespaceWithCluster(t, c, []v1alpha1.BrokerRow{self})
	kafkaPort, healthPort := freeLoopbackPort(t), freeLoopbackPort(t)
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

	eventually(t, "/readyz", func() bool {
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
	eventually(t, "a healthy lease", func() bool {
		l, err := getLease(t, c, ns, 0)
		return err == nil && l.Annotations[v1alpha1.AnnotationHealthy] == "true"
	})

	_ = cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, "the draining lease", func() bool { return leaseDraining(t, c, ns) })
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
			var view View = NewMemoryView(Snapshot{})
			if !tc.synced {
				view = &snapshotStore{} // nothing read yet: Synced is false
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
