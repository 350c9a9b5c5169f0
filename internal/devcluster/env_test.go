package devcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// helperEnv makes the test binary act as a pod's container: an HTTP server on $POD_IP:8080
// that exits 0 shortly after SIGTERM, and answers /whoami with the identity the apiserver
// sees when it connects the way a process in a cluster does (client-go's in-cluster config).
const helperEnv = "DEVCLUSTER_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(runHelper())
	}
	if !InPrivateNetwork() {
		code, err := RunInPrivateNetwork()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		os.Exit(code)
	}
	if err := SetupPrivateNetwork(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The operator's pods run the paddock binary (the test binary runs only the helper pods).
	dir, err := os.MkdirTemp("", "devcluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if paddockBinary, err = BuildPaddock(filepath.Join("..", ".."), dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// paddockBinary is the paddock binary built for this run.
var paddockBinary string

func runHelper() int {
	l, err := net.Listen("tcp", net.JoinHostPort(os.Getenv("POD_IP"), "8080"))
	if err != nil {
		fmt.Println("listen:", err)
		return 1
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/whoami", whoami)
	mux.HandleFunc("/resolve", resolve)
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println("serving on", l.Addr(), "data dir", os.Getenv("DATA_DIR"))
	<-terms
	fmt.Println("SIGTERM: exiting")
	time.Sleep(200 * time.Millisecond)
	return 0
}

// resolve looks up ?name= with Go's resolver, which reads the pod's /etc/resolv.conf, and
// answers the addresses, or 404 with the resolver's error when the name does not resolve.
func resolve(w http.ResponseWriter, r *http.Request) {
	addrs, err := net.DefaultResolver.LookupHost(r.Context(), r.URL.Query().Get("name"))
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr):
		http.Error(w, err.Error(), http.StatusNotFound)
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	default:
		slices.Sort(addrs)
		_ = json.NewEncoder(w).Encode(addrs)
	}
}

// whoami asks the apiserver who this process is, with a client built from scratch for each
// request, so it reads the token file as it is now.
func whoami(w http.ResponseWriter, r *http.Request) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		http.Error(w, "in-cluster config: "+err.Error(), http.StatusInternalServerError)
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(r.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		http.Error(w, "self subject review: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(review.Status.UserInfo)
}

// TestEnvironmentRunsAStatefulSetLikeAKubelet drives the environment with a plain StatefulSet
// whose container is this test binary: the real scheduler places it, the node agent runs it
// and probes it, the real EndpointSlice controller publishes its pod IPs, a crash restarts it,
// a deletion SIGTERMs it and the StatefulSet controller replaces it, and a node loss turns the
// node NotReady and its pod unready through the real node-lifecycle controller. Its pods, and
// the operator's (a Deployment installed from config/default), connect as their
// ServiceAccounts with bound tokens the node agent keeps fresh, and see no admin credential.
func TestEnvironmentRunsAStatefulSetLikeAKubelet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Dir = filepath.Join(t.TempDir(), "dev")
	if os.Getenv("KUBEBUILDER_ASSETS") == "" { // `go test` outside make: the checkout's binaries
		cfg.K8sBinDir = filepath.Join("..", "..", "bin", "k8s", "1.37.2")
	}
	cfg.ConfigDir = filepath.Join("..", "..", "config")
	cfg.PaddockBinary = paddockBinary
	cfg.Nodes = 2
	cfg.HostAddress = TestHostAddress()
	cfg.NodeMonitorGracePeriod = 5 * time.Second
	cfg.tokenRefreshEvery = 3 * time.Second
	start := time.Now()
	env, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	t.Cleanup(func() { reportOnFailure(t, env, cfg.Dir) }) // runs before Stop
	t.Logf("environment up in %s", time.Since(start).Round(time.Millisecond))
	c := env.Client()

	ns := "envtest"
	mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	labels := map[string]string{"app": "helper"}
	mustCreate(ctx, t, c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: labels, PublishNotReadyAddresses: true,
			Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	})
	mustCreate(ctx, t, c, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper-ip"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}}},
	})
	mustCreate(ctx, t, c, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceMust("1Gi")}},
		},
	})
	mustCreate(ctx, t, c, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helper"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](2), ServiceName: "helper", PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](5),
					Containers: []corev1.Container{{
						Name: "helper", Image: "helper", Command: []string{self},
						Env: []corev1.EnvVar{
							{Name: helperEnv, Value: "1"},
							{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
							{Name: "DATA_DIR", Value: "/data"},
						},
						Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
						VolumeMounts: []corev1.VolumeMount{{Name: "shared", MountPath: "/data"}},
						ReadinessProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 1, ProbeHandler: corev1.ProbeHandler{
							HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")},
						}},
					}},
					Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"},
					}}},
				},
			},
		},
	})

	t.Run("pods run, are ready and are published in EndpointSlices", func(t *testing.T) {
		ips := waitReadyPods(ctx, t, c, ns, 2)
		testkit.EventuallyDetail(t, "EndpointSlices list both pod IPs as serving", func() (bool, string) {
			var slices discoveryv1.EndpointSliceList
			if err := c.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: "helper"}); err != nil {
				return false, err.Error()
			}
			serving := map[string]bool{}
			for _, s := range slices.Items {
				for _, e := range s.Endpoints {
					if e.Conditions.Serving != nil && *e.Conditions.Serving {
						serving[e.Addresses[0]] = true
					}
				}
			}
			for _, ip := range ips {
				if !serving[ip] {
					return false, fmt.Sprintf("serving %v, want %v", serving, ips)
				}
			}
			return true, ""
		})
		resp, err := http.Get("http://" + net.JoinHostPort(ips["helper-0"], "8080"))
		if err != nil {
			t.Fatalf("reach helper-0 at its pod IP: %v", err)
		}
		_ = resp.Body.Close()
		var pv corev1.PersistentVolumeList
		if err := c.List(ctx, &pv); err != nil || len(pv.Items) != 1 || pv.Items[0].Status.Phase != corev1.VolumeBound {
			t.Errorf("want one bound volume for the claim, got %+v (err %v)", pv.Items, err)
		}
	})

	t.Run("a second start with the same state directory changes nothing", func(t *testing.T) {
		waitReadyPods(ctx, t, c, ns, 2)
		secondStartChangesNothing(ctx, t, env, cfg, ns+"/helper-0", ns+"/helper-1")
	})

	t.Run("the cluster DNS answers the records of the Kubernetes DNS specification", func(t *testing.T) {
		ips := waitReadyPods(ctx, t, c, ns, 2)
		var svc corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-ip"}, &svc); err != nil {
			t.Fatal(err)
		}
		zone := ns + ".svc." + ClusterDomain + "."
		rev0, err := dnsmessage.NewName(reverseName(ips["helper-0"]))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			rule  string
			name  string
			qtype dnsmessage.Type
			rcode dnsmessage.RCode
			want  []string
		}{
			{"a ClusterIP Service's name is its ClusterIP", "helper-ip." + zone, dnsmessage.TypeA, dnsmessage.RCodeSuccess,
				[]string{svc.Spec.ClusterIP}},
			{"a headless Service's name is its endpoints' addresses", "helper." + zone, dnsmessage.TypeA, dnsmessage.RCodeSuccess,
				sorted(ips["helper-0"], ips["helper-1"])},
			{"a pod with hostname and subdomain is <hostname>.<subdomain>.<ns>.svc.<domain>", "helper-0.helper." + zone, dnsmessage.TypeA,
				dnsmessage.RCodeSuccess, []string{ips["helper-0"]}},
			{"a named port's SRV record names the Service", "_http._tcp.helper-ip." + zone, dnsmessage.TypeSRV, dnsmessage.RCodeSuccess,
				[]string{"8080 helper-ip." + zone}},
			{"a headless Service's SRV records name each pod", "_http._tcp.helper." + zone, dnsmessage.TypeSRV, dnsmessage.RCodeSuccess,
				[]string{"8080 helper-0.helper." + zone, "8080 helper-1.helper." + zone}},
			{"a pod IP's PTR records name it in each Service it backs: hostname.subdomain, else its dashed address",
				rev0.String(), dnsmessage.TypePTR, dnsmessage.RCodeSuccess,
				[]string{strings.ReplaceAll(ips["helper-0"], ".", "-") + ".helper-ip." + zone, "helper-0.helper." + zone}},
			{"an IPv4 Service has no AAAA records, and the name exists", "helper-ip." + zone, dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, nil},
			{"the DNS's own Service is at its ClusterIP", "kube-dns.kube-system.svc." + ClusterDomain + ".", dnsmessage.TypeA,
				dnsmessage.RCodeSuccess, []string{ClusterDNSIP}},
			{"an unknown name in the cluster domain does not exist", "nope." + zone, dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
			{"an unknown pod of a headless Service does not exist", "helper-9.helper." + zone, dnsmessage.TypeA, dnsmessage.RCodeNameError, nil},
			{"a name outside the cluster's zones is refused, never forwarded", "example.com.", dnsmessage.TypeA, dnsmessage.RCodeRefused, nil},
		} {
			t.Run(tc.rule, func(t *testing.T) {
				// CoreDNS follows the Services and EndpointSlices through its own watches,
				// a moment behind the readiness the test waited for: ask again until the
				// answer is complete (or 10 s have passed; then the last answer fails).
				var (
					rcode   dnsmessage.RCode
					answers []string
					ttls    []uint32
					err     error
				)
				for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
					rcode, answers, ttls, err = queryDNS(ctx, tc.name, tc.qtype)
					if err == nil && rcode == tc.rcode && slices.Equal(answers, tc.want) || time.Now().After(deadline) {
						break
					}
				}
				if err != nil {
					t.Fatal(err)
				}
				if rcode != tc.rcode || !slices.Equal(answers, tc.want) {
					t.Fatalf("%s %s: %s %q, want %s %q", tc.qtype, tc.name, rcode, answers, tc.rcode, tc.want)
				}
				for _, ttl := range ttls {
					if ttl != dnsTTL {
						t.Errorf("TTL %d, want %d", ttl, dnsTTL)
					}
				}
			})
		}
	})

	t.Run("a pod resolves through the cluster DNS with its namespace's search path", func(t *testing.T) {
		ips := waitReadyPods(ctx, t, c, ns, 2)
		pid := readPID(t, env, ns, "helper-0")
		want := "search envtest.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
		if b, err := os.ReadFile(ProcessPath(pid, resolvConfPath)); err != nil || string(b) != want {
			t.Errorf("helper-0's %s reads %q (err %v), want %q", resolvConfPath, b, err, want)
		}
		for _, tc := range []struct {
			rule, name string
			want       []string // nil: not found
		}{
			{"a Service of its own namespace by its short name", "helper", sorted(ips["helper-0"], ips["helper-1"])},
			{"a pod by hostname.subdomain", "helper-1.helper", []string{ips["helper-1"]}},
			{"a Service of another namespace by name.namespace", "kube-dns.kube-system", []string{ClusterDNSIP}},
			{"a fully qualified name as it is", "helper-0.helper.envtest.svc.cluster.local.", []string{ips["helper-0"]}},
			{"a name on none of the search domains does not resolve (nothing is forwarded)", "nope", nil},
		} {
			t.Run(tc.rule, func(t *testing.T) {
				got, found := resolveIn(ctx, t, ips["helper-0"], tc.name)
				if tc.want == nil && found || tc.want != nil && !slices.Equal(got, tc.want) {
					t.Errorf("helper-0 resolves %q to %q (found %v), want %q", tc.name, got, found, tc.want)
				}
			})
		}
		// glibc (what kcat and librdkafka use) reads the same file.
		out, err := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(pid), "--mount", "getent", "hosts", "helper-1.helper").CombinedOutput()
		if f := strings.Fields(string(out)); err != nil || len(f) < 2 || f[0] != ips["helper-1"] || f[1] != "helper-1.helper.envtest.svc.cluster.local" {
			t.Errorf("getent hosts helper-1.helper in helper-0's mount namespace: %q (err %v), want %s", out, err, ips["helper-1"])
		}
	})

	t.Run("the environment and its shell resolve like a pod of the default namespace, the host does not", func(t *testing.T) {
		want := "search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
		if b, err := os.ReadFile(resolvConfPath); err != nil || string(b) != want {
			t.Errorf("this process's %s reads %q (err %v), want %q", resolvConfPath, b, err, want)
		}
		if addrs, err := net.DefaultResolver.LookupHost(ctx, "kube-dns.kube-system"); err != nil || !slices.Equal(addrs, []string{ClusterDNSIP}) {
			t.Errorf("kube-dns.kube-system resolves to %q (err %v) here, want %s", addrs, err, ClusterDNSIP)
		}
		var svc corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-ip"}, &svc); err != nil {
			t.Fatal(err)
		}
		// From the host's network, as a person runs it.
		out, err := HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, env.ShellPath(), "getent", "hosts", "helper-ip.envtest")
		if f := strings.Fields(string(out)); err != nil || len(f) < 1 || f[0] != svc.Spec.ClusterIP {
			t.Errorf("%s getent hosts helper-ip.envtest: %q (err %v), want %s", env.ShellPath(), out, err, svc.Spec.ClusterIP)
		}
		out, err = HostCommand(ctx, []string{"PATH=" + os.Getenv("PATH")}, "cat", resolvConfPath)
		if err != nil || strings.Contains(string(out), ClusterDNSIP) {
			t.Errorf("the host's %s names the cluster DNS: %q (err %v)", resolvConfPath, out, err)
		}
	})

	t.Run("a pod connects as its ServiceAccount with a token bound to it, from the in-cluster paths", func(t *testing.T) {
		user := whoamiOf(ctx, t, c, ns, "helper-0")
		if user.Username != "system:serviceaccount:envtest:default" {
			t.Errorf("helper-0 is %q, want system:serviceaccount:envtest:default", user.Username)
		}
		if got := user.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != "helper-0" {
			t.Errorf("helper-0's token is bound to pod %v, want helper-0", got)
		}
		pid := readPID(t, env, ns, "helper-0")
		files := ProcessPath(pid, ServiceAccountDir)
		if b, err := os.ReadFile(filepath.Join(files, "namespace")); err != nil || string(b) != ns {
			t.Errorf("%s/namespace = %q (err %v), want %q", ServiceAccountDir, b, err, ns)
		}
		if b, err := os.ReadFile(filepath.Join(files, "ca.crt")); err != nil || string(b) != string(env.RestConfig().CAData) {
			t.Errorf("%s/ca.crt is not the cluster CA (err %v)", ServiceAccountDir, err)
		}
		if err := os.WriteFile(filepath.Join(files, "token"), []byte("x"), 0o600); err == nil {
			t.Errorf("the pod's token file is writable")
		}
	})

	t.Run("the token is replaced before it expires and the new one works", func(t *testing.T) {
		first := whoamiOf(ctx, t, c, ns, "helper-1").Extra["authentication.kubernetes.io/credential-id"]
		testkit.EventuallyDetail(t, "helper-1 authenticating with a new token", func() (bool, string) {
			now := whoamiOf(ctx, t, c, ns, "helper-1").Extra["authentication.kubernetes.io/credential-id"]
			return len(now) == 1 && len(first) == 1 && now[0] != first[0], fmt.Sprintf("credential %v, first %v", now, first)
		})
	})

	t.Run("no pod process can reach the admin credentials", func(t *testing.T) {
		mgr, err := env.ManagerPod(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ ns, name string }{{ns, "helper-0"}, {mgr.Namespace, mgr.Name}} {
			found, err := env.AdminCredentialExposure(readPID(t, env, p.ns, p.name))
			if err != nil {
				t.Fatal(err)
			}
			if len(found) > 0 {
				t.Errorf("%s/%s can reach the admin credentials: %q", p.ns, p.name, found)
			}
		}
		// The check must be able to fail: this test process holds them.
		if found, err := env.AdminCredentialExposure(os.Getpid()); err != nil || len(found) == 0 {
			t.Errorf("the exposure check finds nothing in the test process itself (err %v)", err)
		}
	})

	t.Run("the operator runs as its Deployment's ServiceAccount", func(t *testing.T) {
		sa, err := env.ManagerServiceAccount(ctx)
		if err != nil {
			t.Fatal(err)
		}
		user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
		testkit.EventuallyDetail(t, "the manager's leader election in the audit log as "+user, func() (bool, string) {
			events, err := env.AuditEvents()
			if err != nil {
				return false, err.Error()
			}
			for _, ev := range events {
				if ev.ObjectRef != nil && ev.ObjectRef.Resource == "leases" && ev.ObjectRef.Namespace == sa.Namespace &&
					ev.Verb == "update" && ev.User.Username == user && ev.ResponseStatus != nil && ev.ResponseStatus.Code == http.StatusOK {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d events, none a lease update by %s", len(events), user)
		})
	})

	t.Run("kill -9 restarts the container", func(t *testing.T) {
		pid := readPID(t, env, ns, "helper-0")
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyDetail(t, "helper-0 restarted once and ready", func() (bool, string) {
			var pod corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-0"}, &pod); err != nil {
				return false, err.Error()
			}
			st := pod.Status.ContainerStatuses
			ok := len(st) == 1 && st[0].RestartCount == 1 && st[0].Ready &&
				st[0].LastTerminationState.Terminated != nil && st[0].LastTerminationState.Terminated.Signal == int32(syscall.SIGKILL)
			return ok, fmt.Sprintf("%+v", st)
		})
	})

	t.Run("deletion sends SIGTERM and the StatefulSet replaces the pod", func(t *testing.T) {
		var old corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-1"}, &old); err != nil {
			t.Fatal(err)
		}
		if err := c.Delete(ctx, &old); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyDetail(t, "a new helper-1 is ready", func() (bool, string) {
			var pod corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-1"}, &pod); err != nil {
				return false, err.Error()
			}
			return pod.UID != old.UID && isReady(&pod), string(pod.UID)
		})
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-1"}, &pod); err != nil {
			t.Fatal(err)
		}
		ready := time.Now()
		testkit.EventuallyDetail(t, "helper-1's name to follow it to its new pod IP", func() (bool, string) {
			_, answers, _, err := queryDNS(ctx, "helper-1.helper.envtest.svc.cluster.local.", dnsmessage.TypeA)
			return err == nil && slices.Equal(answers, []string{pod.Status.PodIP}), fmt.Sprintf("%q %v, want %s", answers, err, pod.Status.PodIP)
		})
		t.Logf("new pod ready → its name answers its new IP %s (was %s): %s", pod.Status.PodIP, old.Status.PodIP, time.Since(ready).Round(time.Millisecond))
		runs := env.ContainerRuns(ns, "helper-1")
		first := runs[0]
		if first.TermSent.IsZero() || first.Exited.IsZero() || first.ExitCode != 0 {
			t.Fatalf("first run of helper-1 = %+v, want SIGTERM then exit 0", first)
		}
		t.Logf("SIGTERM → exit: %s", first.Exited.Sub(first.TermSent).Round(time.Millisecond))
	})

	t.Run("node loss turns the node NotReady and its pod unready", func(t *testing.T) {
		var pod corev1.Pod
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-0"}, &pod); err != nil {
			t.Fatal(err)
		}
		lost := time.Now()
		if err := env.StopNode(pod.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(env.PIDFile(ns, "helper-0")); !os.IsNotExist(err) {
			t.Errorf("pid file of helper-0 still there after its node was lost (err %v)", err)
		}
		testkit.EventuallyDetail(t, "helper-0 not ready", func() (bool, string) {
			var p corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-0"}, &p); err != nil {
				return false, err.Error()
			}
			return !isReady(&p), fmt.Sprintf("%+v", p.Status.Conditions)
		})
		t.Logf("node loss → pod not ready: %s", time.Since(lost).Round(time.Millisecond))
		if err := env.StartNode(pod.Spec.NodeName); err != nil {
			t.Fatal(err)
		}
		waitReadyPods(ctx, t, c, ns, 2)
	})
}

// queryDNS asks the cluster DNS one question over UDP and returns the answer's code, its
// records (A/AAAA addresses, "port target" for SRV, PTR names; sorted) and their TTLs.
func queryDNS(ctx context.Context, name string, qtype dnsmessage.Type) (dnsmessage.RCode, []string, []uint32, error) {
	qname, err := dnsmessage.NewName(name)
	if err != nil {
		return 0, nil, nil, err
	}
	msg := dnsmessage.Message{
		Header:    dnsmessage.Header{ID: 7, RecursionDesired: true},
		Questions: []dnsmessage.Question{{Name: qname, Type: qtype, Class: dnsmessage.ClassINET}},
	}
	packed, err := msg.Pack()
	if err != nil {
		return 0, nil, nil, err
	}
	conn, err := (&net.Dialer{}).DialContext(ctx, "udp", net.JoinHostPort(ClusterDNSIP, "53"))
	if err != nil {
		return 0, nil, nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := conn.Write(packed); err != nil {
		return 0, nil, nil, err
	}
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		return 0, nil, nil, err
	}
	var resp dnsmessage.Message
	if err := resp.Unpack(buf[:n]); err != nil {
		return 0, nil, nil, err
	}
	var answers []string
	var ttls []uint32
	for _, a := range resp.Answers {
		ttls = append(ttls, a.Header.TTL)
		switch b := a.Body.(type) {
		case *dnsmessage.AResource:
			answers = append(answers, netip.AddrFrom4(b.A).String())
		case *dnsmessage.AAAAResource:
			answers = append(answers, netip.AddrFrom16(b.AAAA).String())
		case *dnsmessage.SRVResource:
			answers = append(answers, fmt.Sprintf("%d %s", b.Port, b.Target))
		case *dnsmessage.PTRResource:
			answers = append(answers, b.PTR.String())
		}
	}
	slices.Sort(answers)
	return resp.RCode, answers, ttls, nil
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}

// reverseName is the in-addr.arpa name of an IPv4 address.
func reverseName(ip string) string {
	b := netip.MustParseAddr(ip).As4()
	return fmt.Sprintf("%d.%d.%d.%d.in-addr.arpa.", b[3], b[2], b[1], b[0])
}

// resolveIn asks the helper pod at ip to resolve name with its own resolver, and returns the
// addresses and whether the name resolved.
func resolveIn(ctx context.Context, t *testing.T, ip, name string) ([]string, bool) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(ip, "8080")+"/resolve?name="+url.QueryEscape(name), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("ask the helper at %s to resolve %s: %v", ip, name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	switch resp.StatusCode {
	case http.StatusNotFound:
		return nil, false
	case http.StatusOK:
		var addrs []string
		if err := json.Unmarshal(body, &addrs); err != nil {
			t.Fatalf("resolve %s: %v: %s", name, err, body)
		}
		return addrs, true
	}
	t.Fatalf("resolve %s: %s: %s", name, resp.Status, body)
	return nil, false
}

// whoamiOf asks the helper pod who it is to the apiserver.
func whoamiOf(ctx context.Context, t *testing.T, c client.Client, ns, pod string) authenticationv1.UserInfo {
	t.Helper()
	var p corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/whoami")
	if err != nil {
		t.Fatalf("ask %s who it is: %v", pod, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s/whoami: %s: %s", pod, resp.Status, body)
	}
	var user authenticationv1.UserInfo
	if err := json.Unmarshal(body, &user); err != nil {
		t.Fatalf("%s/whoami: %v: %s", pod, err, body)
	}
	return user
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// waitReadyPods waits for n ready pods in ns and returns their IPs by pod name.
func waitReadyPods(ctx context.Context, t *testing.T, c client.Client, ns string, n int) map[string]string {
	t.Helper()
	ips := map[string]string{}
	testkit.EventuallyDetail(t, fmt.Sprintf("%d ready pods", n), func() (bool, string) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		clear(ips)
		for _, p := range pods.Items {
			if isReady(&p) && strings.HasPrefix(p.Status.PodIP, "198.18.") {
				ips[p.Name] = p.Status.PodIP
			}
		}
		return len(ips) == n, fmt.Sprintf("ready: %v", ips)
	})
	return ips
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil
		}
	}
	return false
}

func readPID(t *testing.T, env *Env, namespace, pod string) int {
	t.Helper()
	pid, err := env.PID(namespace, pod)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

// reportOnFailure, for a failed test, says whether a component of the environment exited and
// prints the end of each component's log (the temporary directory that holds them is gone
// once the test ends), so a failure on a loaded CI machine names its cause.
func reportOnFailure(t *testing.T, env *Env, dir string) {
	if !t.Failed() {
		return
	}
	t.Logf("environment: %v", env.Err())
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, path := range logs {
		if filepath.Base(path) == "audit.log" {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Logf("%s: %v", path, err)
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		t.Logf("--- the last %d lines of %s:\n%s", min(len(lines), 30), filepath.Base(path), strings.Join(lines[max(len(lines)-30, 0):], "\n"))
	}
}
