package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// operatorNamespace is where the test installs the operator, as OLM would into the namespace
// of an OperatorGroup; exampleNamespace is a user's namespace.
const (
	operatorNamespace = "paddock-operators"
	exampleNamespace  = "kafka"
)

// startAPIServer runs a real kube-apiserver and etcd (envtest, KUBEBUILDER_ASSETS) with the
// bundle's CRDs installed.
func startAPIServer(t *testing.T, bundle *manifests.Bundle) client.Client {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run through `make test`, or point it at bin/k8s/<version>")
	}
	env := &envtest.Environment{CRDs: bundle.V1CRDs, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

// installLikeOLM creates what OLM creates from the CSV for an OperatorGroup targeting
// targets (none: AllNamespaces): the ServiceAccount, a ClusterRole and ClusterRoleBinding per
// clusterPermissions entry; per permissions entry a ClusterRole and ClusterRoleBinding for
// AllNamespaces, else a Role and RoleBinding in operatorNamespace copied into each target;
// the Deployment, and the bundle's other manifests, all in operatorNamespace.
func installLikeOLM(t *testing.T, c client.Client, bundle *manifests.Bundle, targets ...string) {
	t.Helper()
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}})
	strategy := bundle.CSV.Spec.InstallStrategy.StrategySpec
	accounts := map[string]bool{}
	bindCluster := func(name, sa string, rules []rbacv1.PolicyRule) {
		create(t, c, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
		create(t, c, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: operatorNamespace}},
		})
	}
	for i, p := range strategy.ClusterPermissions {
		accounts[p.ServiceAccountName] = true
		bindCluster(fmt.Sprintf("paddock-cluster-%d", i), p.ServiceAccountName, p.Rules)
	}
	for i, p := range strategy.Permissions {
		accounts[p.ServiceAccountName] = true
		name := fmt.Sprintf("paddock-ns-%d", i)
		if len(targets) == 0 {
			bindCluster(name, p.ServiceAccountName, p.Rules)
			continue
		}
		for _, ns := range append([]string{operatorNamespace}, targets...) {
			create(t, c, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: p.Rules})
			create(t, c, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.ServiceAccountName, Namespace: operatorNamespace}},
			})
		}
	}
	for _, d := range strategy.DeploymentSpecs {
		accounts[d.Spec.Template.Spec.ServiceAccountName] = true
	}
	for sa := range accounts {
		create(t, c, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: operatorNamespace}})
	}
	for _, d := range strategy.DeploymentSpecs {
		create(t, c, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: operatorNamespace, Labels: d.Label}, Spec: d.Spec})
	}
	for _, obj := range bundle.Objects {
		switch obj.GetKind() {
		case "ClusterServiceVersion", "CustomResourceDefinition":
			continue
		}
		obj = obj.DeepCopy()
		obj.SetNamespace(operatorNamespace)
		create(t, c, obj)
	}
}

// can asks the apiserver whether the manager's ServiceAccount may do verb on resource.
func can(t *testing.T, c client.Client, sa, verb, group, resource, namespace string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + operatorNamespace + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + operatorNamespace},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
	}}
	create(t, c, review)
	return review.Status.Allowed
}

// almExamplesOf decodes the CSV's alm-examples.
func almExamplesOf(t *testing.T, csv *operatorsv1alpha1.ClusterServiceVersion) []*unstructured.Unstructured {
	t.Helper()
	var raw []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &raw); err != nil {
		t.Fatalf("alm-examples: %v", err)
	}
	var out []*unstructured.Unstructured
	for _, r := range raw {
		out = append(out, &unstructured.Unstructured{Object: r})
	}
	return out
}

func TestBundleInstallsOnARealAPIServer(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(committedBundle)
	if err != nil {
		t.Fatal(err)
	}
	c := startAPIServer(t, bundle)
	installLikeOLM(t, c, bundle)
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exampleNamespace}})
	sa := bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName

	t.Run("the manager's account may run clusters in any namespace and lead in its own", func(t *testing.T) {
		for _, check := range []struct{ verb, group, resource, namespace string }{
			{"create", "apps", "statefulsets", exampleNamespace},
			{"patch", "kafka.paddock.dev", "kafkaclusters/status", exampleNamespace},
			{"watch", "discovery.k8s.io", "endpointslices", exampleNamespace},
			{"update", "coordination.k8s.io", "leases", operatorNamespace},
		} {
			if !can(t, c, sa, check.verb, check.group, check.resource, check.namespace) {
				t.Errorf("%s may not %s %s.%s in %s", sa, check.verb, check.resource, check.group, check.namespace)
			}
		}
		if can(t, c, sa, "create", "apiextensions.k8s.io", "customresourcedefinitions", "") {
			t.Error("the manager may create CRDs; OLM owns them")
		}
		if can(t, c, sa, "create", "admissionregistration.k8s.io", "validatingadmissionpolicies", "") {
			t.Error("the manager may create admission policies; it must not be able to lift the brokers' limits")
		}
	})

	t.Run("every alm-example is accepted by its CRD's schema", func(t *testing.T) {
		examples := almExamplesOf(t, bundle.CSV)
		kinds := map[string]bool{}
		for _, ex := range examples {
			ex.SetNamespace(exampleNamespace)
			if err := c.Create(context.Background(), ex); err != nil {
				t.Errorf("alm-example %s %s rejected: %v", ex.GetKind(), ex.GetName(), err)
			}
			kinds[ex.GetKind()] = true
		}
		for _, want := range []string{"KafkaCluster", "KafkaTopic"} {
			if !kinds[want] {
				t.Errorf("alm-examples has no %s", want)
			}
		}
		cluster := &unstructured.Unstructured{}
		cluster.SetAPIVersion("kafka.paddock.dev/v1alpha1")
		cluster.SetKind("KafkaCluster")
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: exampleNamespace, Name: "demo"}, cluster); err != nil {
			t.Fatal(err)
		}
		if replicas, _, _ := unstructured.NestedInt64(cluster.Object, "spec", "replicas"); replicas != 3 {
			t.Errorf("the example KafkaCluster has %d brokers, want 3", replicas)
		}
	})

	t.Run("a broken alm-example is rejected by the schema", func(t *testing.T) {
		broken := 0
		for _, ex := range almExamplesOf(t, bundle.CSV) {
			if ex.GetKind() != "KafkaCluster" {
				continue
			}
			broken++
			ex.SetNamespace(exampleNamespace)
			ex.SetName("broken")
			if err := unstructured.SetNestedField(ex.Object, int64(0), "spec", "replicas"); err != nil {
				t.Fatal(err)
			}
			err := c.Create(context.Background(), ex)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.replicas") {
				t.Fatalf("a KafkaCluster with 0 brokers: err = %v, want Invalid on spec.replicas", err)
			}
		}
		if broken == 0 {
			t.Fatal("no KafkaCluster example to break")
		}
	})
}

// An OperatorGroup that targets one namespace gets the manager permissions there (and its
// leader election in its own), never in another namespace: the CSV lists the manager's
// namespaced permissions as permissions, not clusterPermissions (docs/security.md, "Least
// privilege"). What is cluster-scoped (Nodes) stays cluster-wide.
func TestTheBundlesNamespacedPermissionsStayInTheTargetNamespaces(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(committedBundle)
	if err != nil {
		t.Fatal(err)
	}
	c := startAPIServer(t, bundle)
	create(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: exampleNamespace}})
	installLikeOLM(t, c, bundle, exampleNamespace)
	sa := bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.ServiceAccountName
	for _, check := range []struct {
		verb, group, resource, namespace string
		want                             bool
	}{
		{"create", "apps", "statefulsets", exampleNamespace, true},
		{"patch", "kafka.paddock.dev", "kafkaclusters/status", exampleNamespace, true},
		{"create", "networking.k8s.io", "networkpolicies", exampleNamespace, true},
		{"update", "coordination.k8s.io", "leases", operatorNamespace, true},
		{"watch", "", "nodes", "", true},
		{"create", "apps", "statefulsets", "default", false},
		{"list", "kafka.paddock.dev", "kafkaclusters", "default", false},
		{"delete", "", "pods", "default", false},
	} {
		if got := can(t, c, sa, check.verb, check.group, check.resource, check.namespace); got != check.want {
			t.Errorf("%s may %s %s.%s in %q: %v, want %v", sa, check.verb, check.resource, check.group, check.namespace, got, check.want)
		}
	}
}
