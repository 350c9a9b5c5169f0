// Package brokertest runs paddock brokers in-process for tests and benchmarks: real
// broker.Broker processes-in-miniature (wire server, partition manager, storage on one
// shared data directory, health server, SIGTERM drain), each answering from its own
// in-memory view, with the test playing the operator — registry rows, topic creation and
// partition placement through the real balancer (internal/balance), moves at a new leader
// epoch, drains. Any Kafka client can be pointed at Addrs.
//
// It never talks to a Kubernetes API server and must never be imported by non-test code.
package brokertest

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/balance"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// ClusterID is the cluster id every harness cluster uses (the data lives under
// <DataDir>/<ClusterID>/).
const ClusterID = "cZ4mKx7zQd2cWq0b3nT9fA"

// Options configure a Cluster. Zero values take the defaults.
type Options struct {
	// Brokers is how many brokers to run (default 1), ids 0..Brokers-1.
	Brokers int
	// DataDir is the shared data volume (default t.TempDir()).
	DataDir string
	// ClusterConfig is the KafkaCluster spec.config every view carries.
	ClusterConfig map[string]string
	// DrainTimeout is each broker's --drain-timeout (default 20 s).
	DrainTimeout time.Duration
	// StorageFS, when set, gives broker id its storage file system (fault injection with
	// storage.FaultFS).
	StorageFS func(id int32) storage.FS
	// IOTimeout is every broker's Broker.IOTimeout (0: storage.DefaultIOTimeout).
	IOTimeout time.Duration
	// PipelineDepth is every broker's Broker.PipelineDepth (0: the default; negative: no
	// pipelining, for comparisons).
	PipelineDepth int
	// Bounds, when set, adjusts every broker's resource bounds (broker.DefaultBounds).
	Bounds func(*broker.Bounds)
	// CopyFetchData is every broker's Broker.CopyFetchData: Fetch records through memory and
	// the vectored write instead of sendfile.
	CopyFetchData bool
	// GroupConfig, when set, is every broker's Broker.GroupConfig (tests shorten the group
	// coordinator's initial rebalance delay).
	GroupConfig func(*groups.Config)
	// MetricsPartitionLimit is the brokers' --metrics-partition-limit (0: the default).
	MetricsPartitionLimit int
	// Log receives the brokers' logs (default testr on t; logr.Discard() for benchmarks).
	Log *logr.Logger
	// Secured, when set, serves the listener over TLS, with SCRAM or PLAIN when it says
	// (secured.go); clients then need ClientTLS.
	Secured *Secured
}

// Cluster is a running harness cluster. Its methods are safe for concurrent use; they fail
// the test (t.Fatal) on harness errors, so call them from the test goroutine.
type Cluster struct {
	t       testing.TB
	opts    Options
	DataDir string

	mu      sync.Mutex
	brokers []*Broker
	rows    []v1alpha1.BrokerRow
	topics  []cluster.Topic // the operator's truth, published to every view not lagging
	// deleting are the topics DeleteTopic removed, published as being deleted.
	deleting []cluster.DeletingTopic
	// security is every broker's security state and ClientTLS a client configuration that
	// trusts its CA, with Options.Secured; nil otherwise.
	security  *cluster.MemorySecurity
	ClientTLS *tls.Config
	// coordinatorEpoch and coordinatorBrokers are status.coordinatorEpoch and
	// status.coordinatorBrokers as the assignment reconciler keeps them: bumped whenever
	// the registered or alive set changes, and when a registered broker restarts.
	coordinatorEpoch   int64
	coordinatorBrokers *v1alpha1.CoordinatorBrokers
}

// Broker is one in-process broker of a Cluster.
type Broker struct {
	ID int32
	// Addr is its Kafka listener (127.0.0.1:port, below 32768), HealthAddr its /healthz,
	// /readyz and /metrics server.
	Addr, HealthAddr string
	// B is the running broker; View the in-memory view it answers from.
	B    *broker.Broker
	View *cluster.MemoryView

	signals chan os.Signal
	result  chan error
	exited  chan struct{}
	err     error // Run's result, once exited is closed
	lagging bool  // guarded by the Cluster's mu: its view is not updated
	cancel  context.CancelFunc
}

// Start runs opts.Brokers brokers until the test ends and waits until each answers.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Brokers <= 0 {
		opts.Brokers = 1
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.DrainTimeout == 0 {
		opts.DrainTimeout = 20 * time.Second
	}
	c := &Cluster{t: t, opts: opts, DataDir: opts.DataDir}
	if opts.Secured != nil {
		state, clientTLS := c.securedState()
		c.security, c.ClientTLS = &cluster.MemorySecurity{}, clientTLS
		c.security.Set(state)
	}
	for i := range int32(opts.Brokers) {
		c.startBroker(i)
	}
	c.mu.Lock()
	c.publishLocked()
	c.mu.Unlock()
	return c
}

func (c *Cluster) logger(id int32) logr.Logger {
	if c.opts.Log != nil {
		return c.opts.Log.WithValues("broker", id)
	}
	if t, ok := c.t.(*testing.T); ok {
		return testr.New(t).WithValues("broker", id)
	}
	return logr.Discard()
}

func (c *Cluster) startBroker(id int32) {
	c.t.Helper()
	// Broker.Run binds its own listeners: free ports, handed over just before.
	kafkaPort, healthPort := testkit.FreePort(c.t), testkit.FreePort(c.t)
	cfg := broker.Config{
		Cluster:               "c",
		Listeners:             []cluster.ListenerSpec{c.listener(kafkaPort)},
		HealthPort:            healthPort,
		HeartbeatInterval:     100 * time.Millisecond,
		SessionTimeout:        6 * time.Second,
		DrainTimeout:          c.opts.DrainTimeout,
		DataDir:               c.DataDir,
		BindAddress:           "127.0.0.1",
		Bounds:                broker.DefaultBounds(),
		MetricsPartitionLimit: c.opts.MetricsPartitionLimit,
		Identity:              cluster.Identity{ID: id, Pod: "c-broker-" + strconv.Itoa(int(id)), Namespace: "brokertest"},
	}
	view := cluster.NewMemoryView(cluster.Snapshot{})
	b := broker.NewBroker(cfg, view, c.logger(id))
	if c.opts.StorageFS != nil {
		b.StorageFS = c.opts.StorageFS(id)
	}
	if c.opts.Bounds != nil {
		c.opts.Bounds(&b.Config.Bounds)
	}
	b.PipelineDepth = c.opts.PipelineDepth
	b.CopyFetchData = c.opts.CopyFetchData
	b.IOTimeout = c.opts.IOTimeout
	b.GroupConfig = c.opts.GroupConfig
	if c.security != nil {
		b.Security = c.security
	}
	hb := &Broker{ID: id, B: b, View: view, signals: make(chan os.Signal, 2), result: make(chan error, 1), exited: make(chan struct{})}
	listening := make(chan struct{})
	b.OnListening = func(kafka []net.Addr, health net.Addr) {
		hb.Addr, hb.HealthAddr = kafka[0].String(), health.String()
		close(listening)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hb.cancel = cancel
	go func() {
		hb.err = b.Run(ctx, hb.signals)
		close(hb.exited)
	}()
	select {
	case <-listening:
	case <-hb.exited:
		c.t.Fatalf("broker %d stopped at start: %v", id, hb.err)
	}
	c.t.Cleanup(func() {
		cancel()
		<-hb.exited
	})
	host, portStr, _ := net.SplitHostPort(hb.Addr)
	port, _ := strconv.Atoi(portStr)
	c.mu.Lock()
	c.brokers = append(c.brokers, hb)
	c.rows = append(c.rows, v1alpha1.BrokerRow{ID: id, Host: host, Port: int32(port), State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive, Epoch: 1,
		Listeners: []v1alpha1.ListenerAddress{{Name: "kafka", Host: host, Port: int32(port)}}})
	c.mu.Unlock()
}

// listener is every broker's one listener, kafka, on port: secured as Options.Secured says.
func (c *Cluster) listener(port int) cluster.ListenerSpec {
	l := cluster.ListenerSpec{Name: "kafka", Port: int32(port), Host: "127.0.0.1"}
	if s := c.opts.Secured; s != nil {
		l.TLS, l.Authentication = true, s.Authentication
	}
	return l
}

// Addrs are the brokers' Kafka addresses, by id.
func (c *Cluster) Addrs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.brokers))
	for i, b := range c.brokers {
		out[i] = b.Addr
	}
	return out
}

// Broker returns broker id.
func (c *Cluster) Broker(id int32) *Broker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id]
}

// publishLocked puts the operator's truth into every view that is not lagging.
func (c *Cluster) publishLocked() {
	var now v1alpha1.CoordinatorBrokers
	for _, r := range c.rows {
		now.Registered = append(now.Registered, r.ID)
		if r.Health == v1alpha1.BrokerAlive {
			now.Alive = append(now.Alive, r.ID)
			now.AliveEpochs = append(now.AliveEpochs, r.Epoch)
		}
	}
	if c.coordinatorBrokers == nil || !slices.Equal(now.Registered, c.coordinatorBrokers.Registered) ||
		!slices.Equal(now.Alive, c.coordinatorBrokers.Alive) || !slices.Equal(now.AliveEpochs, c.coordinatorBrokers.AliveEpochs) {
		c.coordinatorEpoch++
		c.coordinatorBrokers = &now
	}
	s := cluster.Snapshot{ClusterID: ClusterID, Brokers: c.rows, ConfigMap: c.opts.ClusterConfig, Topics: c.topics, Deleting: c.deleting,
		CoordinatorEpoch: c.coordinatorEpoch, CoordinatorBrokers: c.coordinatorBrokers}
	for _, b := range c.brokers {
		if !b.lagging {
			b.View.Set(s)
		}
	}
}

// SetClusterConfig replaces the KafkaCluster spec.config every view carries, as an edit of
// the cluster's spec would, and publishes it.
func (c *Cluster) SetClusterConfig(cfg map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.opts.ClusterConfig = cfg
	c.publishLocked()
}

// Lag stops (true) or resumes (false) updating broker id's view: a lagging broker keeps
// acting on the state it last saw, as a broker whose informer is behind, or that is cut off
// from the API server, does. Resuming publishes the current state to it.
func (c *Cluster) Lag(id int32, lag bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.brokers[id].lagging = lag
	c.publishLocked()
}

// CreateTopic adds a topic with a fresh topic id, places its partitions with the real
// balancer over the alive brokers (epoch 1), publishes it, and waits until every leader
// has taken its partitions over. It returns the topic as the views hold it.
func (c *Cluster) CreateTopic(name string, partitions int32, config map[string]string) cluster.Topic {
	c.t.Helper()
	var id [16]byte
	if _, err := crand.Read(id[:]); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.topics = append(c.topics, cluster.Topic{Name: name, ID: id, Object: name, ConfigMap: config, Partitions: unassigned(partitions)})
	c.rebalanceLocked()
	c.publishLocked()
	c.mu.Unlock()
	c.WaitServed()
	return c.Topic(name)
}

// DeleteTopic stops serving topic name and lists it as being deleted (with its data
// finalizer to remove), as the view shows a KafkaTopic the assignment reconciler has
// unassigned. It does not wait.
func (c *Cluster) DeleteTopic(name string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.topics {
		if t.Name == name {
			c.topics = slices.Delete(slices.Clone(c.topics), i, i+1)
			c.deleting = append(c.deleting, cluster.DeletingTopic{Object: t.Object, Name: t.Name, ID: t.ID,
				Partitions: int32(len(t.Partitions)), AwaitsDataRemoval: true})
			c.publishLocked()
			return
		}
	}
	c.t.Fatalf("no topic %q", name)
}

// TopicID renders id as KafkaTopic status.topicID does.
func TopicID(id [16]byte) string { return v1alpha1.KafkaUUID(id).String() }

func unassigned(n int32) []cluster.Partition {
	ps := make([]cluster.Partition, n)
	for i := range ps {
		ps[i] = cluster.Partition{Index: int32(i), Leader: -1}
	}
	return ps
}

// rebalanceLocked places every partition with internal/balance over the brokers whose row
// is Alive, as the assignment reconciler does.
func (c *Cluster) rebalanceLocked() {
	c.t.Helper()
	in := balance.Input{}
	for _, r := range c.rows {
		if r.Health == v1alpha1.BrokerAlive {
			in.Alive = append(in.Alive, balance.Broker{ID: r.ID, Incarnation: r.Epoch})
		}
	}
	for _, t := range c.topics {
		bt := balance.Topic{Key: t.Name, Partitions: int32(len(t.Partitions))}
		for _, p := range t.Partitions {
			if p.Leader >= 0 {
				bt.Current = append(bt.Current, balance.Partition{Index: p.Index, Leader: p.Leader, Epoch: p.LeaderEpoch, Incarnation: c.rows[p.Leader].Epoch})
			}
		}
		in.Topics = append(in.Topics, bt)
	}
	res, err := balance.Assign(in)
	if err != nil {
		c.t.Fatalf("balance: %v", err)
	}
	for i := range c.topics {
		a, ok := res.Topic(c.topics[i].Name)
		if !ok {
			continue
		}
		ps := make([]cluster.Partition, len(a.Partitions))
		for j, p := range a.Partitions {
			ps[j] = cluster.Partition{Index: p.Index, Leader: p.Leader, LeaderEpoch: p.Epoch}
		}
		c.topics[i].Partitions = ps
	}
}

// Topic is topic name as the operator last placed it.
func (c *Cluster) Topic(name string) cluster.Topic {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.topics {
		if t.Name == name {
			t.Partitions = slices.Clone(t.Partitions)
			return t
		}
	}
	c.t.Fatalf("no topic %q", name)
	return cluster.Topic{}
}

// Leader is the leader and epoch of topic's partition as the operator last placed it.
func (c *Cluster) Leader(topic string, partition int32) (id, epoch int32) {
	p := c.Topic(topic).Partitions[partition]
	return p.Leader, p.LeaderEpoch
}

// Move gives topic's partition to broker to at the next leader epoch and publishes it (to
// the views that are not lagging). It returns the new epoch; it does not wait.
func (c *Cluster) Move(topic string, partition, to int32) int32 {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.topics {
		if c.topics[i].Name != topic {
			continue
		}
		ps := slices.Clone(c.topics[i].Partitions)
		ps[partition].Leader = to
		ps[partition].LeaderEpoch++
		c.topics[i].Partitions = ps
		c.publishLocked()
		return ps[partition].LeaderEpoch
	}
	c.t.Fatalf("no topic %q", topic)
	return 0
}

// WaitServed waits until every broker still running has acted on its current view and taken
// over every partition it gives it (Broker.CaughtUp), and is ready (/readyz).
func (c *Cluster) WaitServed() {
	c.t.Helper()
	c.mu.Lock()
	bs := slices.Clone(c.brokers)
	c.mu.Unlock()
	for _, b := range bs {
		if b.Exited() {
			continue
		}
		testkit.Eventually(c.t, fmt.Sprintf("broker %d ready (every assigned partition taken over)", b.ID), func() bool {
			return b.Exited() || b.B.CaughtUp() && b.Ready()
		})
	}
}

// Ready is the broker's /readyz answer.
func (b *Broker) Ready() bool {
	resp, err := http.Get("http://" + b.HealthAddr + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Exited reports whether the broker's Run has returned.
func (b *Broker) Exited() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for the broker's Run to return and gives its result.
func (b *Broker) Wait(timeout time.Duration) (error, bool) {
	select {
	case <-b.exited:
		return b.err, true
	case <-time.After(timeout):
		return nil, false
	}
}

// Drain plays a SIGTERM and the operator's answer to it: the broker gets SIGTERM, its
// registry row turns Draining (it leaves the alive set), and the balancer moves its
// partitions to the alive brokers at the next epoch. It does not wait for the broker to exit
// (Wait does).
func (c *Cluster) Drain(id int32) {
	c.t.Helper()
	b := c.Broker(id)
	b.signals <- syscall.SIGTERM
	testkit.Eventually(c.t, fmt.Sprintf("broker %d draining", id), b.B.Draining)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rows[id].Health = v1alpha1.BrokerDraining
	c.rebalanceLocked()
	c.publishLocked()
}

// ErrNoAnswer is returned by Request when the broker closed the connection instead of
// answering.
var ErrNoAnswer = errors.New("connection closed without an answer")
