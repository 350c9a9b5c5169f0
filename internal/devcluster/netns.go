package devcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Pod IPs. Every pod gets its own address so every broker can listen on the same port, as
// in a real cluster. They cannot be loopback addresses (127.0.0.0/8): the apiserver rejects
// loopback addresses in EndpointSlices, and the registry is built on EndpointSlices. So the
// environment runs in a private network namespace whose loopback device also answers for a
// whole test range (RFC 2544 benchmarking addresses, never routed on real networks): any
// 198.18.x.y can be bound and reached inside the namespace, and nothing of the environment is
// reachable from, or visible to, the host network.
const (
	podNetwork        = "198.18.0.0/15"
	privateNetworkEnv = "PADDOCK_DEV_PRIVATE_NETWORK"
)

// InPrivateNetwork reports whether this process runs inside the environment's private network
// namespace (it was started by RunInPrivateNetwork).
func InPrivateNetwork() bool { return os.Getenv(privateNetworkEnv) != "" }

// inOwnUserNamespace reports whether RunInPrivateNetwork also made a user namespace (it ran
// unprivileged); joining the network then means joining that user namespace too.
func inOwnUserNamespace() bool { return os.Getenv(privateNetworkEnv) == "user" }

// RunInPrivateNetwork runs this program again, with the same arguments, in a new network
// namespace and a new mount namespace (and, when not root, a user namespace that maps the
// caller to root so it may configure them), forwards signals to it, and returns its exit
// code. The mount namespace is where the environment's process resolves through the cluster
// DNS (dns.go) while this machine's own /etc/resolv.conf stays as it is. The child must
// call SetupPrivateNetwork first thing. While the child runs, this process serves its host
// link (hostlink.go): the child's way to listen on, and dial, the host's network.
func RunInPrivateNetwork() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("find own executable: %w", err)
	}
	link, childEnd, err := newHostLink()
	if err != nil {
		return 1, err
	}
	cmd := exec.Command(self, os.Args[1:]...)
	cmd.ExtraFiles = []*os.File{childEnd} // descriptor 3 in the child
	env := append(os.Environ(), hostLinkEnv+"=3")
	cmd.Env = append(env, privateNetworkEnv+"=net")
	if os.Getuid() != 0 {
		cmd.Env = append(env, privateNetworkEnv+"=user")
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = privateNetworkAttr() // what preflight tried (preflight.go)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)
	err = cmd.Start()
	_ = childEnd.Close() // the child has its own copy now (or never started)
	if err != nil {
		_ = link.Close()
		return 1, fmt.Errorf("start in a private network namespace (needs root or unprivileged user namespaces): %w", err)
	}
	go serveHostLink(link)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				return exitErr.ExitCode(), nil
			}
			if err != nil {
				return 1, err
			}
			return 0, nil
		}
	}
}

// SetupPrivateNetwork brings the namespace's loopback device up and makes it answer for the
// whole pod network and the Services' ClusterIP range, and points this process's resolver at
// the cluster DNS, with the search path of a pod in the default namespace (useClusterResolver):
// names resolve as they would inside the cluster once Start has brought the DNS up.
func SetupPrivateNetwork() error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "add", "local", podNetwork, "dev", "lo"},
		// ClusterIPs are local too, so the service proxy can listen on them (proxy.go).
		{"route", "add", "local", serviceClusterIPRange, "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s (paddock dev needs iproute2's `ip`)", args, err, out)
		}
	}
	return useClusterResolver()
}

// checkPodNetwork fails unless a pod address can be bound here.
func checkPodNetwork() error {
	l, err := net.Listen("tcp", "198.18.0.1:0")
	if err != nil {
		return fmt.Errorf("pod network %s is not local here (run inside RunInPrivateNetwork): %w", podNetwork, err)
	}
	return l.Close()
}
