package devcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// machine is a machine that has everything paddock dev needs: real directories (a checkout
// with config/default and go.mod, built binaries, a state directory left by a previous run)
// under t.TempDir, and host functions that find the tools. Each preflight test takes one
// thing away.
type machine struct {
	cfg   Config
	host  host
	tools map[string]string // what lookPath finds
	files map[string]string // what readFile returns for paths outside the temp dir
}

func newMachine(t *testing.T) *machine {
	t.Helper()
	root := t.TempDir()
	m := &machine{
		tools: map[string]string{"ip": "/usr/sbin/ip", "nsenter": "/usr/bin/nsenter", "go": "/usr/local/go/bin/go", "kcat": "/usr/bin/kcat"},
		files: map[string]string{},
	}
	repo := filepath.Join(root, "repo")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(repo, "go.mod"), "module example.com/paddock\n\ngo 1.26.0\n")
	write(filepath.Join(repo, "config", "default", "kustomization.yaml"), "resources: []\n")
	bin := filepath.Join(repo, "bin")
	for _, b := range k8sBinaries {
		write(filepath.Join(bin, "k8s", "1.37.2", b), "binary")
	}
	write(filepath.Join(bin, "coredns-v"+coreDNSVersion), "binary")
	write(filepath.Join(bin, "kubectl"), "binary")
	// The state of an earlier run, which no failed preflight may touch.
	dir := filepath.Join(repo, ".paddock", "dev")
	write(filepath.Join(dir, stateMarker), "")
	write(filepath.Join(dir, "kubeconfig"), "apiVersion: v1\n")
	write(filepath.Join(dir, "pki", caCertFile), "ca")
	write(filepath.Join(dir, "logs", "etcd.log"), "earlier run\n")

	m.cfg = DefaultConfig()
	m.cfg.Dir = dir
	m.cfg.K8sBinDir = filepath.Join(bin, "k8s", "1.37.2")
	m.cfg.CoreDNSBinary = filepath.Join(bin, "coredns-v"+coreDNSVersion)
	m.cfg.BinDir = bin
	m.cfg.ConfigDir = filepath.Join(repo, "config")
	m.cfg.HostAddress = TestHostAddress()
	m.cfg.HostAPIServerPort = freePort(t)

	m.host = host{
		lookPath: func(file string) (string, error) {
			if p, ok := m.tools[file]; ok {
				return p, nil
			}
			return "", fmt.Errorf("exec: %q: executable file not found in $PATH", file)
		},
		stat: os.Stat,
		readFile: func(path string) ([]byte, error) {
			if c, ok := m.files[path]; ok {
				return []byte(c), nil
			}
			if strings.HasPrefix(path, "/proc/") {
				return nil, fs.ErrNotExist // a kernel without the setting
			}
			return os.ReadFile(path)
		},
		getuid:            func() int { return 1000 },
		tryPrivateNetwork: func(string) error { return nil },
		listen:            net.Listen,
		freeBytes:         func(string) (uint64, error) { return 50 << 30, nil },
		goVersion:         func(string) (string, error) { return "go1.26.1", nil },
	}
	return m
}

// freePort is a port nothing listens on now, at the loopback address (a real one: the
// port check listens on it).
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// snapshot is every file under dir with its content and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && path == dir {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s %d", path, fi.Mode(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			content, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %q", content)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// start runs what `paddock dev` runs first against m, and reports what it printed and whether
// it went on to start the environment.
func (m *machine) start(mode preflightMode) (code int, out string, launched bool) {
	var buf bytes.Buffer
	code = preflightThen(m.cfg, m.host, mode, &buf, func() int { launched = true; return 0 })
	return code, buf.String(), launched
}

// TestPreflightNamesEachMissingRequirementAndChangesNothing: with one requirement missing,
// paddock dev prints that requirement's line — what is wrong and what to do — and stops: the
// earlier run's state directory is as it was and nothing is started.
func TestPreflightNamesEachMissingRequirementAndChangesNothing(t *testing.T) {
	cases := []struct {
		requirement string
		take        func(t *testing.T, m *machine)
		check, says string
	}{
		{"ip (iproute2) is on PATH", func(_ *testing.T, m *machine) { delete(m.tools, "ip") },
			"ip", "install iproute2"},
		{"nsenter (util-linux) is on PATH", func(_ *testing.T, m *machine) { delete(m.tools, "nsenter") },
			"nsenter", ".paddock/dev/shell enters the private network with it: install util-linux"},
		{"user namespaces are not restricted by AppArmor", func(_ *testing.T, m *machine) {
			m.host.tryPrivateNetwork = func(string) error { return errors.New("exit status 2: RTNETLINK answers: Operation not permitted") }
			m.files["/proc/sys/kernel/apparmor_restrict_unprivileged_userns"] = "1\n"
		}, "user namespaces", "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"},
		{"unprivileged user namespaces are enabled", func(_ *testing.T, m *machine) {
			m.host.tryPrivateNetwork = func(string) error { return syscall.EPERM }
			m.files["/proc/sys/kernel/unprivileged_userns_clone"] = "0\n"
		}, "user namespaces", "sudo sysctl -w kernel.unprivileged_userns_clone=1"},
		{"root may make namespaces (not an unprivileged container)", func(_ *testing.T, m *machine) {
			m.host.getuid = func() int { return 0 }
			m.host.tryPrivateNetwork = func(string) error { return syscall.EPERM }
		}, "namespaces (root)", "run it privileged"},
		{"the apiserver's host port is free", func(t *testing.T, m *machine) {
			l, err := net.Listen("tcp", net.JoinHostPort(m.cfg.HostAddress, strconv.Itoa(m.cfg.HostAPIServerPort)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
		}, "apiserver port", "is taken"},
		{"the host address is a loopback address", func(_ *testing.T, m *machine) { m.cfg.HostAddress = "10.1.2.3" },
			"apiserver port", "is not a loopback address"},
		{"the state directory's filesystem has room", func(_ *testing.T, m *machine) {
			m.host.freeBytes = func(string) (uint64, error) { return 200 << 20, nil }
		}, "disk space", "0.2 GiB free"},
		{"go is on PATH", func(_ *testing.T, m *machine) { delete(m.tools, "go") },
			"go", "Go 1.26.0 or later; install it"},
		{"go is as new as go.mod asks", func(_ *testing.T, m *machine) {
			m.host.goVersion = func(string) (string, error) { return "go1.25.3", nil }
		}, "go", "is go1.25.3"},
		{"the control-plane binaries are built", func(t *testing.T, m *machine) {
			if err := os.Remove(filepath.Join(m.cfg.K8sBinDir, "kube-apiserver")); err != nil {
				t.Fatal(err)
			}
		}, "control-plane bins", "kube-apiserver not found in " + "%k8s%" + ": build with make k8s-bins"},
		{"CoreDNS is built", func(t *testing.T, m *machine) {
			if err := os.Remove(m.cfg.CoreDNSBinary); err != nil {
				t.Fatal(err)
			}
		}, "cluster DNS", "build with make coredns"},
		{"it runs from the repository root", func(_ *testing.T, m *machine) { m.cfg.ConfigDir = "config" },
			"operator config", "from the repository root, or pass --config-dir"},
		{"the state directory is paddock dev's", func(t *testing.T, m *machine) {
			if err := os.Remove(filepath.Join(m.cfg.Dir, stateMarker)); err != nil {
				t.Fatal(err)
			}
		}, "state directory", "was not made by paddock dev"},
		{"--keep has a state to resume", func(t *testing.T, m *machine) {
			m.cfg.Keep = true
			m.cfg.Dir = filepath.Join(t.TempDir(), "never-ran")
		}, "state directory", "holds no previous state to resume"},
		{"no environment runs with the state directory", func(t *testing.T, m *machine) {
			lock, err := lockState(m.cfg.Dir) // as the running environment's process holds it
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = lock.Close() })
		}, "environment", "already running with state directory"},
	}
	for _, tc := range cases {
		t.Run(tc.requirement, func(t *testing.T) {
			m := newMachine(t)
			tc.take(t, m)
			before := snapshot(t, m.cfg.Dir)
			code, out, launched := m.start(beforeStart)
			line := failedLine(out, tc.check)
			says := strings.ReplaceAll(tc.says, "%k8s%", m.cfg.K8sBinDir)
			if code != 1 || launched || !strings.Contains(line, says) {
				t.Fatalf("exit %d, launched %v, %s line %q; want exit 1, nothing launched, a FAIL line saying %q\n%s",
					code, launched, tc.check, line, says, out)
			}
			if !strings.Contains(out, "nothing was changed") {
				t.Errorf("the report does not say nothing was changed:\n%s", out)
			}
			if after := snapshot(t, m.cfg.Dir); after != before {
				t.Errorf("the state directory changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// failedLine is the FAIL line of check in a preflight report, or "".
func failedLine(report, check string) string {
	for _, line := range strings.Split(report, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "FAIL"); ok && strings.HasPrefix(strings.TrimSpace(rest), check+"  ") {
			return line
		}
	}
	return ""
}

// TestPreflightPassesOnAMachineWithEverything: nothing missing, one summary line, and the
// environment is started.
func TestPreflightPassesOnAMachineWithEverything(t *testing.T) {
	m := newMachine(t)
	code, out, launched := m.start(beforeStart)
	if code != 0 || !launched || !strings.HasPrefix(out, "paddock dev: preflight passed: environment, state directory, ip, nsenter") {
		t.Fatalf("exit %d, launched %v:\n%s", code, launched, out)
	}
}

// TestPreflightNotesWhatThePrintedCommandsNeedWithoutStopping: kubectl and kcat are not
// needed to run the environment, only by the commands it prints — a note each, and it starts.
func TestPreflightNotesWhatThePrintedCommandsNeedWithoutStopping(t *testing.T) {
	m := newMachine(t)
	delete(m.tools, "kcat")
	if err := os.Remove(filepath.Join(m.cfg.BinDir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	report := preflight(m.cfg, m.host, beforeStart)
	var buf bytes.Buffer
	report.print(&buf)
	for _, want := range []string{"make kubectl", "make kcat"} {
		if !strings.Contains(buf.String(), "note  ") || !strings.Contains(buf.String(), want) {
			t.Errorf("no note saying %q:\n%s", want, buf.String())
		}
	}
	if code, _, launched := m.start(beforeStart); code != 0 || !launched {
		t.Errorf("exit %d, launched %v; want it to start without kubectl and kcat", code, launched)
	}
}

// TestPreflightBeforeTheBuildCountsMissingBinariesAsNext: make dev checks before it builds,
// so binaries it is about to build are notes — but the first build's room on disk is asked for.
func TestPreflightBeforeTheBuildCountsMissingBinariesAsNext(t *testing.T) {
	m := newMachine(t)
	for _, b := range k8sBinaries {
		if err := os.Remove(filepath.Join(m.cfg.K8sBinDir, b)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(m.cfg.CoreDNSBinary); err != nil {
		t.Fatal(err)
	}
	m.host.freeBytes = func(string) (uint64, error) { return 2 << 30, nil } // enough to run, not to build
	code, out, launched := m.start(beforeBuild)
	if code != 1 || launched || !strings.Contains(failedLine(out, "disk space"), "the first build's Go build cache") {
		t.Fatalf("with 2 GiB free and the binaries to build: exit %d, launched %v; want the disk space line\n%s", code, launched, out)
	}
	if !strings.Contains(out, "make dev builds it next (make k8s-bins") || failedLine(out, "control-plane bins") != "" {
		t.Errorf("missing binaries before the build are not a note saying make dev builds them:\n%s", out)
	}
	m.host.freeBytes = func(string) (uint64, error) { return 10 << 30, nil }
	if code, out, launched := m.start(beforeBuild); code != 0 || !launched {
		t.Errorf("with room: exit %d, launched %v\n%s", code, launched, out)
	}
}
