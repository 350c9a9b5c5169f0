package main

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// repoRoot is the paddock work tree this module sits in (hack/bundle).
const repoRoot = "../.."

// managerYAML stands in for config/default's manager: what the generator's rules act on.
const managerYAML = `
apiVersion: v1
kind: Namespace
metadata: {name: paddock-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: paddock-manager, namespace: paddock-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: paddock-manager}
rules:
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: paddock-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: paddock-manager}
subjects:
- {kind: ServiceAccount, name: paddock-manager, namespace: paddock-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: paddock-leader-election, namespace: paddock-system}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: paddock-leader-election, namespace: paddock-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: paddock-leader-election}
subjects:
- {kind: ServiceAccount, name: paddock-manager, namespace: paddock-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: paddock-viewer}
rules:
- apiGroups: [kafka.paddock.dev]
  resources: [brokers]
  verbs: [get]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: paddock-manager
  namespace: paddock-system
  labels: {app.kubernetes.io/name: paddock}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: paddock}}
  template:
    metadata: {labels: {app.kubernetes.io/name: paddock}}
    spec:
      serviceAccountName: paddock-manager
      containers:
      - name: manager
        image: ghcr.io/paddock-dev/paddock:latest
        args: [manager, --default-broker-image=ghcr.io/paddock-dev/paddock:latest]
---
apiVersion: v1
kind: Service
metadata: {name: paddock-manager-metrics, namespace: paddock-system}
spec:
  ports: [{name: metrics, port: 8080}]
---
apiVersion: kafka.paddock.dev/v1alpha1
kind: KafkaTopic
metadata: {name: orders}
spec: {cluster: demo}
`

// fixtureObjects is the real CSV base and CRDs plus managerYAML, as kustomize would stream them.
func fixtureObjects(t *testing.T, extra string) []*unstructured.Unstructured {
	t.Helper()
	var stream bytes.Buffer
	files, err := filepath.Glob(filepath.Join(repoRoot, "config/crd/bases/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	files = append(files, filepath.Join(repoRoot, "config/manifests/bases/paddock.clusterserviceversion.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		stream.WriteString("---\n")
		stream.Write(data)
	}
	stream.WriteString("---\n" + managerYAML + "\n---\n" + extra)
	objs, err := decodeObjects(&stream)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func fixtureOptions() generateOptions {
	return generateOptions{
		Package: "paddock", Version: "1.2.3", Channels: []string{"candidate", "stable"},
		Image: "registry.example/paddock:v1.2.3", APIDir: filepath.Join(repoRoot, "api/v1alpha1"),
		IconPath: filepath.Join(repoRoot, "config/manifests/paddock.svg"), CopyDir: "bundle",
	}
}

func generatedCSV(t *testing.T, out *bundleOutput) *operatorsv1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.UnmarshalStrict(out.Files["manifests/paddock.clusterserviceversion.yaml"], csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

func TestGenerateIsByteForByteRepeatable(t *testing.T) {
	first, err := generate(fixtureObjects(t, ""), fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	second, err := generate(fixtureObjects(t, ""), fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatal("two runs over the same inputs produced different bundles")
	}
}

func TestGeneratedCSVCarriesTheManagerAndItsPermissions(t *testing.T) {
	out, err := generate(fixtureObjects(t, ""), fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	csv := generatedCSV(t, out)
	if csv.Name != "paddock.v1.2.3" || csv.Spec.Version.String() != "1.2.3" {
		t.Errorf("csv name/version = %s/%s", csv.Name, csv.Spec.Version)
	}
	strategy := csv.Spec.InstallStrategy.StrategySpec
	if len(strategy.DeploymentSpecs) != 1 || strategy.DeploymentSpecs[0].Name != "paddock-manager" {
		t.Fatalf("deployments = %+v", strategy.DeploymentSpecs)
	}
	c := strategy.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/paddock:v1.2.3" || c.Args[1] != "--default-broker-image=registry.example/paddock:v1.2.3" {
		t.Errorf("the manager and its default broker image must both be the bundle's image: image=%s args=%v", c.Image, c.Args)
	}
	if csv.Annotations["containerImage"] != c.Image || csv.Spec.RelatedImages[0].Image != c.Image {
		t.Errorf("containerImage/relatedImages disagree with the deployment: %s, %v", csv.Annotations["containerImage"], csv.Spec.RelatedImages)
	}
	if got := strategy.ClusterPermissions; len(got) != 1 || got[0].ServiceAccountName != "paddock-manager" || got[0].Rules[0].Resources[0] != "statefulsets" {
		t.Errorf("clusterPermissions = %+v, want the bound ClusterRole's rules", got)
	}
	if got := strategy.Permissions; len(got) != 1 || got[0].Rules[0].Resources[0] != "leases" {
		t.Errorf("permissions = %+v, want the leader-election Role's rules", got)
	}
	// OLM creates the manager's account, roles and bindings; an unbound role and the Service
	// are shipped as they are, without a namespace.
	var names []string
	for name := range out.Files {
		names = append(names, name)
	}
	for _, want := range []string{"manifests/paddock-viewer_rbac.authorization.k8s.io_v1_clusterrole.yaml", "manifests/paddock-manager-metrics_v1_service.yaml"} {
		if _, ok := out.Files[want]; !ok {
			t.Errorf("missing %s in %v", want, names)
		}
	}
	for _, name := range names {
		if strings.Contains(name, "serviceaccount") || strings.Contains(name, "binding") || strings.Contains(name, "leader-election") {
			t.Errorf("%s should have gone into the CSV", name)
		}
	}
	if strings.Contains(string(out.Files["manifests/paddock-manager-metrics_v1_service.yaml"]), "namespace") {
		t.Error("shipped objects must not pin a namespace: OLM installs into the one it is given")
	}
	if !strings.Contains(csv.Annotations["alm-examples"], `"kind": "KafkaTopic"`) {
		t.Errorf("the KafkaTopic sample is not in alm-examples: %s", csv.Annotations["alm-examples"])
	}
}

func TestTheCSVCarriesTheUpgradeGraph(t *testing.T) {
	opts := fixtureOptions()
	opts.Replaces, opts.SkipRange = "paddock.v1.2.0", ">=1.0.0 <1.2.3"
	out, err := generate(fixtureObjects(t, ""), opts)
	if err != nil {
		t.Fatal(err)
	}
	csv := generatedCSV(t, out)
	if csv.Spec.Replaces != "paddock.v1.2.0" || csv.Annotations["olm.skipRange"] != ">=1.0.0 <1.2.3" {
		t.Fatalf("replaces %q, olm.skipRange %q: want the edge and the range given", csv.Spec.Replaces, csv.Annotations["olm.skipRange"])
	}
	first, err := generate(fixtureObjects(t, ""), fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	if csv := generatedCSV(t, first); csv.Spec.Replaces != "" || csv.Annotations["olm.skipRange"] != "" {
		t.Fatalf("a first release replaces nothing: %q, %q", csv.Spec.Replaces, csv.Annotations["olm.skipRange"])
	}
}

func TestAnnotationsAndDockerfileNameTheSameChannels(t *testing.T) {
	out, err := generate(fixtureObjects(t, ""), fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	ann := string(out.Files["metadata/annotations.yaml"])
	for _, want := range []string{annChannels + ": candidate,stable", annDefaultChannel + ": candidate", annPackage + ": paddock"} {
		if !strings.Contains(ann, want) {
			t.Errorf("annotations.yaml lacks %q:\n%s", want, ann)
		}
		if label := "LABEL " + strings.Replace(want, ": ", "=", 1); !strings.Contains(string(out.Dockerfile), label) {
			t.Errorf("bundle.Dockerfile lacks %q", label)
		}
	}
}

func TestGenerateRefusesInputsOLMCannotInstallFaithfully(t *testing.T) {
	tests := []struct {
		name, extra, wantErr string
		opts                 func(*generateOptions)
	}{
		{"a binding to another ServiceAccount (OLM would never create it)", `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: stray}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: paddock-manager}
subjects:
- {kind: ServiceAccount, name: manager, namespace: system}
`, "binds ServiceAccount system/manager", nil},
		{"a kind bundles cannot carry", `
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: extra}
`, "OLM bundles do not ship this kind", nil},
		{"a second Deployment", `
apiVersion: apps/v1
kind: Deployment
metadata: {name: other}
`, "more than one Deployment", nil},
		{"a version that is not semver", "", `version "1.2"`, func(o *generateOptions) { o.Version = "1.2" }},
		{"a default channel outside the channels", "", "not one of the channels", func(o *generateOptions) { o.DefaultChannel = "fast" }},
		{"replaces naming a newer version", "", "is not older than 1.2.3", func(o *generateOptions) { o.Replaces = "paddock.v1.3.0" }},
		{"replaces naming another package", "", "want paddock.v<version>", func(o *generateOptions) { o.Replaces = "other.v1.0.0" }},
		{"a skip range containing the bundle's version", "", "contains the bundle's own version", func(o *generateOptions) { o.SkipRange = ">=1.0.0 <=1.2.3" }},
		{"a skip range that is not semver", "", `skip range "soon"`, func(o *generateOptions) { o.SkipRange = "soon" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := fixtureOptions()
			if tt.opts != nil {
				tt.opts(&opts)
			}
			_, err := generate(fixtureObjects(t, tt.extra), opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("generate error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
