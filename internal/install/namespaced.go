package install

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LabelBinds marks the ClusterRoleBinding of the manager's namespaced permissions
// (config/rbac/role_binding.yaml): the one Namespaced replaces with a RoleBinding per watched
// namespace. Its value is BindsWatchedNamespaces.
const (
	LabelBinds             = "kafka.paddock.dev/binds"
	BindsWatchedNamespaces = "watched-namespaces"
)

// Namespaced returns objs (an installation, in order) for a manager that watches namespaces
// only: every ClusterRoleBinding labelled LabelBinds=BindsWatchedNamespaces becomes one
// RoleBinding of the same name, role and subjects in each namespace, and the manager
// container (the Deployment labelled app.kubernetes.io/component=manager) is started with
// --namespace=<namespaces>. The cluster-scoped permissions stay bound cluster-wide. objs is
// not modified. namespaces must be valid namespace names, at least one, without repeats.
func Namespaced(objs []*unstructured.Unstructured, namespaces []string) ([]*unstructured.Unstructured, error) {
	if err := checkNamespaces(namespaces); err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	bindings, managers := 0, 0
	for _, obj := range objs {
		switch {
		case obj.GetKind() == "ClusterRoleBinding" && obj.GetLabels()[LabelBinds] == BindsWatchedNamespaces:
			bindings++
			for _, ns := range namespaces {
				out = append(out, roleBindingIn(obj, ns))
			}
		case obj.GetKind() == "Deployment" && obj.GetLabels()["app.kubernetes.io/component"] == "manager":
			managers++
			d, err := watching(obj, namespaces)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		default:
			out = append(out, obj.DeepCopy())
		}
	}
	switch {
	case bindings == 0:
		return nil, fmt.Errorf("no ClusterRoleBinding labelled %s=%s to bind per namespace", LabelBinds, BindsWatchedNamespaces)
	case managers != 1:
		return nil, fmt.Errorf("%d manager Deployments (labelled app.kubernetes.io/component=manager), want 1", managers)
	}
	return out, nil
}

func checkNamespaces(namespaces []string) error {
	if len(namespaces) == 0 {
		return errors.New("no namespace to watch")
	}
	for i, ns := range namespaces {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
		}
		if slices.Contains(namespaces[:i], ns) {
			return fmt.Errorf("namespace %q given twice", ns)
		}
	}
	return nil
}

// roleBindingIn is binding (a ClusterRoleBinding) as a RoleBinding in namespace ns.
func roleBindingIn(binding *unstructured.Unstructured, ns string) *unstructured.Unstructured {
	rb := binding.DeepCopy()
	rb.SetKind("RoleBinding")
	rb.SetNamespace(ns)
	return rb
}

// watching is the manager Deployment d with --namespace=<namespaces> appended to the args of
// its container named manager.
func watching(d *unstructured.Unstructured, namespaces []string) (*unstructured.Unstructured, error) {
	d = d.DeepCopy()
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", d.GetName(), err)
	}
	for i, c := range containers {
		m, ok := c.(map[string]any)
		if !ok || m["name"] != "manager" {
			continue
		}
		args, _, err := unstructured.NestedStringSlice(m, "args")
		if err != nil {
			return nil, fmt.Errorf("deployment %s: %w", d.GetName(), err)
		}
		if slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--namespace") }) {
			return nil, fmt.Errorf("deployment %s already sets --namespace", d.GetName())
		}
		if err := unstructured.SetNestedStringSlice(m, append(args, "--namespace="+strings.Join(namespaces, ",")), "args"); err != nil {
			return nil, err
		}
		containers[i] = m
		if err := unstructured.SetNestedSlice(d.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return nil, err
		}
		return d, nil
	}
	return nil, fmt.Errorf("deployment %s has no container named manager", d.GetName())
}
