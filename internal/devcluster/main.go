package devcluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
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

// options are the flags of paddock dev and its subcommands.
type options struct {
	cfg                    Config
	brokers                int
	noSample, printInstall bool
	// detach starts the environment in the background (detach.go).
	detach bool
	// beforeBuild: `paddock dev preflight` runs before make dev builds the binaries.
	beforeBuild bool
	// prometheus runs the dev Prometheus (prometheus.go) from cfg.PrometheusBinary.
	prometheus bool
}

// Main runs `paddock dev` with args and returns the process exit code.
func Main(args []string) int {
	opts := options{cfg: DefaultConfig(), brokers: 3, prometheus: true}
	fs := opts.flagSet()
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	cmd, rest := fs.Arg(0), fs.Args()
	if len(rest) > 0 {
		rest = rest[1:]
	}
	if cmd == "node" { // its own arguments (control.go)
		return nodeMain(opts.cfg.Dir, rest, os.Stdout, os.Stderr)
	}
	// Flags may follow the subcommand too: paddock dev status --dir=...
	if code, ok := parseFlags(fs, rest); !ok {
		return code
	}
	if !opts.prometheus {
		opts.cfg.PrometheusBinary = ""
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "paddock dev: unexpected arguments %q (paddock dev --help)\n", fs.Args())
		return 2
	}
	switch cmd {
	case "status":
		return statusMain(opts.cfg.Dir, os.Stdout, os.Stderr)
	case "down":
		return downMain(opts.cfg.Dir, os.Stdout, os.Stderr)
	case "preflight":
		return preflightMain(opts, realHost(), os.Stdout)
	case "", "up":
		if opts.printInstall {
			return printInstall(opts.cfg.ConfigDir)
		}
		return up(opts)
	}
	fmt.Fprintf(os.Stderr, "paddock dev: unknown command %q (paddock dev --help)\n", cmd)
	return 2
}

// parseFlags parses args into fs; ok is false when the process should exit with code.
func parseFlags(fs *flag.FlagSet, args []string) (code int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// flagSet is paddock dev's flags, bound to o.
func (o *options) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("paddock dev", flag.ContinueOnError)
	fs.IntVar(&cfg.Nodes, "nodes", cfg.Nodes, "Number of Nodes (zones zone-a, zone-b, … in turn).")
	fs.IntVar(&o.brokers, "brokers", o.brokers, "Brokers of the sample KafkaCluster.")
	fs.BoolVar(&o.noSample, "no-sample", false, "Do not apply the sample KafkaCluster.")
	fs.BoolVar(&cfg.Keep, "keep", false, "Resume the state of the previous run instead of starting clean.")
	fs.BoolVar(&o.detach, "detach", false, "Start in the background and return once it is up; 'paddock dev down' stops it.")
	fs.BoolVar(&o.beforeBuild, "before-build", false, "preflight: binaries still missing are built next (make dev), not a failure.")
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "State directory: kubeconfig, env, logs, pid files, data ($PADDOCK_DEV_DIR).")
	fs.StringVar(&cfg.K8sBinDir, "k8s-bin-dir", cfg.K8sBinDir, "Directory with etcd, kube-apiserver, kube-controller-manager, kube-scheduler (make k8s-bins).")
	fs.StringVar(&cfg.CoreDNSBinary, "coredns", cfg.CoreDNSBinary, "The cluster DNS: CoreDNS with its kubernetes plugin (make coredns).")
	fs.StringVar(&cfg.BinDir, "bin-dir", cfg.BinDir, "Directory with kubectl (make kubectl) and paddock: the env file puts it on PATH.")
	fs.StringVar(&cfg.ConfigDir, "config-dir", cfg.ConfigDir, "The repository's config/ directory: its default/ kustomization is installed (as in dist/install.yaml).")
	fs.BoolVar(&o.printInstall, "print-install", false, "Print the kustomize build of <config-dir>/default that paddock dev installs, and exit.")
	fs.StringVar(&cfg.PaddockBinary, "paddock-binary", "", "Binary that runs the operator's image: the manager and broker pods (default: this executable).")
	fs.IntVar(&cfg.APIServerPort, "apiserver-port", cfg.APIServerPort, "kube-apiserver port (inside the private network).")
	fs.IntVar(&cfg.EtcdPort, "etcd-port", cfg.EtcdPort, "etcd client port; the peer port is the next one.")
	fs.StringVar(&cfg.HostAddress, "host-address", cfg.HostAddress, "Loopback address the environment answers at from the host: the apiserver and every nodePort ($PADDOCK_DEV_HOST_ADDRESS).")
	fs.IntVar(&cfg.HostAPIServerPort, "host-apiserver-port", cfg.HostAPIServerPort, "The apiserver's port on --host-address (what .paddock/dev/kubeconfig names).")
	fs.BoolVar(&o.prometheus, "prometheus", o.prometheus, "Run a Prometheus that scrapes what config/monitoring's PodMonitors select, with its alert rules (make prometheus builds it).")
	fs.StringVar(&cfg.PrometheusBinary, "prometheus-binary", cfg.PrometheusBinary, "The dev Prometheus ($PROMETHEUS; make prometheus).")
	fs.IntVar(&cfg.HostPrometheusPort, "host-prometheus-port", cfg.HostPrometheusPort, "Prometheus's port on --host-address.")
	fs.DurationVar(&cfg.NodeMonitorGracePeriod, "node-monitor-grace-period", cfg.NodeMonitorGracePeriod, "How long a silent node stays Ready; 0 keeps Kubernetes' default.")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), `Usage: paddock dev [flags] [up|status|down|preflight]
       paddock dev [--dir=DIR] node list|stop|thaw|start ...

Run a whole paddock system on this machine without Docker: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler, the operator installed from config/default (as
dist/install.yaml installs it), and a node agent that runs its pods — the manager Deployment's
and the brokers' — as local processes, each with its ServiceAccount's bound token. Everything
runs in a private network namespace; the apiserver and every nodePort are forwarded to
--host-address, so kubectl and Kafka clients work from the host's terminal, and
.paddock/dev/shell enters the private network itself.

  up (or nothing)  check this machine (preflight), start, print how to reach it; Ctrl-C stops
                   it, or with --detach it runs in the background until 'paddock dev down'
  status           what runs in DIR, its addresses and how to reach them
  down             stop the environment of DIR (one started with --detach, or in another terminal)
  preflight        only the checks 'up' makes first, one line each; changes nothing
  node             lose and bring back nodes of the running environment ('paddock dev node help')

Flags:`)
		fs.PrintDefaults()
	}
	return fs
}

// printInstall prints what paddock dev installs (make verify diffs it against kustomize).
func printInstall(configDir string) int {
	out, err := RenderInstall(configDir)
	if err == nil {
		_, err = os.Stdout.Write(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		return 1
	}
	return 0
}

// up starts an environment. Its first process, in the host's namespaces, checks this machine
// and starts the second inside the private network (or a detached first process, which does
// the same in the background); the second runs it.
func up(opts options) int {
	if InPrivateNetwork() {
		return inside(opts)
	}
	if detachedChild() { // its parent checked this machine before it started it
		return outside()
	}
	markCommandStart()
	return preflightThen(opts.cfg, realHost(), beforeStart, os.Stdout, func() int {
		if opts.detach {
			return detach(opts.cfg.Dir, os.Args[1:], os.Stdout)
		}
		return outside()
	})
}

// preflightThen runs launch when every preflight check passes; otherwise it prints every
// check's line and returns 1 without launching anything.
func preflightThen(cfg Config, h host, mode preflightMode, out io.Writer, launch func() int) int {
	report := preflight(cfg, h, mode)
	if len(report.failed()) > 0 {
		fmt.Fprintln(out, "paddock dev: preflight: what this machine has, and what it lacks")
		report.print(out)
		fmt.Fprintln(out, report.summary())
		return 1
	}
	fmt.Fprintln(out, report.summary())
	return launch()
}

// preflightMain is `paddock dev preflight`: every check's line, exit 1 when one failed.
func preflightMain(opts options, h host, out io.Writer) int {
	mode := beforeStart
	if opts.beforeBuild {
		mode = beforeBuild
	}
	report := preflight(opts.cfg, h, mode)
	fmt.Fprintln(out, "paddock dev: preflight: what this machine has, and what it lacks")
	report.print(out)
	fmt.Fprintln(out, report.summary())
	if len(report.failed()) > 0 {
		return 1
	}
	return 0
}

// outside runs this program again inside the private network and waits for it.
func outside() int {
	code, err := RunInPrivateNetwork()
	if err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
	}
	return code
}

// inside is the environment's process: it sets the private network up and runs the
// environment until a signal or `paddock dev down`.
func inside(opts options) int {
	if err := SetupPrivateNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if err := run(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, "paddock dev:", err)
		if errors.Is(err, errAlreadyRunning) {
			fmt.Fprintln(os.Stderr, "paddock dev: nothing was changed; reuse it (paddock dev status) or stop it (paddock dev down)")
		}
		return 1
	}
	return 0
}

// run starts the environment, brings the sample up, prints how to use it and waits until it
// is told to stop.
func run(ctx context.Context, opts options) error {
	p := &progress{w: os.Stdout, start: time.Now()}
	cfg := opts.cfg
	cfg.progress = p
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
	boot, err := bringUpSample(ctx, env, opts, p)
	if err != nil {
		return err
	}
	printHowToUse(os.Stdout, env, boot, detachedChild())
	if !opts.noSample {
		fmt.Printf("paddock dev: from the start of the command to the first record consumed: %s (this process: %s)\n",
			time.Since(commandStart()).Round(100*time.Millisecond), p.elapsed().Round(100*time.Millisecond))
	}
	env.MarkReady()
	return waitForStop(ctx, env)
}

// bringUpSample writes the env file and, unless --no-sample, applies the sample KafkaCluster,
// waits for its bootstrap Service and its brokers, and sends one record through it.
func bringUpSample(ctx context.Context, env *Env, opts options, p *progress) (bootstrap, error) {
	boot := bootstrap{kubeconfig: env.KubeconfigPath(), binDir: env.cfg.BinDir}
	if err := writeEnvFile(env.Dir(), boot); err != nil {
		return boot, err
	}
	if opts.noSample {
		return boot, nil
	}
	cluster := SampleSecureCluster(metav1.NamespaceDefault, sampleName, int32(opts.brokers), env.HostAddress())
	key := cluster.Namespace + "/" + cluster.Name
	err := p.run(ctx,
		step{fmt.Sprintf("KafkaCluster %s and KafkaUser %s applied (%d brokers)", key, SampleUser, opts.brokers), func(ctx context.Context) error {
			if err := env.Client().Create(ctx, cluster); err != nil {
				return fmt.Errorf("apply the sample KafkaCluster: %w", err)
			}
			if err := env.Client().Create(ctx, SampleKafkaUser(cluster.Namespace, cluster.Name)); err != nil {
				return fmt.Errorf("apply the sample KafkaUser: %w", err)
			}
			return nil
		}},
		step{"its bootstrap Service reachable from the host; " + relativeToWD(filepath.Join(env.Dir(), "env")) + " written", func(ctx context.Context) error {
			var err error
			if boot, err = waitBootstrap(ctx, env, cluster.Namespace, cluster.Name); err != nil {
				return err
			}
			return writeEnvFile(env.Dir(), boot)
		}},
		step{fmt.Sprintf("%d brokers of %s Serving", opts.brokers, key), func(ctx context.Context) error {
			return waitServing(ctx, env, cluster.Namespace, cluster.Name, int32(opts.brokers))
		}},
		step{"first record produced and consumed from the host (topic " + welcomeTopic + ")", func(ctx context.Context) error {
			return firstRecord(ctx, boot.external)
		}},
		step{"a record through the secure listener (TLS, SCRAM-SHA-512 as " + SampleUser + "); " + relativeToWD(sampleCAFile(env, cluster.Name)) + " written", func(ctx context.Context) error {
			return secureRecord(ctx, env, cluster.Namespace, cluster.Name, boot.secure, boot.caFile)
		}},
	)
	return boot, err
}

// waitForStop returns when ctx ends (a signal), `paddock dev down` asks, or a component of
// the environment exits on its own (an error).
func waitForStop(ctx context.Context, env *Env) error {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-env.StopRequested():
			fmt.Println("paddock dev: paddock dev down asked to stop")
			return nil
		case <-ticker.C:
			if err := env.Err(); err != nil {
				return err
			}
		}
	}
}

// printHowToUse prints the commands that reach the environment, each as it works from the
// directory paddock dev was started in.
func printHowToUse(w io.Writer, env *Env, boot bootstrap, detached bool) {
	rel := relativeToWD
	stop := "Ctrl-C stops it, or paddock dev down from another terminal"
	if detached {
		stop = "in the background; paddock dev down stops it"
	}
	fmt.Fprintf(w, `
paddock dev is running (%s).
In any terminal of this machine, from this directory — nothing to enter — the apiserver and
every nodePort answer at %s:

  source %s       # KUBECONFIG; %s first on PATH (kubectl, paddock); the bootstrap addresses
  kubectl get kafkaclusters,brokers
  kubectl get deploy -n %s
  paddock dev status
`, stop, env.HostAddress(), rel(filepath.Join(env.Dir(), "env")), rel(env.cfg.BinDir), env.Manager().Namespace)
	if boot.external != "" {
		fmt.Fprintf(w, "  kcat -b $PADDOCK_EXTERNAL_BOOTSTRAP -L     # %s, listener %q; brokers advertise %s:<their nodePort>\n",
			boot.external, SampleExternalListener, env.HostAddress())
	}
	if boot.secure != "" {
		fmt.Fprintf(w, "  %s\n      # %s, listener %q: TLS (trust $PADDOCK_CA_FILE) and SCRAM-SHA-512 as KafkaUser %s\n",
			secureKcat("-L"), boot.secure, SampleSecureListener, SampleUser)
	}
	fmt.Fprintf(w, `
Inside the private network, where pods have 198.18.x.y addresses, Services their ClusterIPs,
and names resolve through the cluster DNS (%s) as in a pod of the default namespace:

  %s
  source %s
`, ClusterDNSIP, rel(env.ShellPath()), rel(filepath.Join(env.Dir(), "env")))
	if boot.internal != "" {
		fmt.Fprintf(w, "  getent hosts %s\n  kcat -b $PADDOCK_BOOTSTRAP -L     # %s, listener %q: brokers advertise their pod DNS names\n",
			kafkav1alpha1.InternalBootstrapServiceName(sampleName), boot.internal, SampleInternalListener)
	}
	fmt.Fprintf(w, `
Crash a broker with: kill -9 $(cat %s)
Lose a node for good, its broker frozen alive (a zombie): paddock dev node stop %s --freeze
  (paddock dev node list shows the nodes; node thaw resumes the zombie, node start brings it back)
Who did what: %s (the apiserver's audit log).
`, rel(env.PIDFile(metav1.NamespaceDefault, sampleName+"-broker-0")), NodeName(env.cfg.Nodes-1), rel(env.AuditLogPath()))
}

// relativeToWD is p relative to the working directory when it is under it, else p.
func relativeToWD(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}

// bootstrap is what the env file tells: the kubeconfig and the sample's bootstrap addresses.
type bootstrap struct {
	kubeconfig string
	// binDir is put first on PATH: kubectl and paddock are there.
	binDir string
	// internal is the bootstrap Service's name and internal listener port (it resolves to
	// the Service's ClusterIP inside the private network); external is the host address and the bootstrap Service's nodePort of
	// the external listener (anywhere on this machine).
	internal, external string
	// secure is the host address and the secure listener's bootstrap nodePort; caFile the
	// file the cluster CA bundle is written to (its clients trust the brokers by it).
	secure, caFile string
}

// sampleCAFile is where paddock dev writes cluster's CA bundle for the host's clients.
func sampleCAFile(env *Env, cluster string) string {
	return filepath.Join(env.Dir(), cluster+"-ca.crt")
}

// secureKcat is the kcat command line (with args) that reaches the sample's secure listener
// from the host: TLS against $PADDOCK_CA_FILE, SCRAM-SHA-512 as SampleUser with the password
// read from its Secret when the line runs (it is written nowhere else).
func secureKcat(args string) string {
	return "kcat -b $PADDOCK_SECURE_BOOTSTRAP -X security.protocol=SASL_SSL -X sasl.mechanisms=SCRAM-SHA-512 -X sasl.username=" + SampleUser +
		` -X sasl.password="$(kubectl get secret ` + SampleUser + ` -o jsonpath='{.data.password}' | base64 -d)" -X ssl.ca.location=$PADDOCK_CA_FILE ` + args
}

// waitBootstrap waits until the sample's bootstrap Service has its ClusterIP and nodePort
// and the service proxy listens on the nodePort in the host's network.
func waitBootstrap(ctx context.Context, env *Env, namespace, cluster string) (bootstrap, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// The sample has an external listener beside the internal one, so each has its own
	// bootstrap Service (docs/security.md, "Listener exposure").
	sample := SampleSecureCluster(namespace, cluster, 0, env.HostAddress())
	inSvc, exSvc := sample.BootstrapServiceOf(SampleInternalListener), sample.BootstrapServiceOf(SampleExternalListener)
	secSvc := sample.BootstrapServiceOf(SampleSecureListener)
	for {
		internal, errIn := env.ServiceAddress(ctx, namespace, inSvc, SampleInternalListener)
		external, errEx := env.HostNodePortAddress(ctx, namespace, exSvc, SampleExternalListener)
		secure, errSec := env.HostNodePortAddress(ctx, namespace, secSvc, SampleSecureListener)
		listening := env.HostListening()
		if errIn == nil && errEx == nil && errSec == nil && slices.Contains(listening, external) && slices.Contains(listening, secure) {
			_, port, _ := net.SplitHostPort(internal)
			return bootstrap{kubeconfig: env.KubeconfigPath(), binDir: env.cfg.BinDir, internal: net.JoinHostPort(inSvc, port), external: external,
				secure: secure, caFile: sampleCAFile(env, cluster)}, nil
		}
		select {
		case <-ctx.Done():
			return bootstrap{}, fmt.Errorf("bootstrap Services %s and %s of %s are not reachable (see %s): %w",
				inSvc+", "+exSvc, secSvc, cluster, filepath.Join(env.Dir(), "logs", "node-agents.log"), errors.Join(errIn, errEx, errSec, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// writeEnvFile writes the shell file that points kubectl and kcat at the environment.
func writeEnvFile(dir string, b bootstrap) error {
	content := fmt.Sprintf("# Written by paddock dev. KUBECONFIG and PATH work anywhere on this machine; PADDOCK_BOOTSTRAP\n"+
		"# only inside the private network (%s).\nexport KUBECONFIG=%s\n", filepath.Join(dir, "shell"), shellQuote(b.kubeconfig))
	if b.binDir != "" {
		content += fmt.Sprintf("# kubectl (make kubectl) and paddock.\nexport PATH=%s:\"$PATH\"\n", shellQuote(b.binDir))
	}
	if b.internal != "" {
		content += fmt.Sprintf("# The bootstrap Service, by the name the cluster DNS answers: stable while pods come and go.\nexport PADDOCK_BOOTSTRAP=%s\n", b.internal)
	}
	if b.external != "" {
		content += fmt.Sprintf("# The external listener's bootstrap nodePort on the host address.\nexport PADDOCK_EXTERNAL_BOOTSTRAP=%s\n", b.external)
	}
	if b.secure != "" {
		content += fmt.Sprintf("# The secure listener's (TLS, SCRAM-SHA-512) bootstrap nodePort, and the cluster CA bundle its clients trust.\n"+
			"export PADDOCK_SECURE_BOOTSTRAP=%s\nexport PADDOCK_CA_FILE=%s\n", b.secure, shellQuote(b.caFile))
	}
	return os.WriteFile(filepath.Join(dir, "env"), []byte(content), 0o644)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

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
