package broker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
)

// Main runs `paddock broker` with args and returns the process exit code: 0 after a clean
// drain (or --help), 2 for bad flags or environment, 1 for any other failure or a second
// signal during the drain.
func Main(args []string) int {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	defer signal.Stop(signals)
	return run(args, os.Getenv, os.Stderr, signals)
}

// usage is the text of `paddock broker --help` before the flags. The Kafka APIs it lists are
// the handler table's (servedAPIs), so the help cannot drift from what is served.
func usage() string {
	return `Usage: paddock broker [flags]

Runs one paddock broker: a Kafka-wire-compatible server answering from its KafkaCluster's
registry and KafkaTopics, which it watches through informers; it takes over the partitions
they give it on the shared volume --data-dir and serves their logs, coordinates the consumer
groups the coordinator rule gives it (their committed offsets on the same volume), writes
KafkaTopics for the admin APIs, and, as the lowest-id alive broker, removes deleted topics'
data from --data-dir; it renews a heartbeat Lease <cluster>-broker-<id> and serves /healthz,
/readyz and /metrics on --health-port.
SIGTERM or SIGINT starts a drain: a draining heartbeat at once, serving until the registry
moves this broker's partitions and groups away and every partition log is relinquished (or
--drain-timeout), then exit 0. A second signal exits at once.

Kafka APIs served (versions):
` + wrap(servedAPIs(), 90, "  ") + `

Environment (downward API): POD_NAME (<cluster>-broker-<id>; the id is that ordinal, read
as the registry reads it), POD_NAMESPACE, POD_UID, POD_IP (PodIP listeners), NODE_NAME.
Kubernetes access: in-cluster config, or $KUBECONFIG when set. Every flag defaults to its PADDOCK_<FLAG> variable; flags win.

Flags:
`
}

// wrap joins words with ", " into lines of at most width characters, each after indent.
func wrap(words []string, width int, indent string) string {
	var b strings.Builder
	line := indent
	for i, w := range words {
		if i < len(words)-1 {
			w += ","
		}
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	b.WriteString(line)
	return b.String()
}

func run(args []string, getenv func(string) string, stderr io.Writer, signals <-chan os.Signal) int {
	var cfg Config
	var lists listFlags
	fs, envErrs := newFlagSet(&cfg, &lists, getenv)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "paddock broker: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if err := parseConfig(&cfg, lists, *envErrs, getenv); err != nil {
		fmt.Fprintf(stderr, "paddock broker: %v\n", err)
		return 2
	}
	log, sync, err := newLogger(cfg.LogLevel)
	if err != nil {
		fmt.Fprintf(stderr, "paddock broker: %v\n", err)
		return 2
	}
	defer sync()
	log = log.WithValues("cluster", cfg.Cluster, "broker", cfg.Identity.ID)

	if err := runWithCluster(cfg, log, signals); err != nil {
		log.Error(err, "Broker stopped")
		return 1
	}
	return 0
}

// runWithCluster connects to the API server, starts the informer view and runs the broker.
func runWithCluster(cfg Config, log logr.Logger, signals <-chan os.Signal) error {
	conn, err := cluster.Connect(log.WithName("client"))
	if err != nil {
		return err
	}
	view, err := conn.InformerView(cfg.Identity.Namespace, cfg.Cluster, log.WithName("view"))
	if err != nil {
		return err
	}

	// The informers live as long as the process; a signal before they sync ends the start.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan error, 1)
	go func() { synced <- view.Start(ctx) }()
	select {
	case err := <-synced:
		if err != nil {
			return err
		}
	case sig := <-signals:
		log.Info("Signal before the cluster view synced; exiting", "signal", sig.String())
		return nil
	}

	b := NewBroker(cfg, view, log)
	if fsys, follow := devStorageFaults(storage.OSFS{}, log.WithName("faults")); follow != nil {
		b.StorageFS = fsys
		go follow(ctx)
	}
	if cfg.Secured() {
		sec, err := conn.InformerSecurity(cfg.Identity.Namespace, cfg.Cluster, cfg.Identity.ID, log.WithName("security"))
		if err != nil {
			return err
		}
		if err := sec.Start(ctx); err != nil {
			return err
		}
		b.Security = sec
	}
	b.Admin = &cluster.Admin{Client: conn.Client, Namespace: cfg.Identity.Namespace, Cluster: cfg.Cluster}
	if b.Addresses.NeedsWatch() {
		if err := conn.WatchAddresses(ctx, b.Addresses, log.WithName("addresses")); err != nil {
			return err
		}
	}
	b.Heartbeat = &cluster.Heartbeat{
		Client:         conn.Client,
		Cluster:        cfg.Cluster,
		Identity:       cfg.Identity,
		Interval:       cfg.HeartbeatInterval,
		SessionTimeout: cfg.SessionTimeout,
		Healthy:        b.Healthy,
		Draining:       b.Draining,
		Log:            log.WithName("heartbeat"),
	}
	return b.Run(ctx, signals)
}

func newLogger(level string) (logr.Logger, func(), error) {
	var lvl zapcore.Level
	switch level {
	case "debug":
		lvl = zapcore.DebugLevel
	case "info":
		lvl = zapcore.InfoLevel
	case "error":
		lvl = zapcore.ErrorLevel
	default:
		return logr.Discard(), nil, fmt.Errorf("--log-level %q: want debug, info or error", level)
	}
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(lvl)
	zc.EncoderConfig.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	zc.Sampling = nil
	zl, err := zc.Build()
	if err != nil {
		return logr.Discard(), nil, err
	}
	return zapr.NewLogger(zl), func() { _ = zl.Sync() }, nil
}
