package devcluster

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

func TestTokenIsReplacedAtEightyPercentOfItsLifeAndWithinADay(t *testing.T) {
	issued := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		life time.Duration
		want time.Duration
	}{
		{"the admission plugin's 3607 s token", 3607 * time.Second, 2885600 * time.Millisecond},
		{"the shortest token the API issues", 10 * time.Minute, 8 * time.Minute},
		{"a year-long token is still replaced after a day", 365 * 24 * time.Hour, 24 * time.Hour},
		{"an already expired token at once", -time.Minute, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tokenRefreshAt(issued, issued.Add(tc.life)).Sub(issued); got != tc.want {
				t.Errorf("refresh %s after issue, want %s", got, tc.want)
			}
		})
	}
}

func TestOnlyMountsUnderVarRunAreRealMounts(t *testing.T) {
	for _, tc := range []struct {
		path, rel string
		real      bool
	}{
		{"/var/run/secrets/kubernetes.io/serviceaccount", "secrets/kubernetes.io/serviceaccount", true},
		{"/run/secrets/x/", "secrets/x", true},
		{"/var/run", ".", true},
		{"/var/lib/paddock", "", false},
		{"/var/runner", "", false},
		{"/tmp", "", false},
	} {
		rel, real := runRelative(tc.path)
		if rel != tc.rel || real != tc.real {
			t.Errorf("runRelative(%q) = %q, %v; want %q, %v", tc.path, rel, real, tc.rel, tc.real)
		}
	}
}

// testWorker is a pod worker for pod on node 0, as far as command needs one; state is under
// a temporary directory.
func testWorker(t *testing.T, pod *corev1.Pod) *podWorker {
	rt := &podRuntime{cfg: Config{Dir: filepath.Join(t.TempDir(), "state"), APIServerPort: 6443}, images: map[string]string{"ghcr.io/paddock-dev/paddock:latest": "/bin/paddock"}}
	return &podWorker{node: &nodeAgent{rt: rt, ips: newPodIPs(0)}, pod: pod, podIP: "198.18.1.7",
		projectedVolumes: map[string]*projectedVolume{}}
}

func TestContainerCommand(t *testing.T) {
	manager := corev1.Container{Name: "manager", Image: "ghcr.io/paddock-dev/paddock:latest",
		Args: []string{"manager", "--health-probe-bind-address=:8081", "--metrics-bind-address=0.0.0.0:8080", "--metrics-bind-address=0", "--leader-elect"}}
	t.Run("the operator's image runs the local binary with any-interface binds narrowed to the pod IP", func(t *testing.T) {
		w := testWorker(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", UID: "uid-1"}})
		argv, env, sandbox, err := w.command(t.Context(), manager)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"/bin/paddock", "manager", "--health-probe-bind-address=198.18.1.7:8081", "--metrics-bind-address=198.18.1.7:8080", "--metrics-bind-address=0", "--leader-elect"}
		if !slices.Equal(argv, want) {
			t.Errorf("argv %q, want %q", argv, want)
		}
		for _, kv := range []string{"KUBERNETES_SERVICE_HOST=198.18.0.1", "KUBERNETES_SERVICE_PORT=6443"} {
			if !slices.Contains(env, kv) {
				t.Errorf("env %q lacks %s", env, kv)
			}
		}
		for _, kv := range env {
			if strings.HasPrefix(kv, "KUBECONFIG=") {
				t.Errorf("env has %s", kv)
			}
		}
		state := w.node.rt.cfg.Dir
		if !slices.Contains(sandbox.masked, state+"/pki") || !slices.Contains(sandbox.masked, state+"/kubeconfig") {
			t.Errorf("sandbox hides %q, want the pki directory and the kubeconfig", sandbox.masked)
		}
		wantResolv := "search ns.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n"
		if sandbox.resolvConf != state+"/data/pods/uid-1/resolv.conf" {
			t.Errorf("the pod's resolv.conf is %q, want it in the pod's directory", sandbox.resolvConf)
		} else if b, err := os.ReadFile(sandbox.resolvConf); err != nil || string(b) != wantResolv {
			t.Errorf("the pod's resolv.conf reads %q (err %v), want %q", b, err, wantResolv)
		}
	})
	t.Run("another image without a command is refused", func(t *testing.T) {
		other := manager
		other.Image = "paddock:dev"
		_, _, _, err := testWorker(t, &corev1.Pod{}).command(t.Context(), other)
		if err == nil || !strings.Contains(err.Error(), `cannot run image "paddock:dev"`) {
			t.Errorf("err %v, want a refusal naming the image", err)
		}
	})
	t.Run("a container with its own command runs it", func(t *testing.T) {
		argv, _, _, err := testWorker(t, &corev1.Pod{}).command(t.Context(), corev1.Container{Name: "c", Image: "any", Command: []string{"/bin/sh"}, Args: []string{"-c", "true"}})
		if err != nil || !slices.Equal(argv, []string{"/bin/sh", "-c", "true"}) {
			t.Errorf("argv %q, err %v", argv, err)
		}
	})
	t.Run("a projected volume outside /var/run is refused", func(t *testing.T) {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{
			Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}},
		}}}}}
		c := manager
		c.VolumeMounts = []corev1.VolumeMount{{Name: "token", MountPath: "/etc/token"}}
		_, _, _, err := testWorker(t, pod).command(t.Context(), c)
		if err == nil || !strings.Contains(err.Error(), "only under /var/run") {
			t.Errorf("err %v, want a refusal", err)
		}
	})
}

func TestPodSandboxWithoutCapSysAdminFailsClearly(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		// Never unlocked: this thread gives up a capability and ends with the goroutine.
		runtime.LockOSThread()
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		data[0].Effective &^= 1 << unix.CAP_SYS_ADMIN
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- err
			return
		}
		done <- (&podSandbox{}).enter()
	}()
	err := <-done
	if !errors.Is(err, unix.EPERM) || !strings.Contains(err.Error(), "mount namespace") {
		t.Fatalf("entering a sandbox without CAP_SYS_ADMIN: %v; want EPERM naming the mount namespace", err)
	}
}

// TestInstallRunsTheManagerAsItsServiceAccountWithTheGeneratedRole pins what paddock dev
// takes from config/default: the manager Deployment, its ServiceAccount, and a
// ClusterRoleBinding of exactly the rules controller-gen wrote to config/rbac/role.yaml.
func TestInstallRunsTheManagerAsItsServiceAccountWithTheGeneratedRole(t *testing.T) {
	config := filepath.Join("..", "..", "config")
	inst, err := loadInstall(config)
	if err != nil {
		t.Fatal(err)
	}
	var deploy appsv1.Deployment
	var role rbacv1.ClusterRole
	var bindings []rbacv1.ClusterRoleBinding
	for _, o := range inst.objects {
		var into any
		switch {
		case o.GetKind() == "Deployment" && o.GetName() == inst.manager.Name:
			into = &deploy
		case o.GetKind() == "ClusterRole" && strings.HasSuffix(o.GetName(), "-paddock-manager"): // role.yaml's, not cluster_role.yaml's
			into = &role
		case o.GetKind() == "ClusterRoleBinding":
			bindings = append(bindings, rbacv1.ClusterRoleBinding{})
			into = &bindings[len(bindings)-1]
		default:
			continue
		}
		if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	var binding rbacv1.ClusterRoleBinding
	for _, b := range bindings {
		if b.RoleRef.Name == role.Name {
			binding = b
		}
	}
	sa := deploy.Spec.Template.Spec.ServiceAccountName
	if sa == "" || inst.image != deploy.Spec.Template.Spec.Containers[0].Image || len(inst.crds) != 4 {
		t.Fatalf("manager %s runs as %q with image %q (%d CRDs)", inst.manager, sa, inst.image, len(inst.crds))
	}
	if len(binding.Subjects) != 1 || binding.Subjects[0].Name != sa || binding.Subjects[0].Namespace != inst.manager.Namespace || binding.RoleRef.Name != role.Name {
		t.Errorf("ClusterRoleBinding %+v does not bind ClusterRole %s to ServiceAccount %s/%s", binding, role.Name, inst.manager.Namespace, sa)
	}
	generated, err := os.ReadFile(filepath.Join(config, "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want rbacv1.ClusterRole
	if err := yaml.Unmarshal(generated, &want); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, want.Rules) {
		t.Errorf("installed ClusterRole rules differ from config/rbac/role.yaml:\n%+v\n%+v", role.Rules, want.Rules)
	}
}
