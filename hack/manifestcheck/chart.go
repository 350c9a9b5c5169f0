package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// decodeFile reads a multi-document YAML stream.
func decodeFile(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read-only: closing cannot lose anything
	return decode(f)
}

func decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func checkChartFiles(kustomizePath, helmPath string) ([]string, error) {
	want, err := decodeFile(kustomizePath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", kustomizePath, err)
	}
	got, err := decodeFile(helmPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", helmPath, err)
	}
	return checkChart(want, got), nil
}

// compared are the parts of each kind that must be equal in the two renderings; a kind not
// listed must only exist in both.
var compared = map[string][][]string{
	"CustomResourceDefinition": {{"spec"}},
	// A ClusterRole's aggregation labels put its rules into Kubernetes' view, edit and admin
	// roles: a chart without them grants namespace users nothing.
	"ClusterRole":                      {{"rules"}, {"aggregationRule"}, aggregateTo("view"), aggregateTo("edit"), aggregateTo("admin")},
	"Role":                             {{"rules"}},
	"ClusterRoleBinding":               {{"roleRef"}, {"subjects"}},
	"RoleBinding":                      {{"roleRef"}, {"subjects"}},
	"Deployment":                       {{"spec", "selector"}, {"spec", "replicas"}, {"spec", "template", "spec"}},
	"ValidatingAdmissionPolicy":        {{"spec"}},
	"ValidatingAdmissionPolicyBinding": {{"spec"}},
}

func aggregateTo(role string) []string {
	return []string{"metadata", "labels", "rbac.authorization.k8s.io/aggregate-to-" + role}
}

// checkChart compares install.yaml's objects (want) with the chart's (got).
func checkChart(want, got []*unstructured.Unstructured) []string {
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range got {
		byKey[key(o)] = o
	}
	var problems []string
	seen := map[string]bool{}
	for _, w := range want {
		if w.GetKind() == "Namespace" {
			continue // Helm installs into a namespace it is given (--create-namespace)
		}
		k := key(w)
		seen[k] = true
		g, ok := byKey[k]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: in install.yaml, not in the chart", k))
			continue
		}
		for _, path := range compared[w.GetKind()] {
			wv, _, _ := unstructured.NestedFieldNoCopy(w.Object, path...)
			gv, _, _ := unstructured.NestedFieldNoCopy(g.Object, path...)
			if !reflect.DeepEqual(wv, gv) {
				problems = append(problems, fmt.Sprintf("%s: .%s differs\n--- install.yaml\n%s--- chart\n%s", k, strings.Join(path, "."), render(wv), render(gv)))
			}
		}
	}
	var extra []string
	for k := range byKey {
		if !seen[k] {
			extra = append(extra, fmt.Sprintf("%s: in the chart, not in install.yaml", k))
		}
	}
	slices.Sort(extra)
	return append(problems, extra...)
}

func render(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v\n", v)
	}
	return string(b)
}
