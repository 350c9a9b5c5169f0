package main

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := decode(strings.NewReader(docs))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

const kustomized = `
apiVersion: v1
kind: Namespace
metadata: {name: paddock-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: paddock-paddock-manager}
rules:
- {apiGroups: [""], resources: [events], verbs: [create, list, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: paddock-kafka-viewer, labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}}
rules:
- {apiGroups: [kafka.paddock.dev], resources: [kafkaclusters], verbs: [get]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: paddock-broker-writes}
spec: {failurePolicy: Fail}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: paddock-manager, namespace: paddock-system}
`

func TestTheChartMustGrantWhatInstallYAMLGrants(t *testing.T) {
	same := objects(t, kustomized)[1:] // Helm creates no Namespace
	if p := checkChart(objects(t, kustomized), same); len(p) != 0 {
		t.Fatalf("identical renderings: %v", p)
	}
	drifted := objects(t, strings.Replace(kustomized, "verbs: [create, list, patch]", "verbs: [create, patch]", 1))[1:]
	if p := checkChart(objects(t, kustomized), drifted); len(p) != 1 || !strings.Contains(p[0], "ClusterRole /paddock-paddock-manager: .rules differs") {
		t.Fatalf("a rule missing from the chart: got %v", p)
	}
	missing := objects(t, kustomized)[1:4]
	if p := checkChart(objects(t, kustomized), missing); len(p) != 1 || !strings.Contains(p[0], "ServiceAccount paddock-system/paddock-manager: in install.yaml, not in the chart") {
		t.Fatalf("an object missing from the chart: got %v", p)
	}
	unaggregated := objects(t, strings.Replace(kustomized, "metadata: {name: paddock-kafka-viewer, labels: {rbac.authorization.k8s.io/aggregate-to-view: \"true\"}}", "metadata: {name: paddock-kafka-viewer}", 1))[1:]
	if p := checkChart(objects(t, kustomized), unaggregated); len(p) != 1 || !strings.Contains(p[0], "ClusterRole /paddock-kafka-viewer: .metadata.labels.rbac.authorization.k8s.io/aggregate-to-view differs") {
		t.Fatalf("a ClusterRole the chart does not aggregate into view: got %v", p)
	}
	policy := objects(t, strings.Replace(kustomized, "failurePolicy: Fail", "failurePolicy: Ignore", 1))[1:]
	if p := checkChart(objects(t, kustomized), policy); len(p) != 1 || !strings.Contains(p[0], "ValidatingAdmissionPolicy /paddock-broker-writes: .spec differs") {
		t.Fatalf("an admission policy that fails open in the chart: got %v", p)
	}
	extra := append(objects(t, kustomized)[1:], objects(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: paddock-system}\n")...)
	if p := checkChart(objects(t, kustomized), extra); len(p) != 1 || !strings.Contains(p[0], "in the chart, not in install.yaml") {
		t.Fatalf("an object only the chart has: got %v", p)
	}
}

func crd(versions ...apiextensionsv1.CustomResourceDefinitionVersion) map[string]*apiextensionsv1.CustomResourceDefinition {
	return map[string]*apiextensionsv1.CustomResourceDefinition{"kafkaclusters.kafka.paddock.dev": {
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Scope: apiextensionsv1.NamespaceScoped, Versions: versions},
	}}
}

func version(spec apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionVersion {
	return apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Served: true, Storage: true,
		Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec},
		}}}
}

func TestCRDChangesThatBreakStoredObjectsAreRefused(t *testing.T) {
	baseline := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"replicas": {Type: "integer"},
		"mode":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"A"`)}, {Raw: []byte(`"B"`)}}},
		"labels":   {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
	}}
	change := func(mutate func(*apiextensionsv1.JSONSchemaProps)) apiextensionsv1.JSONSchemaProps {
		s := *baseline.DeepCopy()
		mutate(&s)
		return s
	}
	for _, tc := range []struct {
		rule string
		cur  map[string]*apiextensionsv1.CustomResourceDefinition
		want string // substring of the one problem; "" means compatible
	}{
		{"the same schema is compatible", crd(version(baseline)), ""},
		{"a new optional field is compatible", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["template"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
		}))), ""},
		{"a new enum value is compatible", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) {
			p := s.Properties["mode"]
			p.Enum = append(p.Enum, apiextensionsv1.JSON{Raw: []byte(`"C"`)})
			s.Properties["mode"] = p
		}))), ""},
		{"a removed field is refused", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "replicas") }))), ".spec.replicas: field removed"},
		{"a retyped field is refused", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["replicas"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}))), `type changed from "integer" to "string"`},
		{"a removed enum value is refused", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) {
			p := s.Properties["mode"]
			p.Enum = p.Enum[:1]
			s.Properties["mode"] = p
		}))), `enum value "B" removed`},
		{"a new required field is refused", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) { s.Required = []string{"replicas"} }))), "replicas became required"},
		{"a retyped map value is refused", crd(version(change(func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["labels"] = apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "integer"}}}
		}))), ".spec.labels{}: type changed"},
		{"a version no longer served is refused", crd(), "version v1alpha1 is no longer served"},
		{"a removed CRD is refused", map[string]*apiextensionsv1.CustomResourceDefinition{}, "was removed"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			p := checkCRDs(crd(version(baseline)), tc.cur)
			switch {
			case tc.want == "" && len(p) != 0:
				t.Fatalf("want compatible, got %v", p)
			case tc.want != "" && (len(p) != 1 || !strings.Contains(p[0], tc.want)):
				t.Fatalf("want one problem with %q, got %v", tc.want, p)
			}
		})
	}
}
