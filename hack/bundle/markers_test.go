package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

func TestMarkerArgsSplitOnlyAtTopLevelCommas(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"plain pairs", `type=spec,displayName="Brokers"`, map[string]string{"type": "spec", "displayName": `"Brokers"`}},
		{"commas inside quotes stay", `displayName="a, b",type=status`, map[string]string{"displayName": `"a, b"`, "type": "status"}},
		{"commas inside braces stay", `resources={{Pod,v1,x},{Lease,v1,y}},displayName="K"`,
			map[string]string{"resources": "{{Pod,v1,x},{Lease,v1,y}}", "displayName": `"K"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMarkerArgs(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseMarkerArgs(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestMarkerArgsRejectDuplicatesAndBareWords(t *testing.T) {
	for _, in := range []string{`type=spec,type=status`, `displayName`} {
		if _, err := parseMarkerArgs(in); err == nil {
			t.Errorf("parseMarkerArgs(%q) accepted it", in)
		}
	}
}

func TestDisplayNameSplitsGoIdentifiersIntoWords(t *testing.T) {
	for in, want := range map[string]string{"DrainTimeout": "Drain Timeout", "ClusterID": "Cluster ID", "ID": "ID", "TopicName": "Topic Name"} {
		if got := displayNameOf(in); got != want {
			t.Errorf("displayNameOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// writeAPI writes a one-file Go API package and returns its directory.
func writeAPI(t *testing.T, src string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "types.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "widgets.example.dev"
	crd.Spec.Group = "example.dev"
	crd.Spec.Names.Kind = "Widget"
	crd.Spec.Names.Plural = "widgets"
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}
	return crd
}

const widgetHeader = `package v1

// Widget is a test kind.
// +kubebuilder:object:root=true
// +operator-sdk:csv:customresourcedefinitions:displayName="Widget",resources={{Pod,v1,w}}
type Widget struct {
	Spec   WidgetSpec   ` + "`json:\"spec\"`" + `
	Status WidgetStatus ` + "`json:\"status\"`" + `
}

type WidgetStatus struct{}
`

func TestDescriptorsFollowNestedStructsAndInlineFields(t *testing.T) {
	dir := writeAPI(t, widgetHeader+`
type WidgetSpec struct {
	// size is how big.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Size int32 `+"`json:\"size\"`"+`
	Shared `+"`json:\",inline\"`"+`
	// knob is nested.
	Knob Knob `+"`json:\"knob\"`"+`
}

type Shared struct {
	// colour is inlined.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Colour"
	Colour string `+"`json:\"colour\"`"+`
}

type Knob struct {
	// turns counts.
	// +operator-sdk:csv:customresourcedefinitions:type=spec
	MaxTurns int32 `+"`json:\"maxTurns\"`"+`
}
`)
	types, err := parseAPITypes(dir)
	if err != nil {
		t.Fatal(err)
	}
	owned, err := ownedCRDs(types, []*apiextensionsv1.CustomResourceDefinition{widgetCRD()})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range owned[0].SpecDescriptors {
		got = append(got, d.Path+"|"+d.DisplayName+"|"+strings.Join(d.XDescriptors, ";")+"|"+d.Description)
	}
	want := []string{
		"size|Size|urn:alm:descriptor:com.tectonic.ui:podCount|size is how big.",
		"colour|Colour||colour is inlined.",
		"knob.maxTurns|Max Turns||turns counts.",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("spec descriptors:\n got %q\nwant %q", got, want)
	}
	if d := owned[0]; d.DisplayName != "Widget" || d.Description != "Widget is a test kind." || len(d.Resources) != 1 || d.Resources[0].Kind != "Pod" {
		t.Errorf("crd description = %+v", d)
	}
}

func TestMarkersThatCannotBecomeDescriptorsAreErrors(t *testing.T) {
	tests := []struct {
		name, spec, wantErr string
	}{
		{"marker under a slice is unreachable", `
type WidgetSpec struct {
	Items []Item ` + "`json:\"items\"`" + `
}
type Item struct {
	// +operator-sdk:csv:customresourcedefinitions:type=spec
	Name string ` + "`json:\"name\"`" + `
}`, "not reachable"},
		{"type= must match spec or status", `
type WidgetSpec struct {
	// +operator-sdk:csv:customresourcedefinitions:type=status
	Name string ` + "`json:\"name\"`" + `
}`, "type=status but the field is under spec"},
		{"a misspelt argument is not ignored", `
type WidgetSpec struct {
	// +operator-sdk:csv:customresourcedefinitions:type=spec,xDescriptor={"x"}
	Name string ` + "`json:\"name\"`" + `
}`, "unknown csv marker argument(s) xDescriptor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			types, err := parseAPITypes(writeAPI(t, widgetHeader+tt.spec))
			if err != nil {
				t.Fatal(err)
			}
			_, err = ownedCRDs(types, []*apiextensionsv1.CustomResourceDefinition{widgetCRD()})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("ownedCRDs error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestAKindWithoutADisplayNameMarkerIsAnError(t *testing.T) {
	dir := writeAPI(t, `package v1

// Widget is a test kind.
// +kubebuilder:object:root=true
type Widget struct {
	Spec WidgetSpec `+"`json:\"spec\"`"+`
}

type WidgetSpec struct{}
`)
	types, err := parseAPITypes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ownedCRDs(types, []*apiextensionsv1.CustomResourceDefinition{widgetCRD()}); err == nil || !strings.Contains(err.Error(), "has no +operator-sdk:csv") {
		t.Fatalf("ownedCRDs error = %v, want a missing-marker error", err)
	}
}
