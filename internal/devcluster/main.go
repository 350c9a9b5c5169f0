package devcluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// sampleName is the KafkaCluster paddock dev applies in the default namespace.
const sampleName = "demo"

// Main runs `paddock dev` with args and returns the process exit code.
func Main(args []string) int {
	cfg := DefaultConfig()
	var brokers int
	var noSample, printInstall bool
	fs := flag.NewFlagSet("paddock dev", flag.ContinueOnError)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "Number of Nodes (zones zone-a, zone-b, … in turn).")
	fs.IntVar(&brokers, "brokers", 3, "Brokers of the sample KafkaCluster.")
	fs.BoolVar(&noSample, "no-sample", false, "Do not apply the sample KafkaCluster.")
	fs.BoolVar(&cfg.Keep, "keep", false, "Resume the state of the previous run instead of starting clean.")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "State directory: kubeconfig, env, logs, pid files, data.")
	fs.StringVar(&cfg.K8sBinDir, "k8s-bin-dir", cfg.K8sBinDir, "Directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler (make k8s-bins).")
	fs.StringVar(&cfg.CoreDNSBinary, "coredns", cfg.CoreDNSBinary, "The cluster DNS: CoreDNS with its kubernetes plugin (make coredns).")
	fs.StringVar(&cfg.ConfigDir, "config-dir", cfg.ConfigDir, "The repository's config/ directory: its default/ kustomization is installed (as in dist/install.yaml).")
	fs.BoolVar(&printInstall, "print-install", false, "Print the kustomize build of <config-dir>/default that paddock dev installs, and exit.")
	fs.StringVar(&cfg.PaddockBinary, "paddock-binary", "", "Binary that runs the operator's image: the manager and broker pods (default: this executable).")
	fs.IntVar(&cfg.APIServerPort, "apiserver-port", cfg.APIServerPort, "kube-apiserver port (inside the private network).")
	fs.IntVar(&cfg.EtcdPort, "etcd-port", cfg.EtcdPort, "etcd client port; the peer port is the next one.")
	fs.StringVar(&cfg.HostAddress, "host-address", cfg.HostAddress, "Loopback address the environment answers at from the host: the apiserver and every nodePort.")
	fs.IntVar(&cfg.HostAPIServerPort, "host-apiserver-port", cfg.HostAPIServerPort, "The apiserver's port on --host-address (what .paddock/dev/kubeconfig names).")
	fs.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", cfg.NodeMonitorGracePeriod, "How long a silent node stays Ready; 0 keeps Kubernetes' default.")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: paddock dev [flags]

Run a whole paddock system on this machine without Docker: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, the operator installed from config/default (as
dist/install.yaml installs it), and a node agent that runs its pods — the manager Deployment's
and the brokers' — as local processes, each with its ServiceAccount's bound token. Everything
runs in a private network namespace; the apiserver and every nodePort are forwarded to
--host-address, so kubectl and Kafka clients work from the host's terminal, and
.paddock/dev/shell enters the private network itself. Ctrl-C stops everything.

From another terminal, 'paddock dev node list|stop|thaw|start' loses and brings back nodes
of the running environment ('paddock dev node help').

Flags:`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.Arg(0) == "node" {
		return nodeMain(cfg.Dir, fs.Args()[1:], os.Stdout, os.Stderr)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock dev: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if printInstall {
		out, err := RenderInstall(cfg.ConfigDir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "paddock dev:", err)
			return 1
		}
		if _, err := os.Stdout.Write(out); err != nil {
			fmt.Fprintln(os.Stderr, "paddock dev:", err)
			return 1
		}
		return 0
	}
	// Fail before entering the namespace when the binaries are missing: the message is the
	// same, but it comes at once.
	if err := errors.Join(checkBinaries(cfg.K8sBinDir), checkCoreDNS(cfg.CoreDNSBinary)); err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		return 1
	}
	if !InPrivateNetwork() {
		code, err := RunInPrivateNetwork()
		if err != nil {
			fmt.Fprintln(os.Stderr, "paddock dev:", err)
		}
		return code
	}
	if err := SetupPrivateNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, cfg, int32(brokers), noSample); err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		return 1
	}
	return 0
}

// run starts the environment, applies the sample, prints how to use it and waits for a signal.
func run(ctx context.Context, cfg Config, brokers int32, noSample bool) error {
	started := time.Now()
	fmt.Printf("paddock dev: starting the control plane and %d nodes in %s\n", cfg.Nodes, cfg.Dir)
	env, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("paddock dev: stopping")
		env.Stop()
		fmt.Println("paddock dev: stopped; every process it started is gone")
	}()
	boot := bootstrap{kubeconfig: env.KubeconfigPath()}
	if err := writeEnvFile(env.Dir(), boot); err != nil {
		return err
	}
	fmt.Printf("paddock dev: control plane and operator up in %s; logs in %s\n",
		time.Since(started).Round(time.Millisecond), filepath.Join(env.Dir(), "logs"))
	if sa, err := env.ManagerServiceAccount(ctx); err == nil {
		fmt.Printf("paddock dev: the operator is Deployment %s, running as ServiceAccount %s\n", env.Manager(), sa)
	}

	if !noSample {
		cluster := SampleCluster(metav1.NamespaceDefault, sampleName, brokers, cfg.HostAddress)
		if err := env.Client().Create(ctx, cluster); err != nil {
			return fmt.Errorf("apply the sample KafkaCluster: %w", err)
		}
		fmt.Printf("paddock dev: applied KafkaCluster %s/%s with %d brokers; waiting for its bootstrap Service\n",
			cluster.Namespace, cluster.Name, brokers)
		if boot, err = waitBootstrap(ctx, env, cluster.Namespace, cluster.Name); err != nil {
			return err
		}
		if err := writeEnvFile(env.Dir(), boot); err != nil {
			return err
		}
	}
	rel := func(p string) string {
		if wd, err := os.Getwd(); err == nil {
			if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
				return r
			}
		}
		return p
	}
	fmt.Printf(`
paddock dev is running (Ctrl-C stops it). In this machine's terminals — no need to enter
anything — the apiserver and every nodePort answer at %s:

  export KUBECONFIG=%s
  kubectl get kafkaclusters,brokers
  kubectl get deploy -n %s
`, cfg.HostAddress, env.KubeconfigPath(), env.Manager().Namespace)
	if boot.external != "" {
		fmt.Printf(`  kcat -b %s -L      # listener %q: bootstrap nodePort; brokers advertise %s:<their nodePort>
`, boot.external, SampleExternalListener, cfg.HostAddress)
	}
	fmt.Printf(`
Inside the private network, where pods have 198.18.x.y addresses, Services their ClusterIPs,
and names resolve through the cluster DNS (%s) as in a pod of the default namespace:

  %s
  source %s          # KUBECONFIG, PADDOCK_BOOTSTRAP (the bootstrap Service), PADDOCK_EXTERNAL_BOOTSTRAP
`, ClusterDNSIP, rel(filepath.Join(env.Dir(), "shell")), rel(filepath.Join(env.Dir(), "env")))
	if boot.internal != "" {
		fmt.Printf(`  getent hosts %s
  kcat -b $PADDOCK_BOOTSTRAP -L      # listener %q (%s): brokers advertise their pod DNS names
`, kafkav1alpha1.InternalBootstrapServiceName(sampleName), SampleInternalListener, boot.internal)
	}
	fmt.Printf(`
Crash a broker with: kill -9 $(cat %s)
Lose a node for good, its broker frozen alive (a zombie): paddock dev node stop %s --freeze
  (paddock dev node list shows the nodes; node thaw resumes the zombie, node start brings it back)
Who did what: %s (the apiserver's audit log).
`, rel(filepath.Join(env.Dir(), "run", metav1.NamespaceDefault, sampleName+"-broker-0.pid")), NodeName(cfg.Nodes-1), rel(env.AuditLogPath()))

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
			if err := env.Err(); err != nil {
				return err
			}
		}
	}
}

// bootstrap is what the env file tells: the kubeconfig and the sample's bootstrap addresses.
type bootstrap struct {
	kubeconfig string
	// internal is the bootstrap Service's name and internal listener port (it resolves to
	// the Service's ClusterIP inside the private network); external is the host address and the bootstrap Service's nodePort of
	// the external listener (anywhere on this machine).
	internal, external string
}

// waitBootstrap waits until the sample's bootstrap Service has its ClusterIP and nodePort
// and the service proxy listens on the nodePort in the host's network.
func waitBootstrap(ctx context.Context, env *Env, namespace, cluster string) (bootstrap, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The sample has an external listener beside the internal one, so each has its own
	// bootstrap Service (docs/security.md, "Listener exposure").
	sample := SampleCluster(namespace, cluster, 0, env.HostAddress())
	inSvc, exSvc := sample.BootstrapServiceOf(SampleInternalListener), sample.BootstrapServiceOf(SampleExternalListener)
	for {
		internal, errIn := env.ServiceAddress(ctx, namespace, inSvc, SampleInternalListener)
		external, errEx := env.HostNodePortAddress(ctx, namespace, exSvc, SampleExternalListener)
		if errIn == nil && errEx == nil && slices.Contains(env.HostListening(), external) {
			_, port, _ := net.SplitHostPort(internal)
			return bootstrap{kubeconfig: env.KubeconfigPath(), internal: net.JoinHostPort(inSvc, port), external: external}, nil
		}
		select {
		case <-ctx.Done():
			return bootstrap{}, fmt.Errorf("bootstrap Services %s and %s of %s are not reachable (see %s): %w",
				inSvc, exSvc, cluster, filepath.Join(env.Dir(), "logs", "node-agents.log"), errors.Join(errIn, errEx, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeEnvFile writes the shell file that points kubectl and kcat at the environment.
func writeEnvFile(dir string, b bootstrap) error {
	content := fmt.Sprintf("# Written by paddock dev. KUBECONFIG works anywhere on this machine; PADDOCK_BOOTSTRAP\n"+
		"# only inside the private network (%s).\nexport KUBECONFIG=%s\n", filepath.Join(dir, "shell"), b.kubeconfig)
	if b.internal != "" {
		content += fmt.Sprintf("# The bootstrap Service, by the name the cluster DNS answers: stable while pods come and go.\nexport PADDOCK_BOOTSTRAP=%s\n", b.internal)
	}
	if b.external != "" {
		content += fmt.Sprintf("# The external listener's bootstrap nodePort on the host address.\nexport PADDOCK_EXTERNAL_BOOTSTRAP=%s\n", b.external)
	}
	return os.WriteFile(filepath.Join(dir, "env"), []byte(content), 0o644)
}

// writeShell writes the script (ShellPath) that runs a command (default: a shell) inside the
// environment's private network namespace and its mount namespace, where /etc/resolv.conf
// names the cluster DNS with the default namespace's search path (dns.go); the working
// directory stays the caller's.
func writeShell(dir string) error {
	if environmentMountNS == nil {
		return errors.New("the environment's mount namespace is not known (SetupPrivateNetwork was not called)")
	}
	script := fmt.Sprintf("#!/bin/sh\n# Written by paddock dev: run a command (default: your shell) inside its private network,\n"+
		"# resolving names through its cluster DNS.\n"+
		"if [ $# -eq 0 ]; then set -- \"${SHELL:-/bin/sh}\"; fi\nexec %s --wd=\"$PWD\" -- \"$@\"\n",
		shellNsenter(os.Getpid(), int(environmentMountNS.Fd()), inOwnUserNamespace()))
	return os.WriteFile(filepath.Join(dir, "shell"), []byte(script), 0o755)
}

// shellNsenter is the nsenter command that joins the network of the environment's process
// pid and the mount namespace it holds open as descriptor mountFD.
func shellNsenter(pid, mountFD int, ownUserNamespace bool) string {
	if ownUserNamespace {
		// Started unprivileged: the network and mounts belong to our user namespace; join it too.
		return fmt.Sprintf("nsenter --target %d --user --net --mount=/proc/%d/fd/%d --preserve-credentials", pid, pid, mountFD)
	}
	return fmt.Sprintf("nsenter --target %d --net --mount=/proc/%d/fd/%d", pid, pid, mountFD)
}
