package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/paddock-dev/paddock/controllers"
	"github.com/paddock-dev/paddock/internal/scheme"
)

// managerFlags are the command-line settings of `paddock manager`.
type managerFlags struct {
	metricsAddr             string
	probeAddr               string
	leaderElect             bool
	leaderElectionID        string
	leaderElectionNamespace string
	namespaces              namespaceList
	defaultBrokerImage      string
	zap                     zap.Options
}

// namespaceList is a repeatable, comma-separated --namespace flag.
type namespaceList []string

func (l *namespaceList) String() string { return strings.Join(*l, ",") }

func (l *namespaceList) Set(v string) error {
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			*l = append(*l, ns)
		}
	}
	return nil
}

// newManagerFlagSet declares every flag of `paddock manager` on a fresh FlagSet, including
// controller-runtime's --kubeconfig and the --zap-* logging flags.
func newManagerFlagSet(f *managerFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("paddock manager", flag.ContinueOnError)
	fs.StringVar(&f.metricsAddr, "metrics-bind-address", ":8080",
		`Address the Prometheus /metrics endpoint listens on; "0" disables it.`)
	fs.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081",
		`Address the /healthz and /readyz probes listen on; "0" disables them.`)
	fs.BoolVar(&f.leaderElect, "leader-elect", false,
		"Elect a leader through a Lease, so only one of several manager replicas reconciles at a time.")
	fs.StringVar(&f.leaderElectionID, "leader-election-id", "paddock-manager.kafka.paddock.dev",
		"Name of the leader election Lease.")
	fs.StringVar(&f.leaderElectionNamespace, "leader-election-namespace", "",
		"Namespace of the leader election Lease. Defaults to the manager's own namespace in a cluster; required with --leader-elect outside one.")
	fs.Var(&f.namespaces, "namespace",
		"Namespace whose KafkaClusters the manager watches; repeat the flag or give a comma-separated list. Empty watches every namespace.")
	fs.StringVar(&f.defaultBrokerImage, "default-broker-image", "",
		"Image of the brokers of a KafkaCluster that sets no spec.image; the manager Deployment passes its own image.")
	config.RegisterFlags(fs) // --kubeconfig; without it $KUBECONFIG, then in-cluster, then ~/.kube/config
	f.zap.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: paddock manager [flags]")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Run the paddock operator: provision KafkaClusters and keep their broker registry.")
		fmt.Fprintln(fs.Output(), "Runs in a cluster or, with a kubeconfig, outside one.")
		fmt.Fprintln(fs.Output())
		fmt.Fprintln(fs.Output(), "Flags:")
		fs.PrintDefaults()
	}
	return fs
}

// runManager runs the operator until SIGTERM/SIGINT, or until it loses leadership.
func runManager(args []string) int {
	var f managerFlags
	fs := newManagerFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock manager: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&f.zap)))
	if err := startManager(f); err != nil {
		ctrl.Log.WithName("manager").Error(err, "Manager stopped")
		return 1
	}
	return 0
}

// startManager builds the manager from the flags, registers every reconciler and runs it.
func startManager(f managerFlags) error {
	s, err := scheme.New()
	if err != nil {
		return err
	}
	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cacheOpts := cache.Options{ByObject: controllers.CacheByObject()}
	if len(f.namespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range f.namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  s,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: f.metricsAddr},
		HealthProbeBindAddress:  f.probeAddr,
		LeaderElection:          f.leaderElect,
		LeaderElectionID:        f.leaderElectionID,
		LeaderElectionNamespace: f.leaderElectionNamespace,
		// The manager exits right after it stops, so it can hand the Lease over at once
		// instead of making the next leader wait for it to expire.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := controllers.SetupWithManager(mgr, controllers.Options{DefaultBrokerImage: f.defaultBrokerImage}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add readyz check: %w", err)
	}
	ctrl.Log.WithName("manager").Info("Starting manager", "namespaces", f.namespaces.String(),
		"leaderElect", f.leaderElect, "defaultBrokerImage", f.defaultBrokerImage)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}
