package controllers_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers"
	"github.com/paddock-dev/paddock/internal/devcluster"
	"github.com/paddock-dev/paddock/internal/install"
	"github.com/paddock-dev/paddock/internal/testenv"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// A manager started with --namespace runs on the RBAC `make build-installer NAMESPACES=…`
// writes — the namespaced ClusterRole bound by a RoleBinding in each watched namespace, the
// cluster-scoped one cluster-wide — and on nothing more: every reconciler provisions, registers
// and reports a cluster of its namespace, and its identity can do nothing in another one
// (docs/security.md, "Least privilege").
func TestAManagerWatchingOneNamespaceRunsOnItsRoleBindingThere(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := testkit.Context(t)
	for _, ns := range []string{"paddock-system", "watched", "other"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	manager := installRBAC(ctx, t, env, "watched")

	cfg := env.PodIdentity(manager.Namespace, manager.Name, "", "")
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cache.Options{ByObject: controllers.CacheByObject(), DefaultNamespaces: map[string]cache.Config{"watched": {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupWithManager(mgr, controllers.Options{DefaultBrokerImage: "paddock:test"}); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	for _, ns := range []string{"watched", "other"} {
		kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: kafkav1alpha1.KafkaClusterSpec{
			Replicas:  1,
			Listeners: []kafkav1alpha1.Listener{{Name: "kafka", Port: 9092}, {Name: "nodes", Port: 9094, Type: kafkav1alpha1.ListenerNodePort}},
		}}
		if err := env.Client.Create(ctx, kc); err != nil {
			t.Fatal(err)
		}
	}
	// One endpoint, so the registry has a broker to write a row for.
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "c-brokers-x", Namespace: "watched", Labels: map[string]string{
			discoveryv1.LabelServiceName: kafkav1alpha1.HeadlessServiceName("c"), kafkav1alpha1.LabelCluster: "c"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Serving: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: kafkav1alpha1.BrokerPodName("c", 0)}}},
	}
	if err := env.Client.Create(ctx, slice); err != nil {
		t.Fatal(err)
	}

	testkit.EventuallyDetail(t, "cluster c of the watched namespace provisioned, reported and registered", func() (bool, string) {
		kc := &kafkav1alpha1.KafkaCluster{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "watched", Name: "c"}, kc); err != nil {
			return false, err.Error()
		}
		degraded := meta.FindStatusCondition(kc.Status.Conditions, kafkav1alpha1.ConditionDegraded)
		// Every child applied (no ApplyFailed); the one broker registered has no Lease, so
		// none is alive.
		if degraded == nil || degraded.Reason != kafkav1alpha1.ReasonNoAliveBrokers {
			return false, "Degraded: " + conditionText(degraded)
		}
		for _, obj := range []client.Object{&appsv1.StatefulSet{}, &networkingv1.NetworkPolicy{}, &rbacv1.Role{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "watched", Name: kafkav1alpha1.StatefulSetName("c")}, obj); err != nil {
				return false, err.Error()
			}
		}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: kafkav1alpha1.NodeReaderBindingName("watched", "c")}, &rbacv1.ClusterRoleBinding{}); err != nil {
			return false, "node-reader binding: " + err.Error()
		}
		if len(kc.Status.Brokers) != 1 || kc.Status.CoordinatorBrokers == nil {
			return false, "no registry row or coordinator epoch yet"
		}
		return true, ""
	})

	other := &kafkav1alpha1.KafkaCluster{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "other", Name: "c"}, other); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "other", Name: kafkav1alpha1.StatefulSetName("c")}, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("the cluster of a namespace the manager does not watch got a StatefulSet (err %v)", err)
	}
	if len(other.Status.Conditions) > 0 {
		t.Errorf("the cluster of a namespace the manager does not watch has a status: %+v", other.Status.Conditions)
	}
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{
		"list KafkaClusters in another namespace":   as.List(ctx, &kafkav1alpha1.KafkaClusterList{}, client.InNamespace("other")),
		"create a StatefulSet in another namespace": as.Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "other"}}),
		"delete a pod in another namespace":         as.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "other"}}),
		"list KafkaClusters of every namespace":     as.List(ctx, &kafkav1alpha1.KafkaClusterList{}),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("the manager may %s: err %v, want Forbidden", what, err)
		}
	}
}

// installRBAC creates the RBAC objects of the installation `make build-installer
// NAMESPACES=<watched>` writes, and returns the manager's ServiceAccount.
func installRBAC(ctx context.Context, t *testing.T, env *testenv.Env, watched ...string) account {
	t.Helper()
	rendered, err := devcluster.RenderInstall(filepath.Join("..", "config"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		objs = append(objs, obj)
	}
	if objs, err = install.Namespaced(objs, watched); err != nil {
		t.Fatal(err)
	}
	var manager account
	for _, obj := range objs {
		switch obj.GetKind() {
		case "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		case "Deployment":
			sa, _, _ := unstructured.NestedString(obj.Object, "spec", "template", "spec", "serviceAccountName")
			manager = account{Namespace: obj.GetNamespace(), Name: sa}
		}
	}
	if manager.Name == "" {
		t.Fatal("the installation has no manager Deployment")
	}
	return manager
}

// account names a ServiceAccount.
type account struct{ Namespace, Name string }

func conditionText(c *metav1.Condition) string {
	if c == nil {
		return "none yet"
	}
	return c.Reason + ": " + c.Message
}
