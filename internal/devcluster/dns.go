package devcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// The cluster DNS. paddock dev runs CoreDNS with its kubernetes plugin (built from the Go
// module proxy by `hack/k8s-bins.sh coredns`, hack/coredns), as kubeadm's clusters do, with
// two differences: it forwards nothing and caches nothing — a name outside the cluster's
// zones is refused, and every answer follows the EndpointSlices at once with a 1 s TTL.
//
// It is an environment component like the control plane, not a pod: it listens on the
// kube-dns Service's ClusterIP itself (the private network's loopback answers for the
// ClusterIP range), on UDP and TCP port 53, so the service proxy, which plays TCP only, leaves
// that address alone. It connects to the apiserver as the ServiceAccount kube-system/coredns
// with kubeadm's system:coredns rules, through a long-lived ServiceAccount token Secret.
//
// Every pod process resolves through it: the node agent writes each pod the resolv.conf a
// kubelet would (podResolvConf) and the pod's sandbox bind-mounts it at /etc/resolv.conf. The
// environment's own process — the node agents, the tests, and .paddock/dev/shell, which
// enters its mount namespace — resolves like a pod of the default namespace
// (SetupPrivateNetwork). Host-side processes keep the host's resolver.

const (
	// ClusterDomain is the environment's cluster domain (the kubelet's --cluster-domain, the
	// broker's --cluster-domain default).
	ClusterDomain = "cluster.local"
	// ClusterDNSIP is the kube-dns Service's ClusterIP: the nameserver of every pod.
	ClusterDNSIP = "10.96.0.10"
	// dnsReadyPort is CoreDNS's ready plugin port on ClusterDNSIP: 200 once its kubernetes
	// plugin has synced with the apiserver.
	dnsReadyPort = 8181
	// dnsTTL is the TTL of every answer, in seconds: a recreated pod's new address is what a
	// client gets at its next lookup.
	dnsTTL = 1
	// dnsNamespace, dnsService and dnsServiceAccount are kubeadm's names.
	dnsNamespace      = metav1.NamespaceSystem
	dnsService        = "kube-dns"
	dnsServiceAccount = "coredns"
	dnsTokenSecret    = "coredns-token"
	dnsClusterRole    = "system:coredns"
	// resolvConfPath is where processes read their resolver configuration.
	resolvConfPath = "/etc/resolv.conf"
	// clusterFirstNdots is the ndots option of a ClusterFirst pod's resolv.conf.
	clusterFirstNdots = "ndots:5"
)

// coreDNSVersion is the CoreDNS that hack/coredns/go.mod requires: DefaultConfig looks for
// bin/coredns-v<version>, what `make coredns` builds.
const coreDNSVersion = "1.15.0"

// clusterDNSAddrs are the addresses CoreDNS serves itself, which the service proxy must not
// take: port 53 of the kube-dns ClusterIP (the Service's TCP port).
func clusterDNSAddrs() []string { return []string{net.JoinHostPort(ClusterDNSIP, "53")} }

// resolvConf is the content of a resolv.conf: what the kubelet composes for a pod.
type resolvConf struct {
	nameservers, searches, options []string
}

// parseResolvConf reads the nameserver, search (and domain) and options lines of a
// resolv.conf; others are ignored, as the kubelet ignores them.
func parseResolvConf(b []byte) resolvConf {
	var rc resolvConf
	for _, line := range strings.Split(string(b), "\n") {
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			rc.nameservers = append(rc.nameservers, f[1])
		case "search", "domain":
			// The last search or domain line wins, as in the resolver.
			rc.searches = slices.Clone(f[1:])
		case "options":
			rc.options = append(rc.options, f[1:]...)
		}
	}
	return rc
}

// render writes rc the way a container's /etc/resolv.conf reads.
func (rc resolvConf) render() []byte {
	var b strings.Builder
	if len(rc.searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(rc.searches, " "))
	}
	for _, ns := range rc.nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(rc.options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(rc.options, " "))
	}
	return []byte(b.String())
}

// clusterSearches is the search path of a ClusterFirst pod in namespace ns.
func clusterSearches(ns string) []string {
	return []string{ns + ".svc." + ClusterDomain, "svc." + ClusterDomain, ClusterDomain}
}

// podResolvConf is the resolv.conf the kubelet gives pod (its dnsPolicy and dnsConfig),
// where node is the node's own resolv.conf:
//
//   - ClusterFirst (the default) and ClusterFirstWithHostNet: the cluster DNS as the one
//     nameserver, the search path <ns>.svc.<domain> svc.<domain> <domain> followed by the
//     node's search domains, and ndots:5; a hostNetwork pod with ClusterFirst gets Default;
//   - Default: the node's;
//   - None: only what dnsConfig says;
//
// and then dnsConfig on top: its nameservers and searches appended (each listed once), its
// options replacing those of the same name.
func podResolvConf(pod *corev1.Pod, node resolvConf) resolvConf {
	var rc resolvConf
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		rc = resolvConf{
			nameservers: []string{ClusterDNSIP},
			searches:    append(clusterSearches(pod.Namespace), node.searches...),
			options:     []string{clusterFirstNdots},
		}
	case corev1.DNSDefault:
		rc = resolvConf{nameservers: slices.Clone(node.nameservers), searches: slices.Clone(node.searches), options: slices.Clone(node.options)}
	}
	if c := pod.Spec.DNSConfig; c != nil {
		rc.nameservers = appendNew(rc.nameservers, c.Nameservers...)
		rc.searches = appendNew(rc.searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			rc.options = slices.DeleteFunc(rc.options, func(have string) bool {
				name, _, _ := strings.Cut(have, ":")
				return name == o.Name
			})
			rc.options = append(rc.options, opt)
		}
	}
	rc.searches = slices.DeleteFunc(rc.searches, func(s string) bool { return s == "" || s == "." })
	return rc
}

// appendNew appends the items of add that list does not have yet.
func appendNew(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// nodeResolver is the host's resolv.conf as SetupPrivateNetwork found it, before it put the
// cluster's in its place: what a dnsPolicy Default pod gets.
var nodeResolver resolvConf

// environmentMountNS is the environment's own mount namespace, held open from
// SetupPrivateNetwork on (close-on-exec): .paddock/dev/shell enters it through
// /proc/<pid>/fd/<fd>. /proc/<pid>/ns/mnt would not do: that is the main thread's, and a
// pod's sandbox may have been made on the main thread, which Go then never lets go.
var environmentMountNS *os.File

// useClusterResolver makes this process's mount namespace (its own, RunInPrivateNetwork made
// it) resolve through the cluster DNS like a pod of the default namespace: a resolv.conf
// bind-mounted over /etc/resolv.conf. Mounts are made slaves first so that nothing here
// shows up on the host.
func useClusterResolver() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make the environment's mounts private (RunInPrivateNetwork gives it its own mount namespace): %w", err)
	}
	host, err := os.ReadFile(resolvConfPath)
	if err != nil {
		return fmt.Errorf("read the host's %s: %w", resolvConfPath, err)
	}
	nodeResolver = parseResolvConf(host)
	self := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault}}
	dir, err := os.MkdirTemp("", "paddock-dev-resolv-")
	if err != nil {
		return err
	}
	// Once bound, the file lives as long as the mount; its name is not needed.
	defer func() { _ = os.RemoveAll(dir) }()
	file := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(file, podResolvConf(self, nodeResolver).render(), 0o644); err != nil {
		return fmt.Errorf("write the environment's resolv.conf: %w", err)
	}
	if err := bindResolvConf(file, ""); err != nil {
		return err
	}
	// No sandbox exists yet, so this thread's mount namespace is the environment's.
	if environmentMountNS, err = os.Open("/proc/thread-self/ns/mnt"); err != nil {
		return fmt.Errorf("open the environment's mount namespace: %w", err)
	}
	return nil
}

// bindResolvConf bind-mounts file at /etc/resolv.conf — where that path really is: target,
// which the caller resolved (realResolvConf) before a pod's sandbox covered the host's /run,
// or, when empty, resolved now. It may be a symlink's target under /run (systemd-resolved's
// /run/systemd/resolve/stub-resolv.conf), made in the sandbox's fresh /run first. The
// environment's own resolv.conf mounted there is taken away first: its file is gone
// (useClusterResolver), and nothing can be mounted on a deleted file.
func bindResolvConf(file, target string) error {
	if target == "" {
		var err error
		if target, err = realResolvConf(); err != nil {
			return err
		}
	}
	// EINVAL: nothing is mounted there.
	if err := unix.Unmount(target, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount the environment's %s: %w", resolvConfPath, err)
	}
	if _, err := os.Stat(target); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(target), err)
		}
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return fmt.Errorf("create %s: %w", target, err)
		}
	}
	if err := unix.Mount(file, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", file, resolvConfPath, err)
	}
	return nil
}

// realResolvConf is the file /etc/resolv.conf names after its symlinks.
func realResolvConf() (string, error) {
	target, err := filepath.EvalSymlinks(resolvConfPath)
	if err == nil {
		return target, nil
	}
	// A dangling symlink: its target is made where it points.
	link, lerr := os.Readlink(resolvConfPath)
	if lerr != nil {
		return "", fmt.Errorf("find %s: %w", resolvConfPath, err)
	}
	if !filepath.IsAbs(link) {
		link = filepath.Join(filepath.Dir(resolvConfPath), link)
	}
	return filepath.Clean(link), nil
}

// checkCoreDNS fails with the command that builds CoreDNS when bin is missing.
func checkCoreDNS(bin string) error {
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("the cluster DNS %s: %w (build it with `make coredns`, or pass --coredns)", bin, err)
	}
	return nil
}

// coreDNS is the running cluster DNS.
type coreDNS struct {
	proc *process
}

// corefile is CoreDNS's configuration: authoritative for the cluster domain and the reverse
// zones, answering from the apiserver as kubeconfig says, nothing forwarded, and pod A
// records (a-b-c-d.<ns>.pod.<domain>) as kubeadm's "pods insecure".
func corefile(kubeconfig string) string {
	return fmt.Sprintf(`# Written by paddock dev: the cluster DNS (internal/devcluster/dns.go).
%[1]s:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %[2]s
    errors
    log
    ready %[2]s:%[3]d
    kubernetes %[1]s in-addr.arpa ip6.arpa {
        kubeconfig %[4]s paddock-dev
        pods insecure
        ttl %[5]d
    }
}
`, ClusterDomain, ClusterDNSIP, dnsReadyPort, kubeconfig, dnsTTL)
}

// dnsObjects are what CoreDNS needs in the API: its ServiceAccount, that account's
// long-lived token Secret (the token controller fills it), kubeadm's system:coredns
// ClusterRole and its binding, and the kube-dns Service at ClusterDNSIP. The Service has no
// selector: CoreDNS is not a pod, and it answers at the ClusterIP itself.
func dnsObjects() []client.Object {
	labels := map[string]string{"k8s-app": "kube-dns", "kubernetes.io/name": "CoreDNS"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: dnsNamespace, Name: name, Labels: labels}
	}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta(dnsServiceAccount)},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: dnsNamespace, Name: dnsTokenSecret, Labels: labels,
				Annotations: map[string]string{corev1.ServiceAccountNameKey: dnsServiceAccount}},
			Type: corev1.SecretTypeServiceAccountToken,
		},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: dnsClusterRole, Labels: labels},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
				{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: dnsClusterRole, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: dnsClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: dnsNamespace, Name: dnsServiceAccount}},
		},
		&corev1.Service{
			ObjectMeta: meta(dnsService),
			Spec: corev1.ServiceSpec{
				ClusterIP: ClusterDNSIP,
				Ports: []corev1.ServicePort{
					{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
					{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP},
				},
			},
		},
	}
}

// startDNS applies the DNS objects, writes CoreDNS's kubeconfig (with its ServiceAccount's
// token, under pki/, which no pod can read) and Corefile, starts CoreDNS and waits until it
// has synced with the apiserver.
func (e *Env) startDNS(ctx context.Context) (*coreDNS, error) {
	for _, obj := range dnsObjects() {
		if err := e.applyTyped(ctx, obj); err != nil {
			return nil, err
		}
	}
	token, err := e.waitServiceAccountToken(ctx, dnsNamespace, dnsTokenSecret)
	if err != nil {
		return nil, err
	}
	rc := *e.restConfig
	rc.BearerToken = token
	kubeconfig := filepath.Join(e.cfg.Dir, "pki", "coredns.kubeconfig")
	if err := writeKubeconfig(kubeconfig, e.restConfig.Host, "system:serviceaccount:"+dnsNamespace+":"+dnsServiceAccount, &rc); err != nil {
		return nil, err
	}
	conf := filepath.Join(e.cfg.Dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile(kubeconfig)), 0o644); err != nil {
		return nil, fmt.Errorf("write Corefile: %w", err)
	}
	proc, err := startProcess("coredns", e.cfg.CoreDNSBinary, []string{"-conf", conf}, []string{"PATH=" + os.Getenv("PATH")}, e.cfg.logPath("coredns"), nil)
	if err != nil {
		return nil, err
	}
	dns := &coreDNS{proc: proc}
	ready := "http://" + net.JoinHostPort(ClusterDNSIP, strconv.Itoa(dnsReadyPort)) + "/ready"
	if err := waitHTTP(ctx, http.DefaultClient, ready, time.Minute); err != nil {
		dns.stop()
		return nil, fmt.Errorf("the cluster DNS did not become ready (see %s): %w", e.cfg.logPath("coredns"), err)
	}
	return dns, nil
}

func (d *coreDNS) stop() {
	if d != nil && d.proc != nil {
		d.proc.stop(5 * time.Second)
	}
}

// waitServiceAccountToken waits for the token controller to fill the token Secret.
func (e *Env) waitServiceAccountToken(ctx context.Context, namespace, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var s corev1.Secret
		err := e.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
		if err == nil && len(s.Data[corev1.ServiceAccountTokenKey]) > 0 {
			return string(s.Data[corev1.ServiceAccountTokenKey]), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("token Secret %s/%s not filled by the token controller (last error %v): %w", namespace, name, err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// applyTyped server-side applies a typed object under paddock dev's field owner.
func (e *Env) applyTyped(ctx context.Context, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, e.client.Scheme())
	if err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, client.ObjectKeyFromObject(obj), err)
	}
	return nil
}
