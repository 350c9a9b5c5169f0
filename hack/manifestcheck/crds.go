package main

import (
	"fmt"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// readCRDs reads every CRD in the YAML files of dir, by name.
func readCRDs(dir string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, p := range paths {
		objs, err := decodeFile(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, crd); err != nil {
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out[crd.Name] = crd
		}
	}
	return out, nil
}

func checkCRDDirs(baselineDir, dir string) ([]string, error) {
	old, err := readCRDs(baselineDir)
	if err != nil {
		return nil, err
	}
	if len(old) == 0 {
		return nil, fmt.Errorf("no CRDs in the baseline %s", baselineDir)
	}
	cur, err := readCRDs(dir)
	if err != nil {
		return nil, err
	}
	return checkCRDs(old, cur), nil
}

// checkCRDs lists what in cur would break an object or a client written for old.
func checkCRDs(old, cur map[string]*apiextensionsv1.CustomResourceDefinition) []string {
	var problems []string
	for _, name := range sortedKeys(old) {
		o, c := old[name], cur[name]
		if c == nil {
			problems = append(problems, fmt.Sprintf("CRD %s was removed", name))
			continue
		}
		if o.Spec.Scope != c.Spec.Scope {
			problems = append(problems, fmt.Sprintf("CRD %s: scope changed from %s to %s", name, o.Spec.Scope, c.Spec.Scope))
		}
		for _, ov := range o.Spec.Versions {
			i := slices.IndexFunc(c.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == ov.Name })
			if i < 0 || (ov.Served && !c.Spec.Versions[i].Served) {
				problems = append(problems, fmt.Sprintf("CRD %s: version %s is no longer served", name, ov.Name))
				continue
			}
			if ov.Schema == nil || c.Spec.Versions[i].Schema == nil {
				continue
			}
			problems = append(problems, compareSchema(name+" "+ov.Name, "", ov.Schema.OpenAPIV3Schema, c.Spec.Versions[i].Schema.OpenAPIV3Schema)...)
		}
	}
	return problems
}

// compareSchema walks an old schema and the current one together.
func compareSchema(crd, path string, old, cur *apiextensionsv1.JSONSchemaProps) []string {
	if old == nil {
		return nil
	}
	at := func(format string, args ...any) string {
		p := path
		if p == "" {
			p = "."
		}
		return fmt.Sprintf("CRD %s: %s: %s", crd, p, fmt.Sprintf(format, args...))
	}
	if cur == nil {
		return []string{at("field removed")}
	}
	var problems []string
	if old.Type != cur.Type {
		problems = append(problems, at("type changed from %q to %q", old.Type, cur.Type))
	}
	if old.XPreserveUnknownFields != nil && *old.XPreserveUnknownFields && (cur.XPreserveUnknownFields == nil || !*cur.XPreserveUnknownFields) {
		problems = append(problems, at("no longer preserves unknown fields"))
	}
	if len(cur.Enum) > 0 {
		for _, e := range old.Enum {
			if !slices.ContainsFunc(cur.Enum, func(c apiextensionsv1.JSON) bool { return string(c.Raw) == string(e.Raw) }) {
				problems = append(problems, at("enum value %s removed", e.Raw))
			}
		}
		if len(old.Enum) == 0 {
			problems = append(problems, at("became an enum: values stored before may be refused"))
		}
	}
	for _, r := range cur.Required {
		if !slices.Contains(old.Required, r) {
			problems = append(problems, at("%s became required: objects stored without it are refused on their next write", r))
		}
	}
	for _, name := range sortedKeys(old.Properties) {
		op := old.Properties[name]
		var cp *apiextensionsv1.JSONSchemaProps
		if p, ok := cur.Properties[name]; ok {
			cp = &p
		}
		problems = append(problems, compareSchema(crd, path+"."+name, &op, cp)...)
	}
	if old.Items != nil && old.Items.Schema != nil {
		var ci *apiextensionsv1.JSONSchemaProps
		if cur.Items != nil {
			ci = cur.Items.Schema
		}
		problems = append(problems, compareSchema(crd, path+"[]", old.Items.Schema, ci)...)
	}
	if old.AdditionalProperties != nil && old.AdditionalProperties.Schema != nil {
		var ca *apiextensionsv1.JSONSchemaProps
		if cur.AdditionalProperties != nil {
			ca = cur.AdditionalProperties.Schema
		}
		problems = append(problems, compareSchema(crd, path+"{}", old.AdditionalProperties.Schema, ca)...)
	}
	return problems
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
