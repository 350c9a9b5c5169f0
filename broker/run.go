package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/groups"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/broker/wire"
)

// errInterrupted is Run's answer to a second signal during the drain: exit at once.
var errInterrupted = errors.New("second signal during drain; exiting without waiting")

// idleTickPeriod is how often an idle broker proves its request path works (see RunIdleTicks).
const idleTickPeriod = time.Second

// shutdownGrace bounds flushing in-flight answers once the drain is over.
const shutdownGrace = 5 * time.Second

// Broker is one running `paddock broker`: the wire server on every configured listener, the
// health server, the heartbeat and the SIGTERM drain.
type Broker struct {
	Config Config
	// View is the cluster state the broker answers from and drains against.
	View cluster.View
	// Heartbeat renews the Lease; nil runs without one (an in-memory view in tests).
	Heartbeat *cluster.Heartbeat
	// Admin is the broker's write access to its KafkaTopics (admin APIs, the data removal
	// of deleted topics); nil runs without it: admin requests are refused and deleted
	// topics' data is left for another broker.
	Admin *cluster.Admin
	Log   logr.Logger
	// OnListening, when set, is called once every listener is bound, with the Kafka listener
	// addresses in configuration order and the health server's address.
	OnListening func(kafka []net.Addr, health net.Addr)
	// Addresses is where the broker is reachable on each listener (addresses.go); answers,
	// the heartbeat and /readyz read it. NewBroker makes it from the config; WatchAddresses
	// keeps its external listeners' addresses current.
	Addresses *cluster.Addresses
	// StorageFS is the file system the partition logs use (storage.OSFS when nil; tests
	// inject faults through storage.FaultFS).
	StorageFS storage.FS
	// PipelineDepth is the wire server's wire.Server.PipelineDepth (0: the default).
	PipelineDepth int
	// CopyFetchData is the Handler's: Fetch records read into memory and written with the
	// vectored write, never sent from their segment files (benchmarks compare the two).
	CopyFetchData bool
	// Security is what the broker knows of its cluster's certificates, credentials and
	// KafkaUsers; listeners with TLS or authentication need it (nil: they serve no TLS
	// handshake and authenticate nobody).
	Security cluster.Security
	// GroupConfig, when set, adjusts the group coordinator's configuration
	// (groups.DefaultConfig) before it starts: tests shorten the initial rebalance delay.
	GroupConfig func(*groups.Config)
	// TxnConfig, when set, adjusts each transaction coordinator's configuration before it
	// is created: tests shorten the timeout scan.
	TxnConfig func(*txn.Config)
	// IOTimeout bounds every file-system call on the data volume — the partition logs', the
	// producer-id allocator's and the group store's (storage.WatchdogFS): one that has not
	// returned by then (a hung fsync on an NFS hard mount) fails as a storage error.
	// storage.DefaultIOTimeout when zero; negative turns the bound off.
	IOTimeout time.Duration
	// MountInfo reads the mount table the data volume's mount is checked in (the text of
	// /proc/self/mountinfo when nil; tests feed real lines).
	MountInfo func() (string, error)

	liveness       *Liveness
	metrics        *Metrics
	draining       atomic.Bool
	listenersBound atomic.Bool
	// partitions holds the partition logs this broker leads (nil without --data-dir); set by
	// start (run_dataplane.go).
	partitions atomic.Pointer[Partitions]
	// groups is the group coordinator (nil without --data-dir); set by start.
	groups       *Groups
	groupMetrics *groups.Metrics
	txnMetrics   *txn.Metrics
	// txns is the transaction coordinator once started (startTxns).
	txns    atomic.Pointer[Transactions]
	started time.Time // when start ran: the self-fence clock before the first beat
	// mountRefused says why the data volume's mount cannot keep the storage rules (empty
	// when it can, or without --data-dir); set by start, before anything serves.
	mountRefused atomic.Pointer[[]string]
}

// NewBroker returns a broker for cfg answering from view. Set Heartbeat before Run to renew
// the Lease.
func NewBroker(cfg Config, view cluster.View, log logr.Logger) *Broker {
	b := &Broker{Config: cfg, View: view, Log: log, liveness: NewLiveness(nil), Addresses: cluster.NewAddresses(cfg.Cluster, cfg.Listeners, cfg.Identity)}
	b.metrics = NewMetrics(func() float64 {
		if age := b.Heartbeat.Age(); age >= 0 {
			return age.Seconds()
		}
		return -1
	}, b.draining.Load)
	b.groupMetrics = groups.NewMetrics()
	if err := b.groupMetrics.Register(b.metrics.Registry); err != nil {
		panic(fmt.Sprintf("broker: register the group coordinator's metrics: %v", err)) // a fresh registry: a name clash is a bug
	}
	b.txnMetrics = txn.NewMetrics()
	if err := b.txnMetrics.Register(b.metrics.Registry); err != nil {
		panic(fmt.Sprintf("broker: register the transaction coordinator's metrics: %v", err))
	}
	b.metrics.Registry.MustRegister(stateCollector{b})
	return b
}

// Healthy is the heartbeat's healthy bit: the request path ticked within WedgedAfter, and
// the data volume takes writes (no storage failure the volume probe confirms).
func (b *Broker) Healthy() bool {
	return b.liveness.Healthy() && b.partitions.Load().StorageHealthy() && len(b.MountRefused()) == 0
}

// MountRefused says why the data volume's mount cannot keep the storage rules
// (storage.CheckMount), one "option: reason" each; empty when it can. A broker whose mount is
// refused serves no partition and no group, is unhealthy (so its Lease says so and the
// registry moves nothing onto it) and never ready.
func (b *Broker) MountRefused() []string {
	if r := b.mountRefused.Load(); r != nil {
		return *r
	}
	return nil
}

// Draining is the heartbeat's draining bit: true from the first SIGTERM on.
func (b *Broker) Draining() bool { return b.draining.Load() }

// Run serves until the first signal on signals, then drains (docs/dataplane.md, "Drain with data"; drain.go)
// and shuts down: it returns nil after a clean drain, errInterrupted when a second signal cut
// the drain short, the error of a listener that failed, or ctx's error when ctx ended (which
// closes everything without draining).
func (b *Broker) Run(ctx context.Context, signals <-chan os.Signal) error {
	lns, err := b.listen()
	if err != nil {
		return err
	}
	r := b.start(lns)
	defer r.stopBackground()
	if err := b.waitForSignal(ctx, signals, r); err != nil {
		b.closeNow(r)
		return err
	}
	if err := b.drain(ctx, signals); err != nil {
		b.closeNow(r)
		return err
	}
	b.shutdown(r)
	return nil
}

// bound are the sockets of a starting broker: one per Kafka listener, in configuration
// order, and the health port.
type bound struct {
	kafka  []net.Listener
	health net.Listener
}

// listen binds every Kafka listener and the health port, or none of them.
func (b *Broker) listen() (*bound, error) {
	lns := &bound{}
	fail := func(err error) (*bound, error) {
		for _, ln := range lns.kafka {
			_ = ln.Close() // nothing was served on it
		}
		return nil, err
	}
	for _, l := range b.Config.Listeners {
		ln, err := net.Listen("tcp", net.JoinHostPort(b.Config.BindAddress, strconv.Itoa(int(l.Port))))
		if err != nil {
			return fail(fmt.Errorf("listener %s: %w", l.Name, err))
		}
		lns.kafka = append(lns.kafka, ln)
	}
	health, err := net.Listen("tcp", net.JoinHostPort(b.Config.BindAddress, strconv.Itoa(b.Config.HealthPort)))
	if err != nil {
		return fail(fmt.Errorf("health listener: %w", err))
	}
	lns.health = health
	return lns, nil
}

// running is a broker between start and shutdown.
type running struct {
	wire    *wire.Server
	handler *Handler // what wire serves
	health  *http.Server
	// serveErr receives the error of a listener whose Serve ended on its own.
	serveErr chan error
	// stopBackground ends the heartbeat loop, the idle ticks and the data removal of deleted
	// topics, and waits for them: nothing of the broker touches the data directory once Run
	// has returned. They live until Run returns — through the drain, so the draining flag
	// keeps being renewed until the listeners close.
	stopBackground func()
	// stopPartitions ends the partition manager (every log relinquished) and waits for it;
	// nil without one.
	stopPartitions func()
	// stopGroups closes the group coordinator (its waiting requests answered NOT_COORDINATOR)
	// and waits for it; nil without one.
	stopGroups func()
	// stopTxns closes the transaction coordinator (its marker drivers stop; their decisions
	// are durable) and the marker sender's connections; nil without one.
	stopTxns func()
	// tlsPorts are the bound ports of the TLS listeners (the idle probe speaks TLS there).
	tlsPorts map[int]bool
}

// start serves the wire protocol on every Kafka listener and the health endpoints on theirs,
// and starts the heartbeat and the idle liveness ticks.
func (b *Broker) start(lns *bound) *running {
	b.started = time.Now()
	h := &Handler{
		View:         b.View,
		Self:         b.Config.Identity.ID,
		StaticConfig: b.Config.Bounds.Values(),
		Log:          b.Log.WithName("wire"),
		Metrics:      b.metrics,
		Liveness:     b.liveness,
		Admin:        b.Admin,
		SelfFenced:   b.selfFenced,
		// Records read into memory take from the answer budget; the default path sends
		// them from their segment files and takes none.
		AnswerBudget:  wire.NewBudget(orUnbounded(b.Config.Bounds.QueuedMaxResponseBytes)),
		CopyFetchData: b.CopyFetchData,
		Cluster:       b.Config.Cluster,
		Security:      b.Security,
	}
	r := &running{
		wire:     newWireServer(h, b.Config.Bounds, b.PipelineDepth, b.Log.WithName("wire")),
		handler:  h,
		health:   &http.Server{Handler: b.healthHandler(), ReadHeaderTimeout: 5 * time.Second},
		serveErr: make(chan error, len(lns.kafka)+1),
		tlsPorts: map[int]bool{},
	}
	if b.checkMount() {
		b.startPartitions(r)
		b.startGroups(r)
		b.startTxns(r)
	}
	addrs := b.serveKafka(r, lns.kafka)
	go func() {
		if err := r.health.Serve(lns.health); !errors.Is(err, http.ErrServerClosed) {
			r.serveErr <- fmt.Errorf("health server: %w", err)
		}
	}()
	b.listenersBound.Store(true)
	b.startBackground(r)
	if b.OnListening != nil {
		b.OnListening(addrs, lns.health.Addr())
	}
	return r
}

// serveKafka serves the wire protocol on every Kafka listener, each advertising this broker's
// address on it, and returns their addresses in configuration order.
func (b *Broker) serveKafka(r *running, lns []net.Listener) []net.Addr {
	addrs := make([]net.Addr, len(lns))
	for i, ln := range lns {
		l := b.Config.Listeners[i]
		if l.Port == 0 { // an ephemeral port (tests): advertise what was bound
			b.Addresses.Bound(i, int32(ln.Addr().(*net.TCPAddr).Port))
		}
		addrs[i] = ln.Addr()
		if l.TLS {
			r.tlsPorts[ln.Addr().(*net.TCPAddr).Port] = true
			ln = tls.NewListener(ln, b.tlsConfig(l))
		}
		go func() { r.serveErr <- r.wire.Serve(advertiseListener(ln, l, b.Addresses)) }()
		advertised := "none yet"
		if a, ok := b.Addresses.Get(l.Name); ok {
			advertised = net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
		}
		b.Log.Info("Listening", "listener", l.Name, "type", l.Type, "addr", ln.Addr().String(), "advertised", advertised,
			"tls", l.TLS, "authentication", string(l.Authentication))
	}
	return addrs
}

// startBackground starts what lives until Run returns: the idle liveness ticks, the
// heartbeat and, with API access, the data removal of deleted topics.
func (b *Broker) startBackground(r *running) {
	bg, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	r.stopBackground = func() {
		stop()
		wg.Wait()
	}
	wg.Go(func() { RunIdleTicks(bg, r.wire, idleTickPeriod, b.Log.WithName("wire"), b.probeTLS(r.tlsPorts)) })
	if b.Heartbeat != nil {
		b.Heartbeat.Listeners = b.Addresses.Known
		b.Heartbeat.Claims = b.Claims
		b.Heartbeat.Failed = b.Failed
		b.Heartbeat.Uncleanable = b.Uncleanable
		b.Heartbeat.MountRefused = b.MountRefused
		b.Heartbeat.Groups = b.GroupCounts
		b.Heartbeat.OngoingTransactions = b.OngoingTransactions
		wg.Go(func() { b.Heartbeat.Run(bg) })
	}
	if b.Admin != nil {
		remover := &dataRemover{view: b.View, admin: b.Admin, self: b.Config.Identity.ID,
			dataDir: b.Config.DataDir, fs: storage.OSFS{}, log: b.Log.WithName("topic-removal")}
		wg.Go(func() { remover.run(bg) })
	}
}

// waitForSignal returns nil at the first signal, the error of a listener that stopped on its
// own, or ctx's error.
func (b *Broker) waitForSignal(ctx context.Context, signals <-chan os.Signal, r *running) error {
	select {
	case sig := <-signals:
		b.Log.Info("Draining", "signal", sig.String(), "drainTimeout", b.Config.DrainTimeout)
		return nil
	case err := <-r.serveErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeNow closes every listener and connection at once, without flushing.
func (b *Broker) closeNow(r *running) {
	b.listenersBound.Store(false)
	_ = r.wire.Close() // always nil
	r.handler.Close()
	_ = r.health.Close() // the probes' connections carry nothing worth keeping
	b.stopTxns(r)
	b.stopGroups(r)
	b.stopPartitions(r)
}

// shutdown closes the listeners after a drain: answers in flight are flushed for up to
// shutdownGrace, then connections are closed hard.
func (b *Broker) shutdown(r *running) {
	b.listenersBound.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	// The coordinator first: a JoinGroup still waiting (a drain that timed out) is answered
	// NOT_COORDINATOR now, so the client looks for the new coordinator instead of holding
	// its connection until the grace ends. The transaction coordinator with it: its marker
	// drivers stop while the partitions are still served (a decision left unfinished is
	// durable and finished by the next coordinator).
	b.stopTxns(r)
	b.stopGroups(r)
	if err := r.wire.Shutdown(ctx); err != nil {
		b.Log.Info("Connections closed hard after the shutdown grace", "reason", err.Error())
	}
	r.handler.Close() // the background auto-creations: no request is left to start one
	b.stopPartitions(r)
	if err := r.health.Shutdown(ctx); err != nil {
		b.Log.Info("Health server closed hard after the shutdown grace", "reason", err.Error())
	}
	b.Log.Info("Listeners closed; exiting")
}
