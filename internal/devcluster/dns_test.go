package devcluster

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodResolvConfIsWhatAKubeletWrites(t *testing.T) {
	node := resolvConf{nameservers: []string{"192.0.2.53"}, searches: []string{"corp.example"}, options: []string{"timeout:2"}}
	pod := func(policy corev1.DNSPolicy, hostNetwork bool, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "shop"},
			Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNetwork, DNSConfig: cfg}}
	}
	cluster := resolvConf{
		nameservers: []string{"10.96.0.10"},
		searches:    []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example"},
		options:     []string{"ndots:5"},
	}
	for _, tc := range []struct {
		rule string
		pod  *corev1.Pod
		want resolvConf
	}{
		{"ClusterFirst: the cluster DNS, the namespace's search path then the node's, ndots:5",
			pod(corev1.DNSClusterFirst, false, nil), cluster},
		{"no policy is ClusterFirst", pod("", false, nil), cluster},
		{"a hostNetwork pod with ClusterFirst keeps the node's resolver",
			pod(corev1.DNSClusterFirst, true, nil), node},
		{"ClusterFirstWithHostNet: the cluster DNS even on the host network",
			pod(corev1.DNSClusterFirstWithHostNet, true, nil), cluster},
		{"Default: the node's resolver", pod(corev1.DNSDefault, false, nil), node},
		{"None: only what dnsConfig says",
			pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: []string{"a.example"}}),
			resolvConf{nameservers: []string{"192.0.2.1"}, searches: []string{"a.example"}}},
		{"dnsConfig adds nameservers and searches once each and replaces options of the same name",
			pod(corev1.DNSClusterFirst, false, &corev1.PodDNSConfig{
				Nameservers: []string{"10.96.0.10", "192.0.2.1"},
				Searches:    []string{"svc.cluster.local", "b.example"},
				Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
			}),
			resolvConf{
				nameservers: []string{"10.96.0.10", "192.0.2.1"},
				searches:    []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local", "corp.example", "b.example"},
				options:     []string{"ndots:2", "edns0"},
			}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := podResolvConf(tc.pod, node)
			if !slices.Equal(got.nameservers, tc.want.nameservers) || !slices.Equal(got.searches, tc.want.searches) || !slices.Equal(got.options, tc.want.options) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestResolvConfIsReadAsTheResolverReadsIt(t *testing.T) {
	got := parseResolvConf([]byte(strings.Join([]string{
		"# generated", "domain old.example", "search a.example b.example ; trailing comment",
		"nameserver 192.0.2.53", "nameserver 192.0.2.54 # second", "options ndots:1", "options timeout:2 rotate",
		"sortlist 10.0.0.0", "nameserver",
	}, "\n")))
	want := resolvConf{
		nameservers: []string{"192.0.2.53", "192.0.2.54"},
		searches:    []string{"a.example", "b.example"},
		options:     []string{"ndots:1", "timeout:2", "rotate"},
	}
	if !slices.Equal(got.nameservers, want.nameservers) || !slices.Equal(got.searches, want.searches) || !slices.Equal(got.options, want.options) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if r := string(want.render()); r != "search a.example b.example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:1 timeout:2 rotate\n" {
		t.Errorf("rendered %q", r)
	}
}

func TestShellJoinsTheEnvironmentsNetworkAndMounts(t *testing.T) {
	if got := shellNsenter(42, 7, false); got != "nsenter --target 42 --net --mount=/proc/42/fd/7" {
		t.Errorf("as root: %q", got)
	}
	if got := shellNsenter(42, 7, true); got != "nsenter --target 42 --user --net --mount=/proc/42/fd/7 --preserve-credentials" {
		t.Errorf("unprivileged: %q", got)
	}
}

// A pod's sandbox shows the pod its own resolv.conf, stacked over the environment's, and
// nothing of it reaches the environment's process.
func TestPodSandboxMountsThePodsResolvConf(t *testing.T) {
	envResolv, err := os.ReadFile(resolvConfPath)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "resolv.conf")
	want := "search shop.svc.cluster.local\nnameserver 10.96.0.10\n"
	if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	type result struct {
		content []byte
		err     error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, and its sandbox with it
		if err := (&podSandbox{resolvConf: file}).enter(); err != nil {
			done <- result{err: err}
			return
		}
		b, err := os.ReadFile(resolvConfPath)
		done <- result{b, err}
	}()
	r := <-done
	if r.err != nil || string(r.content) != want {
		t.Fatalf("in the sandbox %s reads %q (err %v), want %q", resolvConfPath, r.content, r.err, want)
	}
	if b, err := os.ReadFile(resolvConfPath); err != nil || string(b) != string(envResolv) {
		t.Errorf("after a sandbox, this process's %s reads %q (err %v), want %q", resolvConfPath, b, err, envResolv)
	}
	if !strings.Contains(string(envResolv), "nameserver "+ClusterDNSIP) {
		t.Errorf("the environment's own %s does not name the cluster DNS: %q", resolvConfPath, envResolv)
	}
}
