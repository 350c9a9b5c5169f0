package topics

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

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/internal/testenv"
)

const clusterName = "c"

// cluster is one test's KafkaCluster "c" in its own namespace, with n in-process brokers
// sharing one data directory (the shared volume).
type cluster struct {
	t       *testing.T
	ns      string
	addrs   []string // broker i's Kafka address
	dataDir string
	rows    []v1alpha1.BrokerRow
}

// newCluster creates the cluster with spec.config, waits for the provisioning reconciler to
// write the broker Role and RoleBinding, and starts n brokers that reach the API server as the
// broker ServiceAccount; their registry rows say Serving and Alive.
func newCluster(t *testing.T, n int, clusterConfig map[string]string) *cluster {
	t.Helper()
	ctx := testCtx(t)
	ns, err := testenv.NewNamespace(ctx, env.Client, "topics")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) // best effort; envtest stops anyway
	})
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: ns},
		Spec: v1alpha1.KafkaClusterSpec{Replicas: int32(n), Config: clusterConfig}}
	if err := env.Client.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the broker RoleBinding", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v1alpha1.StatefulSetName(clusterName)}, &rbacv1.RoleBinding{}) == nil
	})

	c := &cluster{t: t, ns: ns, dataDir: t.TempDir()}
	brokerCfg := brokerIdentity(ns)
	kube, err := client.New(brokerCfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for i := range int32(n) {
		addr := c.startBroker(t, brokerCfg, kube, i)
		host, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		c.addrs = append(c.addrs, addr)
		c.rows = append(c.rows, v1alpha1.BrokerRow{ID: i, Host: host, Port: int32(p), State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive, Epoch: 1,
			Listeners: []v1alpha1.ListenerAddress{{Name: "kafka", Host: host, Port: int32(p)}}})
	}
	c.setRows()
	for id := range n {
		eventually(t, fmt.Sprintf("broker %d to list every broker", id), func() bool {
			return len(c.metadataOn(ctx, id).Brokers) == n
		})
	}
	return c
}

// brokerIdentity is a rest config that acts as the brokers' ServiceAccount c-broker.
func brokerIdentity(ns string) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", ns, v1alpha1.StatefulSetName(clusterName)),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	return cfg
}

// startBroker runs broker id in-process until the test ends and returns its Kafka address.
func (c *cluster) startBroker(t *testing.T, cfg *rest.Config, kube client.Client, id int32) string {
	t.Helper()
	view, err := broker.NewInformerView(cfg, env.Scheme, c.ns, clusterName, testr.New(t).WithName("view"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := view.Start(ctx); err != nil {
		cancel()
		t.Fatalf("start the view of broker %d: %v", id, err)
	}
	bc := broker.Config{
		Cluster:     clusterName,
		Listeners:   []broker.ListenerSpec{{Name: "kafka", Port: int32(freePort(t)), Host: "127.0.0.1"}},
		HealthPort:  freePort(t),
		BindAddress: "127.0.0.1", DrainTimeout: time.Second, HeartbeatInterval: 100 * time.Millisecond,
		DataDir:  c.dataDir,
		Identity: broker.Identity{ID: id, Pod: fmt.Sprintf("c-broker-%d", id), Namespace: c.ns},
	}
	b := broker.NewBroker(bc, view, testr.New(t).WithValues("broker", id))
	b.Admin = &broker.Admin{Client: kube, Namespace: c.ns, Cluster: clusterName}
	listening := make(chan string, 1)
	b.OnListening = func(kafka []net.Addr, _ net.Addr) { listening <- kafka[0].String() }
	result := make(chan error, 1)
	go func() { result <- b.Run(ctx, make(chan os.Signal)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-result; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("broker %d stopped: %v", id, err)
		}
	})
	select {
	case addr := <-listening:
		return addr
	case err := <-result:
		t.Fatalf("broker %d stopped at start: %v", id, err)
	}
	return ""
}

// setRows writes the cluster's registry rows (status.brokers and counts), standing in for
// the registry reconciler.
func (c *cluster) setRows() {
	c.t.Helper()
	counts := v1alpha1.BrokerCounts{Registered: int32(len(c.rows))}
	for _, r := range c.rows {
		if r.Health == v1alpha1.BrokerAlive {
			counts.Alive++
		} else {
			counts.Dead++
		}
		if r.State == v1alpha1.BrokerServing {
			counts.Serving++
		} else {
			counts.Fenced++
		}
	}
	body, err := json.Marshal(map[string]any{"status": map[string]any{"brokers": c.rows, "counts": counts}})
	if err != nil {
		c.t.Fatal(err)
	}
	kc := &v1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: clusterName}}
	if err := env.Client.Status().Patch(context.Background(), kc, client.RawPatch(types.MergePatchType, body)); err != nil {
		c.t.Fatalf("write registry rows: %v", err)
	}
}

// kgo is a client seeded with every broker.
func (c *cluster) kgo(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...)}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// metadataOn asks broker id alone (a raw request to its address, not routed by a client) for
// the Metadata of topics (nil: all). Admin requests go to the controller, broker 0, and wait
// for its view; the other brokers' views follow a moment later, as in Kafka.
func (c *cluster) metadataOn(ctx context.Context, id int, topics ...string) *kmsg.MetadataResponse {
	c.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.addrs[id]))
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		c.t.Fatalf("metadata from broker %d: %v", id, err)
	}
	return resp.(*kmsg.MetadataResponse)
}

// topicsOn is the names of the topics broker id serves.
func (c *cluster) topicsOn(ctx context.Context, id int) []string {
	c.t.Helper()
	var names []string
	for _, t := range c.metadataOn(ctx, id).Topics {
		names = append(names, *t.Topic)
	}
	return names
}

// leadersOn is topic's leader by partition as broker id answers (-1 for a partition with an
// error), and the topic's error code.
func (c *cluster) leadersOn(ctx context.Context, id int, topic string) (map[int32]int32, int16) {
	c.t.Helper()
	mt := c.metadataOn(ctx, id, topic).Topics[0]
	out := map[int32]int32{}
	for _, p := range mt.Partitions {
		out[p.Partition] = p.Leader
		if p.ErrorCode != 0 {
			out[p.Partition] = -1
		}
	}
	return out, mt.ErrorCode
}

// kadm is an admin client seeded with every broker.
func (c *cluster) kadm(opts ...kgo.Opt) *kadm.Client { return kadm.NewClient(c.kgo(opts...)) }

// topicObject reads the KafkaTopic of Kafka name name (nil when there is none).
func (c *cluster) topicObject(name string) *v1alpha1.KafkaTopic {
	c.t.Helper()
	list := &v1alpha1.KafkaTopicList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(c.ns)); err != nil {
		c.t.Fatal(err)
	}
	for i := range list.Items {
		kt := &list.Items[i]
		if kt.Spec.TopicName == name || kt.Spec.TopicName == "" && kt.Name == name {
			return kt
		}
	}
	return nil
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond every 50 ms until it holds, failing the test after 20 s.
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

// freePort is a free loopback TCP port below 32768 (the ephemeral range above it is where
// clients' outgoing ports come from).
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		p := 20000 + rand.IntN(12000)
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			_ = ln.Close() // only probing that the port is free
			return p
		}
	}
	t.Fatal("no free loopback port below 32768")
	return 0
}

// kgoMaxVersion pins the version kgo uses for key.
func kgoMaxVersion(key int16, v int16) kgo.Opt {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(key, v)
	return kgo.MaxVersions(versions)
}

// clusterID is the cluster's status.clusterID, once the provisioning reconciler minted it.
func (c *cluster) clusterID() string {
	c.t.Helper()
	var id string
	eventually(c.t, "the cluster id", func() bool {
		kc := &v1alpha1.KafkaCluster{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: c.ns, Name: clusterName}, kc); err != nil {
			return false
		}
		id = kc.Status.ClusterID
		return id != ""
	})
	return id
}
