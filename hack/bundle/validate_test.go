package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/operator-framework/api/pkg/manifests"
	"sigs.k8s.io/yaml"
)

const (
	committedBundle     = repoRoot + "/bundle"
	committedDockerfile = repoRoot + "/bundle.Dockerfile"
	csvFile             = "manifests/paddock.clusterserviceversion.yaml"
)

// expectedWarning is the one warning the committed bundle may raise: Broker is an internal
// object (users never create one), so alm-examples has no Broker example on purpose.
const expectedWarning = "Kind=Broker: provided API should have an example annotation"

func TestCommittedBundlePassesOLMValidators(t *testing.T) {
	report := validateBundle(committedBundle, committedDockerfile)
	if len(report.Errors) > 0 {
		t.Errorf("errors (run `make bundle` after changing the API, RBAC or config/manifests):\n%s", strings.Join(report.Errors, "\n"))
	}
	for _, w := range report.Warnings {
		if !strings.Contains(w, expectedWarning) {
			t.Errorf("unexpected warning: %s", w)
		}
	}
}

// copyBundle copies the committed bundle and Dockerfile into a temp dir for mutation.
func copyBundle(t *testing.T) (dir, dockerfile string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "bundle")
	err := filepath.Walk(committedBundle, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(committedBundle, path)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	dockerfile = filepath.Join(root, "bundle.Dockerfile")
	data, err := os.ReadFile(committedDockerfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dockerfile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, dockerfile
}

// editCSV rewrites the copied CSV through edit, as a generic map.
func editCSV(t *testing.T, dir string, edit func(csv map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, csvFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var csv map[string]any
	if err := yaml.Unmarshal(data, &csv); err != nil {
		t.Fatal(err)
	}
	edit(csv)
	if data, err = yaml.Marshal(csv); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func setAnnotation(csv map[string]any, key, value string) {
	csv["metadata"].(map[string]any)["annotations"].(map[string]any)[key] = value
}

func TestValidationFailsOnABrokenBundle(t *testing.T) {
	tests := []struct {
		name    string
		break_  func(t *testing.T, dir, dockerfile string)
		wantErr string
	}{
		{"a CRD removed from the bundle", func(t *testing.T, dir, _ string) {
			if err := os.Remove(filepath.Join(dir, "manifests/kafka.paddock.dev_kafkatopics.yaml")); err != nil {
				t.Fatal(err)
			}
		}, `owned CRD "kafka.paddock.dev/v1alpha1, Kind=KafkaTopic" not found in bundle`},
		{"alm-examples that is not JSON", func(t *testing.T, dir, _ string) {
			editCSV(t, dir, func(csv map[string]any) { setAnnotation(csv, "alm-examples", `[{"kind": "KafkaCluster",]`) })
		}, "invalid example"},
		{"an alm-example of a kind the bundle does not own", func(t *testing.T, dir, _ string) {
			editCSV(t, dir, func(csv map[string]any) {
				setAnnotation(csv, "alm-examples", `[{"apiVersion": "kafka.paddock.dev/v1alpha1", "kind": "KafkaClustr", "metadata": {"name": "x"}}]`)
			})
		}, "example must have a provided API"},
		{"a capability level that does not exist", func(t *testing.T, dir, _ string) {
			editCSV(t, dir, func(csv map[string]any) { setAnnotation(csv, "capabilities", "Full Lifecycle Plus") })
		}, "is not a valid capabilities level"},
		{"Dockerfile labels that disagree with annotations.yaml", func(t *testing.T, _, dockerfile string) {
			data, _ := os.ReadFile(dockerfile)
			data = []byte(strings.Replace(string(data), "channels.v1=candidate", "channels.v1=stable", 1))
			if err := os.WriteFile(dockerfile, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "label operators.operatorframework.io.bundle.channels.v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, dockerfile := copyBundle(t)
			tt.break_(t, dir, dockerfile)
			report := validateBundle(dir, dockerfile)
			if !strings.Contains(strings.Join(report.Errors, "\n"), tt.wantErr) {
				t.Fatalf("errors %q do not mention %q", report.Errors, tt.wantErr)
			}
		})
	}
}

// TestCommittedCSVMakesTheClaimsOfTheIssue pins what the CSV promises users, so a regenerated
// bundle cannot quietly drop one.
func TestCommittedCSVMakesTheClaimsOfTheIssue(t *testing.T) {
	bundle, err := manifests.GetBundleFromDir(committedBundle)
	if err != nil {
		t.Fatal(err)
	}
	csv := bundle.CSV
	modes := map[string]bool{}
	for _, m := range csv.Spec.InstallModes {
		modes[string(m.Type)] = m.Supported
	}
	if want := map[string]bool{"OwnNamespace": true, "SingleNamespace": true, "MultiNamespace": false, "AllNamespaces": true}; !equalMaps(modes, want) {
		t.Errorf("install modes = %v, want %v", modes, want)
	}
	// OwnNamespace and SingleNamespace are honest only if the manager scopes itself to the
	// namespaces OLM targets.
	manager := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs[0].Spec.Template.Spec.Containers[0]
	scoped := false
	for _, e := range manager.Env {
		if e.Name == "WATCH_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			e.ValueFrom.FieldRef.FieldPath == "metadata.annotations['olm.targetNamespaces']" {
			scoped = contains(manager.Args, "--namespace=$(WATCH_NAMESPACE)")
		}
	}
	if !scoped {
		t.Errorf("the manager is not given OLM's target namespaces: args %v, env %v", manager.Args, manager.Env)
	}
	var internal []string
	if err := json.Unmarshal([]byte(csv.Annotations["operators.operatorframework.io/internal-objects"]), &internal); err != nil || len(internal) != 1 || internal[0] != "brokers.kafka.paddock.dev" {
		t.Errorf("internal-objects = %q, want brokers only", csv.Annotations["operators.operatorframework.io/internal-objects"])
	}
	if csv.Annotations["categories"] != "Streaming & Messaging" || csv.Spec.MinKubeVersion == "" || len(csv.Spec.Icon) != 1 {
		t.Errorf("categories %q, minKubeVersion %q, %d icons", csv.Annotations["categories"], csv.Spec.MinKubeVersion, len(csv.Spec.Icon))
	}

	// Every generated CRD is shipped and owned; each owned CRD has a description.
	crdFiles, err := filepath.Glob(filepath.Join(repoRoot, "config/crd/bases/*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	owned := map[string]bool{}
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		owned[o.Name] = o.DisplayName != "" && o.Description != ""
	}
	shipped := map[string]bool{}
	for _, crd := range bundle.V1CRDs {
		shipped[crd.Name] = true
	}
	for _, f := range crdFiles {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		group, plural, _ := strings.Cut(name, "_")
		crdName := plural + "." + group
		if !shipped[crdName] || !owned[crdName] {
			t.Errorf("%s: shipped=%v, owned with a display name and description=%v", crdName, shipped[crdName], owned[crdName])
		}
	}

	// The status a user watches is described: conditions, the broker counts (fenced
	// included) and the cluster id.
	var clusterStatus []string
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		if o.Kind == "KafkaCluster" {
			for _, d := range o.StatusDescriptors {
				clusterStatus = append(clusterStatus, d.Path)
			}
		}
	}
	for _, want := range []string{"conditions", "clusterID", "counts.registered", "counts.serving", "counts.fenced", "counts.alive", "counts.dead"} {
		if !contains(clusterStatus, want) {
			t.Errorf("KafkaCluster status descriptors %v lack %s", clusterStatus, want)
		}
	}
}

func equalMaps(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestValidateCommandFailsOnErrorsOnly pins the exit code `make bundle-validate` (and so
// `make test`) relies on: 1 on any error, 0 with warnings alone.
func TestValidateCommandFailsOnErrorsOnly(t *testing.T) {
	var out, errOut strings.Builder
	if code := run([]string{"validate", "--bundle-dir", committedBundle, "--dockerfile", committedDockerfile}, nil, &out, &errOut); code != 0 {
		t.Errorf("committed bundle: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	dir, dockerfile := copyBundle(t)
	if err := os.Remove(filepath.Join(dir, "manifests/kafka.paddock.dev_kafkaclusters.yaml")); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if code := run([]string{"validate", "--bundle-dir", dir, "--dockerfile", dockerfile}, nil, &out, &errOut); code != 1 {
		t.Errorf("bundle without the KafkaCluster CRD: exit %d, want 1\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "ERROR") {
		t.Errorf("no ERROR line printed:\n%s", out.String())
	}
}
