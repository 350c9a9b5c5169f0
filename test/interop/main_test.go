package interop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/controllers/assignment"
	"github.com/paddock-dev/paddock/controllers/kafkacluster"
	"github.com/paddock-dev/paddock/internal/testenv"
)

const (
	clusterName = "c"
	brokers     = 2
)

// addrs are the Kafka addresses of the package's brokers (broker i at addrs[i]).
var addrs []string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

// run starts the control plane, the manager (assignment and provisioning reconcilers) and
// the shared cluster, runs the tests and stops everything.
func run(m *testing.M) int {
	ctrllog.SetLogger(logr.New(filterSink{LogSink: funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{}).GetSink(),
		verbose: os.Getenv("INTEROP_LOG") == "1"}))
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "interop:", err)
		}
	}()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	managerDone, err := startManager(ctx, env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer func() {
		stop()
		if err := <-managerDone; err != nil {
			fmt.Fprintln(os.Stderr, "interop: manager:", err)
		}
	}()
	dataDir, err := os.MkdirTemp("", "interop-data")
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dataDir) }()
	brokersDone, err := startCluster(ctx, env, dataDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "interop:", err)
		return 1
	}
	code := m.Run()
	stop()
	for range brokers {
		if err := <-brokersDone; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "interop: broker:", err)
			code = 1
		}
	}
	return code
}

func startManager(ctx context.Context, env *testenv.Env) (<-chan error, error) {
	mgr, err := env.NewManager()
	if err != nil {
		return nil, err
	}
	if err := (&assignment.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("assignment")}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	provisioning := &kafkacluster.Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("kafkacluster"),
		Options: kafkacluster.Options{DefaultBrokerImage: "paddock:test"},
	}
	if err := provisioning.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// startCluster creates KafkaCluster c in a fresh namespace, waits for its broker RoleBinding
// and starts the brokers as the broker ServiceAccount, writing their registry rows (standing
// in for the registry reconciler) once they listen. The returned channel gets each broker's
// Run result once ctx ends; it has capacity `brokers`.
func startCluster(ctx context.Context, env *testenv.Env, dataDir string) (chan error, error) {
	ns, err := testenv.NewNamespace(ctx, env.Client, "interop")
	if err != nil {
		return nil, err
	}
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: ns}, Spec: v1alpha1.KafkaClusterSpec{Replicas: brokers}}
	if err := env.Client.Create(ctx, kc); err != nil {
		return nil, err
	}
	if err := poll(ctx, "the broker RoleBinding", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.StatefulSetName(clusterName)}, &rbacv1.RoleBinding{}) == nil
	}); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, v1alpha1.StatefulSetName(clusterName)),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	kube, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	done := make(chan error, brokers)
	var rows []v1alpha1.BrokerRow
	for id := range int32(brokers) {
		addr, err := startBroker(ctx, cfg, env, kube, ns, dataDir, id, done)
		if err != nil {
			return nil, err
		}
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		addrs = append(addrs, addr)
		rows = append(rows, v1alpha1.BrokerRow{ID: id, Host: host, Port: int32(p), State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive, Epoch: 1,
			Listeners: []v1alpha1.ListenerAddress{{Name: "kafka", Host: host, Port: int32(p)}}})
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"brokers": rows,
		"counts": v1alpha1.BrokerCounts{Registered: brokers, Alive: brokers, Serving: brokers}}})
	if err != nil {
		return nil, err
	}
	if err := env.Client.Status().Patch(ctx, kc, client.RawPatch(types.MergePatchType, body)); err != nil {
		return nil, fmt.Errorf("write registry rows: %w", err)
	}
	return done, poll(ctx, "every broker to list every broker", func() bool {
		for _, addr := range addrs {
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				return false
			}
			bm, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			cl.Close()
			if err != nil || len(bm.Brokers) != brokers {
				return false
			}
		}
		return true
	})
}

// startBroker runs broker id in-process until ctx ends and returns its Kafka address.
func startBroker(ctx context.Context, cfg *rest.Config, env *testenv.Env, kube client.Client, ns, dataDir string, id int32, done chan<- error) (string, error) {
	log := brokerLog(id)
	view, err := broker.NewInformerView(cfg, env.Scheme, ns, clusterName, log.WithName("view"))
	if err != nil {
		return "", err
	}
	if err := view.Start(ctx); err != nil {
		return "", fmt.Errorf("start the view of broker %d: %w", id, err)
	}
	kafkaPort, err := freePort()
	if err != nil {
		return "", err
	}
	healthPort, err := freePort()
	if err != nil {
		return "", err
	}
	b := broker.NewBroker(broker.Config{
		Cluster:     clusterName,
		Listeners:   []broker.ListenerSpec{{Name: "kafka", Port: int32(kafkaPort), Host: "127.0.0.1"}},
		HealthPort:  healthPort,
		BindAddress: "127.0.0.1", DrainTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		DataDir:  dataDir,
		Identity: broker.Identity{ID: id, Pod: fmt.Sprintf("c-broker-%d", id), Namespace: ns},
	}, view, log)
	b.Admin = &broker.Admin{Client: kube, Namespace: ns, Cluster: clusterName}
	// Consumer groups start without group.initial.rebalance.delay.ms's 3 s wait.
	b.GroupConfig = func(c *groups.Config) { c.InitialRebalanceDelay = 100 * time.Millisecond }
	listening := make(chan string, 1)
	b.OnListening = func(kafka []net.Addr, _ net.Addr) { listening <- kafka[0].String() }
	result := make(chan error, 1)
	go func() { result <- b.Run(ctx, make(chan os.Signal)) }()
	select {
	case addr := <-listening:
		go func() { done <- <-result }()
		return addr, nil
	case err := <-result:
		return "", fmt.Errorf("broker %d stopped at start: %w", id, err)
	}
}

// brokerLog writes the brokers' errors to stderr (shown when the package fails); Info lines
// only with INTEROP_LOG=1.
func brokerLog(id int32) logr.Logger {
	sink := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{LogTimestamp: true}).GetSink()
	return logr.New(filterSink{LogSink: sink, verbose: os.Getenv("INTEROP_LOG") == "1"}).WithValues("broker", id)
}

// filterSink drops Info lines unless verbose.
type filterSink struct {
	logr.LogSink
	verbose bool
}

func (f filterSink) Enabled(level int) bool { return f.verbose && f.LogSink.Enabled(level) }

func (f filterSink) WithValues(kv ...any) logr.LogSink {
	return filterSink{LogSink: f.LogSink.WithValues(kv...), verbose: f.verbose}
}

func (f filterSink) WithName(name string) logr.LogSink {
	return filterSink{LogSink: f.LogSink.WithName(name), verbose: f.verbose}
}

// poll checks cond every 50 ms until it holds, giving up after 30 s or when ctx ends.
func poll(ctx context.Context, what string, cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// freePort is a free loopback TCP port below 32768 (the ephemeral range above it is where
// clients' outgoing ports come from).
func freePort() (int, error) {
	for range 100 {
		p := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			_ = ln.Close() // only probing that the port is free
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port below 32768")
}
