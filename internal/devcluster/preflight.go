package devcluster

import (
	"errors"
	"fmt"
	"go/version"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Preflight: everything `paddock dev` needs from this machine is checked before it changes
// anything — nothing deleted, nothing started — and each requirement gets one line saying
// what was found and, when it is missing, what to do about it (docs/devcluster.md,
// "Preflight"). A running environment with the same state directory is one of them: it is
// left alone, and its line says how to reuse or stop it.

// host is what preflight reads of this machine. Tests replace its functions to play a machine
// that lacks one requirement; realHost reads the real one.
type host struct {
	lookPath func(file string) (string, error)
	stat     func(path string) (fs.FileInfo, error)
	readFile func(path string) ([]byte, error)
	getuid   func() int
	// tryPrivateNetwork starts ip (its path) in the namespaces RunInPrivateNetwork makes and
	// configures the loopback device there, as the environment's process will.
	tryPrivateNetwork func(ip string) error
	listen            func(network, addr string) (net.Listener, error)
	// freeBytes is the space available to this user on the filesystem holding path.
	freeBytes func(path string) (uint64, error)
	// goVersion is what `<goPath> env GOVERSION` prints, e.g. go1.26.1.
	goVersion func(goPath string) (string, error)
}

func realHost() host {
	return host{
		lookPath:          exec.LookPath,
		stat:              os.Stat,
		readFile:          os.ReadFile,
		getuid:            os.Getuid,
		tryPrivateNetwork: tryPrivateNetwork,
		listen:            net.Listen,
		freeBytes:         freeBytes,
		goVersion:         goVersion,
	}
}

// Disk space the environment needs on its state directory's filesystem: etcd, the logs (the
// audit log alone rotates at 200 MB, one backup) and the brokers' data. When the binaries are
// still to be built, the Go build cache grows by about 3 GB on a first build as well
// (docs/devcluster.md): that check asks for more.
const (
	diskNeeded          = 1 << 30
	diskNeededWithBuild = 4 << 30
)

// checkState is the outcome of one check.
type checkState int

const (
	checkOK checkState = iota
	// checkNote is a finding that stops nothing but that the person should know (a tool the
	// printed commands use is missing, a binary make dev builds next).
	checkNote
	checkFailed
)

// check is one requirement and what preflight found.
type check struct {
	name  string
	state checkState
	// found says what was found (ok) or what is wrong and what to do about it.
	found string
}

// preflightReport is every check, in the order they were made.
type preflightReport struct{ checks []check }

func (r *preflightReport) add(name string, state checkState, format string, a ...any) {
	r.checks = append(r.checks, check{name: name, state: state, found: fmt.Sprintf(format, a...)})
}

// failed lists the checks that failed.
func (r *preflightReport) failed() []check {
	var out []check
	for _, c := range r.checks {
		if c.state == checkFailed {
			out = append(out, c)
		}
	}
	return out
}

// print writes one line per check.
func (r *preflightReport) print(w io.Writer) {
	for _, c := range r.checks {
		mark := map[checkState]string{checkOK: "ok", checkNote: "note", checkFailed: "FAIL"}[c.state]
		fmt.Fprintf(w, "  %-4s  %-18s  %s\n", mark, c.name, c.found)
	}
}

// summary is the line that closes the report.
func (r *preflightReport) summary() string {
	if n := len(r.failed()); n > 0 {
		return fmt.Sprintf("paddock dev: %d of %d checks failed; nothing was changed (no file deleted, no process started)", n, len(r.checks))
	}
	var names []string
	for _, c := range r.checks {
		if c.state == checkOK {
			names = append(names, c.name)
		}
	}
	return "paddock dev: preflight passed: " + strings.Join(names, ", ")
}

// preflightMode says what the checks are for.
type preflightMode int

const (
	// beforeStart: paddock dev is about to start; every binary must be there.
	beforeStart preflightMode = iota
	// beforeBuild: make dev checks before it builds; missing binaries are notes (built next).
	beforeBuild
)

// preflight checks everything cfg needs from h, changing nothing. A running environment in
// cfg.Dir ends the checks at once: everything else (the apiserver port above all) is taken by
// that environment, and its line says what to do.
func preflight(cfg Config, h host, mode preflightMode) *preflightReport {
	r := &preflightReport{}
	if !checkNotRunning(r, cfg.Dir) {
		return r
	}
	checkStateDir(r, h, cfg)
	ip := checkTool(r, h, "ip", "iproute2", "paddock dev configures its private network with it")
	checkTool(r, h, "nsenter", "util-linux", "the shell .paddock/dev/shell enters the private network with it")
	checkNamespaces(r, h, ip)
	checkHostPort(r, h, cfg)
	pending := checkBuilt(r, h, cfg, mode)
	checkDisk(r, h, cfg.Dir, pending)
	checkGo(r, h, cfg.ConfigDir)
	checkConfigDir(r, h, cfg.ConfigDir)
	checkPrintedTools(r, h, cfg, mode)
	return r
}

// checkNotRunning fails when an environment runs with state directory dir.
func checkNotRunning(r *preflightReport, dir string) bool {
	run := findRunning(dir)
	if !run.running {
		r.add("environment", checkOK, "none running with state directory %s", dir)
		return true
	}
	r.add("environment", checkFailed, "%s; left alone. Reuse it: source %s, then kubectl, kcat, "+
		"paddock dev status. Or stop it first: paddock dev down (or Ctrl-C in its terminal)",
		run.describe(dir), filepath.Join(dir, "env"))
	return false
}

// checkStateDir fails when dir holds something paddock dev did not make (a clean start would
// wipe it), or, with --keep, holds no state to resume.
func checkStateDir(r *preflightReport, h host, cfg Config) {
	const name = "state directory"
	ours, empty, err := stateDirOwner(h, cfg.Dir)
	switch {
	case err != nil:
		r.add(name, checkFailed, "%s: %v", cfg.Dir, err)
	case cfg.Keep && empty:
		r.add(name, checkFailed, "%s holds no previous state to resume (--keep): run without --keep", cfg.Dir)
	case !ours && !empty:
		r.add(name, checkFailed, "%s is not empty and was not made by paddock dev (no %s in it); "+
			"a clean start would wipe it: pass --dir=<another directory>, or empty it yourself", cfg.Dir, stateMarker)
	case cfg.Keep:
		r.add(name, checkOK, "%s (resumed: --keep)", cfg.Dir)
	case empty:
		r.add(name, checkOK, "%s (new)", cfg.Dir)
	default:
		r.add(name, checkOK, "%s (the previous run's state is wiped at start; --keep resumes it instead)", cfg.Dir)
	}
}

// stateDirOwner reports whether dir was made by paddock dev, and whether it is absent or
// empty. The files of a starting process (its lock, pid file, detached output: running.go),
// made before the marker, do not count.
func stateDirOwner(h host, dir string) (ours, empty bool, err error) {
	if _, err := h.stat(filepath.Join(dir, stateMarker)); err == nil {
		return true, false, nil
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, true, nil
	}
	if err != nil {
		return false, false, err
	}
	for _, e := range entries {
		if !processFile(e.Name()) {
			return false, false, nil
		}
	}
	return false, true, nil
}

// checkTool finds file (from package pkg) on PATH and returns its path, or "" after adding
// the line that says how to install it.
func checkTool(r *preflightReport, h host, file, pkg, why string) string {
	path, err := h.lookPath(file)
	if err != nil {
		r.add(file, checkFailed, "not found on PATH; %s: install %s (e.g. apt-get install %s)", why, pkg, pkg)
		return ""
	}
	r.add(file, checkOK, "%s", path)
	return path
}

// checkNamespaces makes the namespaces RunInPrivateNetwork makes (a user namespace too when
// not root) and configures a network device in them, as the environment will. When that
// fails, the line says which setting of this machine refuses it.
func checkNamespaces(r *preflightReport, h host, ip string) {
	name := "user namespaces"
	if h.getuid() == 0 {
		name = "namespaces (root)"
	}
	if ip == "" {
		r.add(name, checkFailed, "not tried: trying them needs ip (above)")
		return
	}
	err := h.tryPrivateNetwork(ip)
	switch {
	case err == nil && h.getuid() == 0:
		r.add(name, checkOK, "running as root: network and mount namespaces can be made")
	case err == nil:
		r.add(name, checkOK, "unprivileged user namespaces work (the environment runs as root of its own user namespace)")
	case h.getuid() == 0:
		r.add(name, checkFailed, "root cannot make network and mount namespaces here (%v): in a container, "+
			"run it privileged (CAP_SYS_ADMIN, CAP_NET_ADMIN)", err)
	default:
		r.add(name, checkFailed, "%s (%v)", userNamespaceAdvice(h), err)
	}
}

// userNamespaceAdvice names the setting that keeps an unprivileged user from making a user
// namespace with the capabilities paddock dev needs in it, and how to change it.
func userNamespaceAdvice(h host) string {
	sysctl := func(path string) string {
		b, err := h.readFile(path)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	switch {
	case sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
		return "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1): " +
			"run make dev as root, or allow them: sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	case sysctl("/proc/sys/kernel/unprivileged_userns_clone") == "0":
		return "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0): " +
			"run make dev as root, or allow them: sudo sysctl -w kernel.unprivileged_userns_clone=1"
	case sysctl("/proc/sys/user/max_user_namespaces") == "0":
		return "user namespaces are disabled (user.max_user_namespaces=0): " +
			"run make dev as root, or allow them: sudo sysctl -w user.max_user_namespaces=15000"
	}
	return "an unprivileged user namespace with a network of its own cannot be made here: run make dev as root"
}

// checkHostPort fails when the apiserver's host address is not a loopback address or its port
// there is taken. (The nodePorts are the apiserver's to pick once it runs; a taken one is
// logged and retried, docs/devcluster.md.)
func checkHostPort(r *preflightReport, h host, cfg Config) {
	addr := cfg.hostAPIServerAddr()
	if ip := net.ParseIP(cfg.HostAddress); ip == nil || !ip.IsLoopback() {
		r.add("apiserver port", checkFailed, "--host-address %q is not a loopback address: pass one in 127.0.0.0/8", cfg.HostAddress)
		return
	}
	l, err := h.listen("tcp", addr)
	if err != nil {
		r.add("apiserver port", checkFailed, "%s is taken (%v): another paddock dev with another --dir, or a "+
			"Kubernetes apiserver, holds it; stop it, or pass --host-apiserver-port or --host-address", addr, err)
		return
	}
	_ = l.Close() // only probing
	r.add("apiserver port", checkOK, "%s is free (kubectl reaches the apiserver there)", addr)
}

// checkBuilt checks the control-plane binaries and CoreDNS and reports whether some are
// still to be built (beforeBuild: make dev builds them next).
func checkBuilt(r *preflightReport, h host, cfg Config, mode preflightMode) (pending bool) {
	type built struct {
		name, dir, make, flag string
		files                 []string
	}
	bins := []built{
		{"control-plane bins", cfg.K8sBinDir, "make k8s-bins", "--k8s-bin-dir", k8sBinaries},
		{"cluster DNS", filepath.Dir(cfg.CoreDNSBinary), "make coredns", "--coredns", []string{filepath.Base(cfg.CoreDNSBinary)}},
	}
	if cfg.PrometheusBinary != "" {
		bins = append(bins, built{"prometheus", filepath.Dir(cfg.PrometheusBinary), "make prometheus", "--prometheus-binary (or --prometheus=false)", []string{filepath.Base(cfg.PrometheusBinary)}})
	}
	for _, b := range bins {
		missing := missingFiles(h, b.dir, b.files...)
		switch {
		case len(missing) == 0:
			r.add(b.name, checkOK, "%s in %s", strings.Join(b.files, ", "), b.dir)
		case mode == beforeBuild:
			pending = true
			r.add(b.name, checkNote, "%s not built yet: make dev builds it next (%s; the first time takes minutes, see the README)",
				strings.Join(missing, ", "), b.make)
		default:
			r.add(b.name, checkFailed, "%s not found in %s: build with %s (make dev does), or pass %s",
				strings.Join(missing, ", "), b.dir, b.make, b.flag)
		}
	}
	return pending
}

// missingFiles lists the names that are not in dir.
func missingFiles(h host, dir string, names ...string) []string {
	var out []string
	for _, n := range names {
		if _, err := h.stat(filepath.Join(dir, n)); err != nil {
			out = append(out, n)
		}
	}
	return out
}

// checkDisk fails when the state directory's filesystem has less room than the environment
// (and, with builds pending, the first build) needs.
func checkDisk(r *preflightReport, h host, dir string, buildsPending bool) {
	need := uint64(diskNeeded)
	if buildsPending {
		need = diskNeededWithBuild
	}
	existing := nearestExisting(h, dir)
	free, err := h.freeBytes(existing)
	switch {
	case err != nil:
		r.add("disk space", checkFailed, "cannot tell the free space at %s: %v", existing, err)
	case free < need:
		r.add("disk space", checkFailed, "%s free at %s, %s needed (the environment's logs and data%s): free some space, or pass --dir on another filesystem",
			gib(free), existing, gib(need), map[bool]string{true: ", and the first build's Go build cache", false: ""}[buildsPending])
	default:
		r.add("disk space", checkOK, "%s free at %s", gib(free), existing)
	}
}

// nearestExisting is dir, or its closest ancestor that exists (where it will be created).
func nearestExisting(h host, dir string) string {
	dir = filepath.Clean(dir)
	for {
		if _, err := h.stat(dir); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return dir
		}
		dir = parent
	}
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// checkGo fails unless the go on PATH is at least the version the repository's go.mod asks
// for: make dev builds the paddock binary and the control plane with it.
func checkGo(r *preflightReport, h host, configDir string) {
	goMod := filepath.Join(filepath.Dir(filepath.Clean(configDir)), "go.mod")
	want := ""
	if b, err := h.readFile(goMod); err == nil {
		want = goDirective(b)
	}
	path, err := h.lookPath("go")
	if err != nil {
		r.add("go", checkFailed, "not found on PATH: make dev builds paddock and the control plane with Go %s or later; install it", strings.TrimPrefix(want, "go"))
		return
	}
	have, err := h.goVersion(path)
	switch {
	case err != nil:
		r.add("go", checkFailed, "%s env GOVERSION failed: %v", path, err)
	case want != "" && version.Compare(have, want) < 0:
		r.add("go", checkFailed, "%s is %s, %s asks for %s or later: install a newer Go (or set GOTOOLCHAIN=auto)", path, have, goMod, want)
	default:
		r.add("go", checkOK, "%s (%s)", have, path)
	}
}

// goDirective is go.mod's go line as a Go version ("go1.26.0"), or "".
func goDirective(goMod []byte) string {
	for _, line := range strings.Split(string(goMod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
			return "go" + strings.TrimSpace(v)
		}
	}
	return ""
}

// checkConfigDir fails unless the operator's kustomize config is where paddock dev looks.
func checkConfigDir(r *preflightReport, h host, configDir string) {
	dir := filepath.Join(configDir, "default")
	if _, err := h.stat(dir); err != nil {
		r.add("operator config", checkFailed, "%s not found: run make dev (paddock dev) from the repository root, or pass --config-dir", dir)
		return
	}
	r.add("operator config", checkOK, "%s (installed as dist/install.yaml installs it)", dir)
}

// checkPrintedTools notes a missing kubectl or kcat: the environment runs without them, but
// the commands it prints use them.
func checkPrintedTools(r *preflightReport, h host, cfg Config, mode preflightMode) {
	kubectl := filepath.Join(cfg.BinDir, "kubectl")
	switch _, err := h.stat(kubectl); {
	case err == nil:
		r.add("kubectl", checkOK, "%s", kubectl)
	case mode == beforeBuild:
		r.add("kubectl", checkNote, "%s not built yet: make dev builds it next (make kubectl)", kubectl)
	default:
		r.add("kubectl", checkNote, "%s not found: the kubectl commands paddock dev prints need it: make kubectl", kubectl)
	}
	switch path, err := h.lookPath("kcat"); {
	case err == nil:
		r.add("kcat", checkOK, "%s", path)
	case mode == beforeBuild:
		r.add("kcat", checkNote, "not on PATH: make dev installs it next (make kcat, with apt-get)")
	default:
		r.add("kcat", checkNote, "not on PATH: the kcat commands paddock dev prints need it: make kcat (apt-get install kcat)")
	}
}

// privateNetworkAttr is how RunInPrivateNetwork starts its child: new network and mount
// namespaces, and, when not root, a user namespace mapping the caller to root so it may
// configure them.
func privateNetworkAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if os.Getuid() != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
	}
	return attr
}

// tryPrivateNetwork runs `ip link set lo up` in the namespaces of privateNetworkAttr: what
// SetupPrivateNetwork does first. They go away with the process.
func tryPrivateNetwork(ip string) error {
	cmd := exec.Command(ip, "link", "set", "lo", "up")
	cmd.SysProcAttr = privateNetworkAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		if msg := strings.TrimSpace(string(out)); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

func freeBytes(path string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func goVersion(goPath string) (string, error) {
	out, err := exec.Command(goPath, "env", "GOVERSION").Output()
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(out))
	if !version.IsValid(v) {
		return "", fmt.Errorf("unexpected version %s", strconv.Quote(v))
	}
	return v, nil
}
