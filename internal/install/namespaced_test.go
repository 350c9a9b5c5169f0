package install

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func object(kind, name string, labels map[string]string, extra map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind}}
	u.SetName(name)
	u.SetLabels(labels)
	for k, v := range extra {
		u.Object[k] = v
	}
	return u
}

func installation() []*unstructured.Unstructured {
	binds := map[string]string{LabelBinds: BindsWatchedNamespaces}
	roleRef := map[string]any{"roleRef": map[string]any{"kind": "ClusterRole", "name": "paddock-paddock-manager"}}
	return []*unstructured.Unstructured{
		object("ClusterRole", "paddock-paddock-manager", nil, nil),
		object("ClusterRoleBinding", "paddock-manager", binds, roleRef),
		object("ClusterRoleBinding", "paddock-manager-cluster", nil, nil),
		object("Deployment", "paddock-manager", map[string]string{"app.kubernetes.io/component": "manager"}, map[string]any{
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "manager", "args": []any{"manager", "--leader-elect"}},
			}}}},
		}),
	}
}

func TestAWatchingManagerGetsARoleBindingPerNamespaceAndTheFlag(t *testing.T) {
	in := installation()
	out, err := Namespaced(in, []string{"shop", "dev"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range out {
		got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
	}
	want := "ClusterRole /paddock-paddock-manager,RoleBinding shop/paddock-manager,RoleBinding dev/paddock-manager,ClusterRoleBinding /paddock-manager-cluster,Deployment /paddock-manager"
	if strings.Join(got, ",") != want {
		t.Fatalf("objects %v, want %s", got, want)
	}
	if ref, _, _ := unstructured.NestedString(out[1].Object, "roleRef", "name"); ref != "paddock-paddock-manager" {
		t.Errorf("the RoleBinding binds %q, want the manager's ClusterRole", ref)
	}
	containers, _, _ := unstructured.NestedSlice(out[4].Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	if strings.Join(args, " ") != "manager --leader-elect --namespace=shop,dev" {
		t.Errorf("manager args %v", args)
	}
	if in[1].GetKind() != "ClusterRoleBinding" {
		t.Error("the input was modified")
	}
}

func TestANamespacedInstallationRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		why        string
		objs       []*unstructured.Unstructured
		namespaces []string
		says       string
	}{
		{"no namespace", installation(), nil, "no namespace"},
		{"an invalid namespace", installation(), []string{"Shop"}, `namespace "Shop"`},
		{"a namespace twice", installation(), []string{"a", "a"}, "given twice"},
		{"nothing to bind", installation()[2:], []string{"a"}, "no ClusterRoleBinding labelled"},
		{"no manager", installation()[:3], []string{"a"}, "0 manager Deployments"},
	} {
		if _, err := Namespaced(tc.objs, tc.namespaces); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err %v, want one saying %q", tc.why, err, tc.says)
		}
	}
}
