package devcluster

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/scheme"
)

// stateMarker is the file that marks a directory as paddock dev state, so a clean start only
// ever wipes a directory paddock dev made.
const stateMarker = ".paddock-dev"

// Config is what an environment is made of.
type Config struct {
	// Dir holds all state: kubeconfig, env, pki, etcd, logs, pid files, volume data.
	Dir string
	// K8sBinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	K8sBinDir string
	// PaddockBinary runs the containers of the operator's image (the manager and broker
	// pods): the node agent maps that image to this binary.
	PaddockBinary string
	// ConfigDir is the repository's config/ directory: paddock dev installs the kustomize
	// build of its default/ (what `make build-installer` writes to dist/install.yaml).
	ConfigDir string
	// Nodes is the number of Nodes the node agent plays.
	Nodes int
	// Keep resumes the state in Dir instead of starting clean.
	Keep bool
	// APIServerPort and EtcdPort (EtcdPort+1 is etcd's peer port) are inside the private
	// network, so they never collide with anything on the host.
	APIServerPort, EtcdPort int
	// NodeMonitorGracePeriod is how long a silent node stays Ready (kube-controller-manager's
	// --node-monitor-grace-period). Zero keeps Kubernetes' default, as a real cluster has it:
	// a shorter one would hide how long a lost node's endpoints keep saying serving.
	NodeMonitorGracePeriod time.Duration
	// HostAddress is the loopback address the environment is reached at from the host's
	// network — and at the same address inside the private network: the apiserver on
	// HostAPIServerPort (what the kubeconfig names) and every nodePort (proxy.go). Tests pick
	// one of their own in 127.0.0.0/8 so environments running at once never collide.
	HostAddress string
	// HostAPIServerPort is the apiserver's port on HostAddress.
	HostAPIServerPort int
	// CoreDNSBinary is the cluster DNS: CoreDNS with its kubernetes plugin (`make coredns`
	// builds it from hack/coredns).
	CoreDNSBinary string
	// BinDir holds the tools the printed commands use: kubectl (`make kubectl` links
	// bin/kubectl) and the paddock binary. The env file puts it first on PATH.
	BinDir string
	// NoOperator leaves the operator out: no CRDs, no manager Deployment. The caller installs
	// one itself, as a user would (helm install, kubectl apply of a release's install.yaml).
	NoOperator bool
	// Images maps further images to the binaries that run them, beside the operator's image
	// (PaddockBinary): operators of other versions, brokers of another image.
	Images map[string]string
	// PrometheusBinary, when set, runs a Prometheus that scrapes what config/monitoring's
	// PodMonitors select and evaluates its rules (prometheus.go); `make prometheus` builds it.
	// Empty: no Prometheus.
	PrometheusBinary string
	// HostPrometheusPort is Prometheus's port on HostAddress.
	HostPrometheusPort int
	// PrometheusSpeedup, above 1, divides the monitors' scrape intervals and the rules' `for`
	// and range selectors by it (monitoring.Speedup): for tests that cannot wait ten minutes
	// for an alert. paddock dev runs the kit as written.
	PrometheusSpeedup int

	// progress, when set, is told of each start-up step as it ends (paddock dev prints them).
	progress *progress
	// tokenRefreshEvery, when set, replaces projected tokens this often instead of at 80% of
	// their lifetime (tests of the refresh; a token lives at least ten minutes).
	tokenRefreshEvery time.Duration
}

// DefaultConfig is the configuration of `paddock dev` without flags. The control-plane
// binaries are the ones $KUBEBUILDER_ASSETS names (the Makefile exports it), else those
// `make k8s-bins` builds into bin/k8s/<version>; CoreDNS is $COREDNS (the Makefile exports
// it too), else the bin/coredns-v<version> `make coredns` builds. The state directory is
// $PADDOCK_DEV_DIR, else .paddock/dev; the host address $PADDOCK_DEV_HOST_ADDRESS, else
// 127.0.0.1 (a test running the README's quickstart picks an address of its own).
func DefaultConfig() Config {
	binDir := os.Getenv("KUBEBUILDER_ASSETS")
	if binDir == "" {
		binDir = filepath.Join("bin", "k8s", "1.37.2")
	}
	coreDNS := os.Getenv("COREDNS")
	if coreDNS == "" {
		coreDNS = filepath.Join("bin", "coredns-v"+coreDNSVersion)
	}
	dir := os.Getenv("PADDOCK_DEV_DIR")
	if dir == "" {
		dir = filepath.Join(".paddock", "dev")
	}
	prometheusBinary := os.Getenv("PROMETHEUS")
	if prometheusBinary == "" {
		prometheusBinary = filepath.Join("bin", "prometheus-v"+prometheusVersion)
	}
	hostAddress := os.Getenv("PADDOCK_DEV_HOST_ADDRESS")
	if hostAddress == "" {
		hostAddress = "127.0.0.1"
	}
	return Config{
		Dir:                dir,
		K8sBinDir:          binDir,
		ConfigDir:          "config",
		Nodes:              3,
		APIServerPort:      6443,
		EtcdPort:           2379,
		HostAddress:        hostAddress,
		HostAPIServerPort:  6443,
		HostPrometheusPort: 9090,
		CoreDNSBinary:      coreDNS,
		PrometheusBinary:   prometheusBinary,
		BinDir:             "bin",
	}
}

// KubeconfigPath is the admin kubeconfig of the environment, for people and tests: it names
// the apiserver at HostAddress:HostAPIServerPort, which works from the host's network and
// inside the private one. No pod process can read it.
func (c Config) KubeconfigPath() string { return filepath.Join(c.Dir, "kubeconfig") }

// controlPlaneKubeconfigPath is the admin kubeconfig of kube-controller-manager and
// kube-scheduler: the apiserver's own address, not through the proxy. It is under pki/, which
// no pod process can read.
func (c Config) controlPlaneKubeconfigPath() string {
	return filepath.Join(c.Dir, "pki", "control-plane.kubeconfig")
}

func (c Config) hostAPIServerAddr() string {
	return net.JoinHostPort(c.HostAddress, strconv.Itoa(c.HostAPIServerPort))
}

func (c Config) apiServerAddr() string {
	return net.JoinHostPort(apiServerAdvertiseAddress, strconv.Itoa(c.APIServerPort))
}
func (c Config) logPath(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}
func (c Config) dataDir() string { return filepath.Join(c.Dir, "data") }
func (c Config) podDir(uid types.UID) string {
	return filepath.Join(c.dataDir(), "pods", string(uid))
}

// Env is a running environment: control plane, node agents, and the operator installed from
// the repository's kustomize config and running as a Deployment pod.
type Env struct {
	cfg        Config
	inst       *installation
	progress   *progress
	lock       *os.File // the state directory's lock (running.go), held until Stop
	cp         *controlPlane
	rt         *podRuntime
	proxy      *serviceProxy
	dns        *coreDNS
	prom       *prometheus
	nodes      []*nodeAgent
	restConfig *rest.Config
	client     client.Client
	logFiles   []io.Closer

	// ready is closed once paddock dev has brought its sample up and told the person how to
	// use it (MarkReady); stopRequested when `paddock dev down` asks it to stop.
	ready, stopRequested         chan struct{}
	readyOnce, stopRequestedOnce sync.Once

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start brings an environment up: control plane, the operator's install manifests (CRDs,
// RBAC, the manager Deployment), cluster DNS, volume provisioner and node agents, and waits
// until the manager Deployment is Available. It must run inside the private network
// (RunInPrivateNetwork). Another environment running with the same state directory makes it
// fail before it changes anything. Stop undoes it.
func Start(ctx context.Context, cfg Config) (_ *Env, err error) {
	e, err := newEnv(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	if err := e.progress.run(ctx, e.startSteps()...); err != nil {
		return nil, err
	}
	return e, nil
}

// startSteps are Start's phases, in order; each line is what paddock dev prints when it ends.
func (e *Env) startSteps() []step {
	rel := relativeToWD
	install := step{"operator manifests applied from " + rel(filepath.Join(e.cfg.ConfigDir, "default")) + " (CRDs, RBAC, Deployment " + e.inst.manager.String() + ")", e.connectAndInstall}
	waitManager := []step{{"operator Deployment " + e.inst.manager.String() + " Available", e.waitManager}}
	if e.cfg.NoOperator { // the caller installs the operator itself
		install.done = "admin client connected; no operator installed"
		waitManager = nil
	}
	steps := []step{
		{"state directory " + rel(e.cfg.Dir) + " ready, locked for this run", e.prepareState},
		{"credentials written: CA, apiserver certificate, admin token, kubeconfigs", e.cp.writeCredentials},
		{"etcd healthy", e.cp.startEtcd},
		{"kube-apiserver ready at https://" + e.cfg.apiServerAddr(), e.cp.startAPIServer},
		{"kube-controller-manager and kube-scheduler started", e.cp.startControllers},
		install,
		{"cluster DNS (CoreDNS) answering at " + ClusterDNSIP, e.startClusterDNS},
		{fmt.Sprintf("service proxy forwarding %s; %d node agents running", e.cfg.hostAPIServerAddr(), e.cfg.Nodes), e.startNodes},
	}
	if e.cfg.PrometheusBinary != "" {
		steps = append(steps, step{"Prometheus scraping " + rel(filepath.Join(e.cfg.ConfigDir, "monitoring")) + "'s PodMonitors, its rules loaded, at http://" + e.cfg.hostPrometheusAddr(), e.startPrometheus})
	}
	steps = append(steps, waitManager...)
	return append(steps, step{"shell " + rel(e.ShellPath()) + " and control socket ready", e.serveShellAndControl})
}

// newEnv resolves cfg's paths and checks what can only be checked in the private network
// (preflight checked the rest before it was entered); it starts nothing.
func newEnv(cfg Config) (*Env, error) {
	cfg, err := cfg.resolved()
	if err != nil {
		return nil, err
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	inst, err := loadInstall(cfg.ConfigDir)
	if err != nil {
		return nil, err
	}
	e := &Env{cfg: cfg, inst: inst, progress: cfg.progress, cp: &controlPlane{cfg: cfg},
		ready: make(chan struct{}), stopRequested: make(chan struct{})}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// resolved is c with absolute paths and the paddock binary found.
func (c Config) resolved() (Config, error) {
	var err error
	if c.PaddockBinary == "" {
		if c.PaddockBinary, err = os.Executable(); err != nil {
			return c, fmt.Errorf("find the paddock binary: %w", err)
		}
	}
	if c.BinDir == "" {
		c.BinDir = filepath.Dir(c.PaddockBinary)
	}
	for _, p := range []*string{&c.Dir, &c.K8sBinDir, &c.ConfigDir, &c.PaddockBinary, &c.CoreDNSBinary, &c.BinDir, &c.PrometheusBinary} {
		if *p == "" {
			continue // only PrometheusBinary may be empty: no Prometheus
		}
		if *p, err = filepath.Abs(*p); err != nil {
			return c, err
		}
	}
	images := make(map[string]string, len(c.Images))
	for image, bin := range c.Images {
		if images[image], err = filepath.Abs(bin); err != nil {
			return c, err
		}
	}
	c.Images = images
	return c, nil
}

// check fails when the environment cannot run here: outside the private network, without
// its binaries or its config, or where a pod sandbox cannot be made.
func (c Config) check() error {
	if err := checkPodNetwork(); err != nil {
		return err
	}
	if err := checkBinaries(c.K8sBinDir); err != nil {
		return err
	}
	if err := checkCoreDNS(c.CoreDNSBinary); err != nil {
		return err
	}
	if err := checkPodSandbox(); err != nil {
		return err
	}
	if c.PrometheusBinary != "" {
		if _, err := os.Stat(c.PrometheusBinary); err != nil {
			return fmt.Errorf("prometheus: %w (make prometheus builds it; or run without: --prometheus=false)", err)
		}
	}
	if ip := net.ParseIP(c.HostAddress); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("host address %q is not a loopback address", c.HostAddress)
	}
	if _, err := os.Stat(filepath.Join(c.ConfigDir, "default")); err != nil {
		return fmt.Errorf("install config %s: %w (run paddock dev from the repository root, or pass --config-dir)", filepath.Join(c.ConfigDir, "default"), err)
	}
	return nil
}

// prepareState takes the state directory's lock, then empties it (unless Keep), records this
// process in its pid file, and sends the node agents' and client-go's logs to their file.
func (e *Env) prepareState(context.Context) error {
	// Refused before the lock file is made: nothing is written into someone else's directory.
	if err := refuseForeignDir(e.cfg.Dir); err != nil {
		return err
	}
	lock, err := lockState(e.cfg.Dir)
	if err != nil {
		return err
	}
	e.lock = lock
	if err := prepareDir(e.cfg.Dir, e.cfg.Keep); err != nil {
		return err
	}
	if err := writePIDFile(e.cfg.Dir, time.Now()); err != nil {
		return err
	}
	agentLog, err := e.openLog("node-agents")
	if err != nil {
		return err
	}
	agentLogger := zap.New(zap.WriteTo(agentLog))
	ctrl.SetLogger(agentLogger.WithName("controller-runtime"))
	klog.SetLogger(agentLogger.WithName("client-go"))
	e.ctx = log.IntoContext(e.ctx, agentLogger)
	return nil
}

// connectAndInstall makes the admin client and applies the operator's install manifests.
func (e *Env) connectAndInstall(ctx context.Context) error {
	e.restConfig = e.cp.restConfig
	s, err := scheme.New()
	if err != nil {
		return err
	}
	if e.client, err = client.New(e.restConfig, client.Options{Scheme: s}); err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	if e.cfg.NoOperator {
		return nil
	}
	return e.install(ctx)
}

// startClusterDNS starts CoreDNS. It comes before any pod: every pod resolves through it.
func (e *Env) startClusterDNS(ctx context.Context) error {
	var err error
	e.dns, err = e.startDNS(ctx)
	return err
}

// startNodes starts the service proxy (the apiserver forwarded to the host address first),
// the volume provisioner and the node agents.
func (e *Env) startNodes(context.Context) error {
	clientset, err := kubernetes.NewForConfig(e.restConfig)
	if err != nil {
		return fmt.Errorf("create clientset: %w", err)
	}
	images := map[string]string{e.inst.image: e.cfg.PaddockBinary}
	for image, bin := range e.cfg.Images {
		images[image] = bin
	}
	e.rt = &podRuntime{client: clientset, cfg: e.cfg, history: &history{}, images: images}
	logger := log.FromContext(e.ctx)
	e.proxy = newServiceProxy(clientset, e.cfg.HostAddress, e.runningNodeIPs, append(clusterDNSAddrs(), prometheusAddr()), logger.WithName("service-proxy"))
	if err := e.proxy.forward(e.cfg.hostAPIServerAddr(), e.cfg.apiServerAddr()); err != nil {
		e.proxy.close()
		return fmt.Errorf("forward the apiserver to %s (another paddock dev running? pass --host-address or --host-apiserver-port): %w", e.cfg.hostAPIServerAddr(), err)
	}
	// The node list is complete before the proxy runs: it reads it (runningNodeIPs) from its
	// own goroutine, and the list never changes afterwards.
	for i := range e.cfg.Nodes {
		e.nodes = append(e.nodes, newNodeAgent(i, e.rt))
	}
	e.wg.Add(2)
	go func() { defer e.wg.Done(); e.proxy.run(e.ctx) }()
	go func() { defer e.wg.Done(); provision(e.ctx, e.rt) }()
	for _, n := range e.nodes {
		if err := n.start(e.ctx); err != nil {
			return err
		}
	}
	return nil
}

// waitManager waits up to two minutes for the operator's Deployment to be Available.
func (e *Env) waitManager(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return e.waitManagerAvailable(ctx)
}

// serveShellAndControl writes .paddock/dev/shell and opens the control socket: the two ways
// into the running environment from another terminal.
func (e *Env) serveShellAndControl(context.Context) error {
	if err := writeShell(e.cfg.Dir); err != nil {
		return fmt.Errorf("write %s: %w", e.ShellPath(), err)
	}
	return e.serveControl(e.ctx)
}

// prepareDir empties dir (unless keep) and creates the layout. It refuses to empty a
// directory that paddock dev did not create, and keeps the files of the running process
// (its lock, pid file and output).
func prepareDir(dir string, keep bool) error {
	if !keep {
		if err := refuseForeignDir(dir); err != nil {
			return err
		}
		if err := wipeState(dir); err != nil {
			return fmt.Errorf("clean %s: %w", dir, err)
		}
	}
	for _, sub := range []string{"logs/pods", "run", "data"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", sub, err)
		}
	}
	return os.WriteFile(filepath.Join(dir, stateMarker), nil, 0o644)
}

// refuseForeignDir fails when dir holds files but was not made by paddock dev.
func refuseForeignDir(dir string) error {
	ours, empty, err := stateDirOwner(realHost(), dir)
	if err != nil {
		return err
	}
	if !ours && !empty {
		return fmt.Errorf("%s is not empty and was not made by paddock dev; refusing to wipe it", dir)
	}
	return nil
}

// wipeState removes everything in dir but the running process's own files.
func wipeState(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, entry := range entries {
		if processFile(entry.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, entry.Name())); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) openLog(name string) (*os.File, error) {
	f, err := os.OpenFile(e.cfg.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	e.logFiles = append(e.logFiles, f)
	return f, nil
}

// Stop stops everything the environment started: node agents (killing every pod process,
// the manager's too), provisioner, control plane. Safe to call more than once.
func (e *Env) Stop() {
	for _, n := range e.nodes {
		n.stop()
		n.killFrozen()
	}
	e.cancel()
	e.wg.Wait()
	e.prom.stop()
	e.dns.stop()
	if e.cp != nil {
		e.cp.stop()
	}
	for _, f := range e.logFiles {
		_ = f.Close() // the environment is gone; there is no one left to tell
	}
	e.logFiles = nil
	if e.lock != nil {
		// The files that say an environment runs go before the lock that proves it.
		_ = os.Remove(ControlSocket(e.cfg.Dir))
		_ = os.Remove(filepath.Join(e.cfg.Dir, pidFile))
		_ = e.lock.Close()
		e.lock = nil
	}
}

// MarkReady tells `paddock dev status` and a detached start's waiting parent that the
// environment is up and its instructions printed.
func (e *Env) MarkReady() { e.readyOnce.Do(func() { close(e.ready) }) }

// isReady reports whether MarkReady was called.
func (e *Env) isReady() bool {
	select {
	case <-e.ready:
		return true
	default:
		return false
	}
}

// StopRequested is closed when `paddock dev down` asks the environment to stop; whoever
// started it (paddock dev's run) stops it then.
func (e *Env) StopRequested() <-chan struct{} { return e.stopRequested }

func (e *Env) requestStop() { e.stopRequestedOnce.Do(func() { close(e.stopRequested) }) }

// Err reports a control-plane component that exited on its own.
func (e *Env) Err() error {
	if name := e.cp.exitedComponent(); name != "" {
		return fmt.Errorf("%s exited (see %s)", name, e.cfg.logPath(name))
	}
	if e.dns != nil && e.dns.proc.exited() {
		return fmt.Errorf("the cluster DNS exited (see %s)", e.cfg.logPath("coredns"))
	}
	if e.prom != nil && e.prom.proc.exited() {
		return fmt.Errorf("the dev Prometheus exited (see %s)", e.cfg.logPath("prometheus"))
	}
	return nil
}

// Client is an uncached client with the core and paddock types: every read sees the
// apiserver's current state.
func (e *Env) Client() client.Client { return e.client }

// RestConfig is the admin connection to the apiserver (system:masters). Only paddock dev's
// own process uses it: the control plane, the node agents and tests.
func (e *Env) RestConfig() *rest.Config { return rest.CopyConfig(e.restConfig) }

// KubeconfigPath is the admin kubeconfig file.
func (e *Env) KubeconfigPath() string { return e.cfg.KubeconfigPath() }

// AuditLogPath is the apiserver's audit log: one JSON event per request, with the identity
// that made it.
func (e *Env) AuditLogPath() string { return e.cfg.logPath("audit") }

// APIServerHost is the https URL pods reach the apiserver at.
func (e *Env) APIServerHost() string { return e.restConfig.Host }

// ShellPath is the script that runs a command (default: the caller's shell) inside the
// environment: its private network, and its mount namespace, where names resolve through the
// cluster DNS as in a pod of the default namespace. Run it from the host's network
// (HostCommand), as a person at the host terminal does.
func (e *Env) ShellPath() string { return filepath.Join(e.cfg.Dir, "shell") }

// Dir is the absolute state directory.
func (e *Env) Dir() string { return e.cfg.Dir }

// Nodes lists the Node names the agents play.
func (e *Env) Nodes() []string {
	names := make([]string, len(e.nodes))
	for i, n := range e.nodes {
		names[i] = n.name
	}
	return names
}

// StopNode is a node loss: its Lease stops being renewed and its processes are killed
// (StopNodeMode NodeFreeze keeps them, frozen).
func (e *Env) StopNode(name string) error {
	n, err := e.node(name)
	if err != nil {
		return err
	}
	n.stop()
	e.proxy.resync()
	return nil
}

// StartNode brings a stopped node back: it reports Ready again and restarts its pods.
func (e *Env) StartNode(name string) error {
	n, err := e.node(name)
	if err != nil {
		return err
	}
	defer e.proxy.resync()
	return n.start(e.ctx)
}

// runningNodeIPs are the InternalIPs of the nodes whose agents run: where nodePorts answer.
func (e *Env) runningNodeIPs() []string {
	var ips []string
	for _, n := range e.nodes {
		if n.running() {
			ips = append(ips, n.ips.nodeIP())
		}
	}
	return ips
}

func (e *Env) node(name string) (*nodeAgent, error) {
	for _, n := range e.nodes {
		if n.name == name {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no node %s", name)
}

// HoldRestarts keeps namespace/pod's crashed containers down while hold is true (a
// crash-looping container, for tests that need a broker to stay dead); releasing it lets the
// next backoff restart them.
func (e *Env) HoldRestarts(namespace, pod string, hold bool) {
	e.rt.mu.Lock()
	defer e.rt.mu.Unlock()
	if e.rt.held == nil {
		e.rt.held = map[string]bool{}
	}
	e.rt.held[namespace+"/"+pod] = hold
}

// StorageFaultsFile is the fault plan of pod namespace/name's broker: the node agent names it
// in every container's PADDOCK_DEV_STORAGE_FAULTS, and the broker re-reads it while it runs
// (broker/faults_dev.go). SetStorageFaults writes it.
func (c Config) StorageFaultsFile(namespace, pod string) string {
	return filepath.Join(c.Dir, "faults", namespace+"_"+pod)
}

// SetStorageFaults switches the storage fault plan of pod namespace/name's broker at run time:
// plan is storage.ParseFaultRules's syntax ("eio@topics/orders-AQID/0/"), "" clears it. The
// broker applies it within its poll interval (a quarter second).
func (e *Env) SetStorageFaults(namespace, pod, plan string) error {
	path := e.cfg.StorageFaultsFile(namespace, pod)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(plan), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// PIDFile is where the node agent writes the PID of pod namespace/name's first container.
func (e *Env) PIDFile(namespace, pod string) string {
	return filepath.Join(e.cfg.Dir, "run", namespace, pod+".pid")
}

// PID is the process id in namespace/pod's PID file: its running container's process.
func (e *Env) PID(namespace, pod string) (int, error) {
	b, err := os.ReadFile(e.PIDFile(namespace, pod))
	if err != nil {
		return 0, fmt.Errorf("read pid of %s/%s: %w", namespace, pod, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("pid file of %s/%s: %w", namespace, pod, err)
	}
	return pid, nil
}

// ContainerRuns lists the runs of namespace/pod's containers, oldest first.
func (e *Env) ContainerRuns(namespace, pod string) []ContainerRun {
	return e.rt.history.of(namespace, pod)
}

// ServiceAddress is "clusterIP:port" of namespace/service's port named port: where the
// service proxy answers for it inside the private network, whichever pods back it.
func (e *Env) ServiceAddress(ctx context.Context, namespace, service, port string) (string, error) {
	svc := &corev1.Service{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: service}, svc); err != nil {
		return "", fmt.Errorf("get service %s: %w", service, err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == port && svc.Spec.ClusterIP != "" && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(p.Port))), nil
		}
	}
	return "", fmt.Errorf("service %s has no ClusterIP port %s", service, port)
}

// HostNodePortAddress is "<host address>:<nodePort>" of namespace/service's port named port:
// where that nodePort answers from the host's network (and inside the private one).
func (e *Env) HostNodePortAddress(ctx context.Context, namespace, service, port string) (string, error) {
	svc := &corev1.Service{}
	if err := e.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: service}, svc); err != nil {
		return "", fmt.Errorf("get service %s: %w", service, err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == port && p.NodePort != 0 {
			return net.JoinHostPort(e.cfg.HostAddress, strconv.Itoa(int(p.NodePort))), nil
		}
	}
	return "", fmt.Errorf("service %s has no nodePort for port %s", service, port)
}

// TestHostAddress is a random loopback address 127.a.b.c (a ≥ 1) for a test environment's
// Config.HostAddress: environments of concurrent test runs on one machine then never compete
// for the host's 127.0.0.1 ports.
func TestHostAddress() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return fmt.Sprintf("127.%d.%d.%d", 1+int(b[0])%254, b[1], 1+int(b[2])%254)
}

// HostAddress is the loopback address the environment answers at on the host (Config).
func (e *Env) HostAddress() string { return e.cfg.HostAddress }

// HostListening lists the addresses the service proxy listens on in the host's network.
func (e *Env) HostListening() []string { return e.proxy.hostPorts() }

// Listener names of the sample cluster.
const (
	// SampleInternalListener is reached inside the private network; its brokers advertise
	// their pod DNS names (the default, PodDNS).
	SampleInternalListener = "kafka"
	// SampleExternalListener is a NodePort listener whose brokers advertise the host address
	// and their own nodePort: reachable from the host terminal.
	SampleExternalListener = "external"
	// SampleSecureListener is a NodePort listener like SampleExternalListener with TLS
	// (certificates from the cluster CA) and SCRAM-SHA-512: what `make dev` shows a secured
	// client with.
	SampleSecureListener = "secure"
	// SampleUser is the scram KafkaUser paddock dev makes for the secure listener.
	SampleUser = "alice"
)

// SampleSecureCluster is SampleCluster with the secure listener beside the other two, on
// port 9096: the cluster `make dev` applies (docs/security.md, "KafkaUser").
func SampleSecureCluster(namespace, name string, brokers int32, hostAddress string) *kafkav1alpha1.KafkaCluster {
	c := SampleCluster(namespace, name, brokers, hostAddress)
	c.Spec.Listeners = append(c.Spec.Listeners, kafkav1alpha1.Listener{
		Name: SampleSecureListener, Port: 9096, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHostTemplate: hostAddress,
		TLS: true, Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationScramSHA512},
	})
	return c
}

// SampleKafkaUser is the scram-sha-512 KafkaUser SampleUser of cluster.
func SampleKafkaUser(namespace, cluster string) *kafkav1alpha1.KafkaUser {
	return &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: SampleUser},
		Spec: kafkav1alpha1.KafkaUserSpec{Cluster: cluster, Authentication: &kafkav1alpha1.UserAuthentication{Type: kafkav1alpha1.UserScramSHA512}}}
}

// SampleCluster is the KafkaCluster paddock dev applies: an internal listener with the
// default advertised host, PodDNS (<pod>.<cluster>-brokers.<ns>.svc.cluster.local, which the
// environment's cluster DNS answers), an external NodePort listener whose
// brokers advertise hostAddress (the environment's host address, where every nodePort is
// forwarded) and their own nodePort, and one shared persistent claim (the dev provisioner
// backs it with a local directory).
func SampleCluster(namespace, name string, brokers int32, hostAddress string) *kafkav1alpha1.KafkaCluster {
	return &kafkav1alpha1.KafkaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: kafkav1alpha1.KafkaClusterSpec{
			Replicas: brokers,
			Listeners: []kafkav1alpha1.Listener{
				{Name: SampleInternalListener, Port: 9092, Type: kafkav1alpha1.ListenerInternal, AdvertisedHost: kafkav1alpha1.AdvertisePodDNS},
				{Name: SampleExternalListener, Port: 9094, Type: kafkav1alpha1.ListenerNodePort, AdvertisedHostTemplate: hostAddress},
			},
			Storage: kafkav1alpha1.Storage{
				Type: kafkav1alpha1.StoragePersistentClaim, AccessMode: corev1.ReadWriteMany,
			},
			Heartbeat: kafkav1alpha1.Heartbeat{
				Interval: &metav1.Duration{Duration: time.Second}, SessionTimeout: &metav1.Duration{Duration: 6 * time.Second},
			},
			DrainTimeout: &metav1.Duration{Duration: 30 * time.Second},
			Rack:         kafkav1alpha1.Rack{TopologyKey: corev1.LabelTopologyZone},
		},
	}
}
