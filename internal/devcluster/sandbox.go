package devcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A pod's processes get what a container runtime gives them and the rest of the machine
// stays as it is: each container process runs in its own mount namespace where
//
//   - /var/run (/run) is a fresh tmpfs holding only the container's volume mounts under it —
//     above all the ServiceAccount volume the ServiceAccount admission plugin adds at
//     /var/run/secrets/kubernetes.io/serviceaccount, so client-go's in-cluster config finds
//     the pod's bound token, the cluster CA and the namespace where it finds them in a cluster;
//   - the environment's admin credentials (the pki directory, which also holds every pod's
//     token volume, and the admin kubeconfig) are covered by an empty tmpfs or /dev/null;
//   - /etc/resolv.conf is the pod's own, as the kubelet writes it (dns.go): the cluster DNS
//     and the search path of the pod's namespace;
//   - the capability bounding set is empty, so the process runs without capabilities (the
//     brokers' and the manager's securityContext drop ALL) and cannot unmount what hides the
//     credentials.
//
// Volume mounts elsewhere keep being local directories whose paths are rewritten into the
// container's arguments (container.go): creating their mount points would mean covering
// host directories such as /var/lib.
//
// A mount namespace needs CAP_SYS_ADMIN: paddock dev has it as root, or as root of the user
// namespace RunInPrivateNetwork makes when it is started unprivileged. Without it a pod's
// container does not start and says why; it never falls back to the admin identity.

// ServiceAccountDir is where client-go's in-cluster config reads the token, CA and namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// podSandbox is the mount-namespace part of one container process.
type podSandbox struct {
	// runMounts are bind-mounted at their real path under the container's own /run.
	runMounts []runMount
	// masked are host paths the process must not read: a directory gets an empty tmpfs over
	// it, a file /dev/null. Paths that do not exist are skipped.
	masked []string
	// resolvConf is the host path of the pod's resolv.conf, bind-mounted at /etc/resolv.conf;
	// empty keeps the environment's.
	resolvConf string
}

// runMount is one volume mount under /var/run.
type runMount struct {
	path     string // in the container, under /var/run or /run
	hostPath string
	readOnly bool
}

// runRelative returns p relative to /var/run (or /run) and whether p is under it: those
// mounts are real in the pod's sandbox, the others are path-rewritten.
func runRelative(p string) (string, bool) {
	p = filepath.Clean(p)
	for _, root := range []string{"/var/run", "/run"} {
		if p == root {
			return ".", true
		}
		if rel, ok := strings.CutPrefix(p, root+"/"); ok {
			return rel, true
		}
	}
	return "", false
}

// enter makes the calling OS thread's mount namespace the sandbox. The thread must be locked
// (runtime.LockOSThread) and must never run another goroutine again: it ends with its
// goroutine, and the namespace with it.
func (s *podSandbox) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("create the pod's mount namespace (paddock dev needs root, or unprivileged user namespaces): %w", err)
	}
	// Nothing mounted here may show up on the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the pod's mounts private: %w", err)
	}
	// Where /etc/resolv.conf really is, found before the host's /run is covered: it may be
	// a symlink into it.
	var resolvTarget string
	if s.resolvConf != "" {
		var err error
		if resolvTarget, err = realResolvConf(); err != nil {
			return err
		}
	}
	if err := s.mountRun(); err != nil {
		return err
	}
	if s.resolvConf != "" {
		if err := bindResolvConf(s.resolvConf, resolvTarget); err != nil {
			return fmt.Errorf("give the pod its resolv.conf: %w", err)
		}
	}
	if err := s.hideMasked(); err != nil {
		return err
	}
	return dropCapabilityBoundingSet()
}

// mountRun puts a fresh tmpfs on /run and bind-mounts each of the container's volume mounts
// under /var/run at its path there.
func (s *podSandbox) mountRun() error {
	runDir := hostRunDir()
	if err := unix.Mount("tmpfs", runDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mount the pod's own %s: %w", runDir, err)
	}
	for _, m := range s.runMounts {
		rel, ok := runRelative(m.path)
		if !ok {
			return fmt.Errorf("mount %s is not under /var/run", m.path)
		}
		target := filepath.Join(runDir, rel)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return fmt.Errorf("create mount point %s: %w", m.path, err)
		}
		if err := unix.Mount(m.hostPath, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", m.hostPath, m.path, err)
		}
		if m.readOnly {
			if err := unix.Mount("", target, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("make %s read-only: %w", m.path, err)
			}
		}
	}
	return nil
}

// hideMasked covers each masked path: a directory with an empty read-only tmpfs, a file with
// /dev/null.
func (s *podSandbox) hideMasked() error {
	for _, p := range s.masked {
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("hide %s: %w", p, err)
		case fi.IsDir():
			err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC|unix.MS_RDONLY, "mode=0700,size=4k")
		default:
			err = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
		}
		if err != nil {
			return fmt.Errorf("hide %s: %w", p, err)
		}
	}
	return nil
}

// hostRunDir is what /var/run is on this machine: usually a symlink to /run.
func hostRunDir() string {
	if d, err := filepath.EvalSymlinks("/var/run"); err == nil {
		return d
	}
	return "/run"
}

// dropCapabilityBoundingSet empties the thread's capability bounding set: a process it then
// starts has no capabilities, even as root.
func dropCapabilityBoundingSet() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}

// checkPodSandbox fails with a clear error when pod sandboxes cannot be made here.
func checkPodSandbox() error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		done <- (&podSandbox{}).enter()
	}()
	if err := <-done; err != nil {
		return fmt.Errorf("paddock dev runs every pod process in its own mount namespace, where its "+
			"ServiceAccount token is at %s and the admin credentials are hidden, and cannot make one here: %w",
			ServiceAccountDir, err)
	}
	return nil
}
