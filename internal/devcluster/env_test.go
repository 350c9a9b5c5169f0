package devcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	go func() { _ = http.Serve(l, mux) }()
	fmt.Println("serving on", l.Addr(), "data dir", os.Getenv("DATA_DIR"))
	<-terms
	fmt.Println("SIGTERM: exiting")
	time.Sleep(200 * time.Millisecond)
	return 0
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
		eventually(ctx, t, "EndpointSlices list both pod IPs as serving", func() (bool, string) {
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
		eventually(ctx, t, "helper-1 authenticating with a new token", func() (bool, string) {
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
		eventually(ctx, t, "the manager's leader election in the audit log as "+user, func() (bool, string) {
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
		eventually(ctx, t, "helper-0 restarted once and ready", func() (bool, string) {
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
		eventually(ctx, t, "a new helper-1 is ready", func() (bool, string) {
			var pod corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "helper-1"}, &pod); err != nil {
				return false, err.Error()
			}
			return pod.UID != old.UID && isReady(&pod), string(pod.UID)
		})
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
		eventually(ctx, t, "helper-0 not ready", func() (bool, string) {
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
	eventually(ctx, t, fmt.Sprintf("%d ready pods", n), func() (bool, string) {
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

// eventually polls cond until it holds or 90 s pass.
func eventually(ctx context.Context, t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s: %s", what, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }
