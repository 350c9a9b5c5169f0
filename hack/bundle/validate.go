package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"
	interfaces "github.com/operator-framework/api/pkg/validation/interfaces"
	"sigs.k8s.io/yaml"
)

// validators are what `operator-sdk bundle validate --select-optional suite=operatorframework`
// runs: the default bundle validators (CSV, CRD, bundle) and the optional OperatorHub,
// category, capability, good-practices and deprecated-API ones, plus the object validator
// (PodDisruptionBudgets, PriorityClasses in the bundle).
var validators = interfaces.Validators{
	validation.ClusterServiceVersionValidator,
	validation.CustomResourceDefinitionValidator,
	validation.BundleValidator,
	validation.OperatorHubV2Validator,
	validation.StandardCategoriesValidator,
	validation.StandardCapabilitiesValidator,
	validation.GoodPracticesValidator,
	validation.AlphaDeprecatedAPIsValidator,
	validation.ObjectValidator,
}

// validationReport lists what the validators found, as "[source] message" lines.
type validationReport struct {
	Errors   []string
	Warnings []string
}

func (r *validationReport) errorf(format string, args ...any) {
	r.Errors = append(r.Errors, fmt.Sprintf(format, args...))
}

func (r *validationReport) print(w io.Writer) {
	for _, e := range r.Errors {
		fmt.Fprintln(w, "ERROR", e)
	}
	for _, e := range r.Warnings {
		fmt.Fprintln(w, "WARN ", e)
	}
	fmt.Fprintf(w, "bundle validate: %d error(s), %d warning(s)\n", len(r.Errors), len(r.Warnings))
}

// validateBundle checks the bundle's format (annotations and Dockerfile labels agree, the
// registry+v1 layout) and runs OLM's validators on its content. Everything it finds wrong,
// including a bundle it cannot load, is in the report.
func validateBundle(dir, dockerfilePath string) *validationReport {
	report := &validationReport{}
	checkFormat(report, dir, dockerfilePath)
	bundle, err := manifests.GetBundleFromDir(dir)
	if err != nil {
		report.errorf("[load %s] %v", dir, err)
	}
	if bundle == nil || bundle.CSV == nil {
		return report
	}
	objs := bundle.ObjectsToValidate()
	// The deprecated-API checks treat the oldest Kubernetes the CSV installs on as the target.
	objs = append(objs, map[string]string{"k8s-version": bundle.CSV.Spec.MinKubeVersion})
	for _, result := range validators.Validate(objs...) {
		for _, e := range result.Errors {
			report.errorf("[%s] %s", result.Name, e.Error())
		}
		for _, w := range result.Warnings {
			report.Warnings = append(report.Warnings, fmt.Sprintf("[%s] %s", result.Name, w.Error()))
		}
	}
	return report
}

// checkFormat is the registry+v1 format check that operator-sdk delegates to
// operator-registry: the annotations a bundle image needs, and a Dockerfile whose labels say
// exactly the same.
func checkFormat(report *validationReport, dir, dockerfilePath string) {
	data, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		report.errorf("[format] %v", err)
		return
	}
	var file struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		report.errorf("[format] metadata/annotations.yaml: %v", err)
		return
	}
	ann := file.Annotations
	for key, want := range map[string]string{annMediatype: "registry+v1", annManifests: "manifests/", annMetadata: "metadata/"} {
		if ann[key] != want {
			report.errorf("[format] annotation %s is %q, want %q", key, ann[key], want)
		}
	}
	if ann[annPackage] == "" {
		report.errorf("[format] annotation %s (the package name) is missing", annPackage)
	}
	channels := strings.Split(ann[annChannels], ",")
	if ann[annChannels] == "" {
		report.errorf("[format] annotation %s (the channels) is missing", annChannels)
	}
	if d := ann[annDefaultChannel]; d != "" && !contains(channels, d) {
		report.errorf("[format] default channel %q is not one of the channels %q", d, ann[annChannels])
	}
	if cfg := ann[annTestConfig]; cfg != "" {
		if _, err := os.Stat(filepath.Join(dir, cfg, "config.yaml")); err != nil {
			report.errorf("[format] annotation %s names %s, which has no config.yaml", annTestConfig, cfg)
		}
	}

	labels, err := dockerfileLabels(dockerfilePath)
	if err != nil {
		report.errorf("[format] %v", err)
		return
	}
	for _, key := range unionKeys(ann, labels) {
		if ann[key] != labels[key] {
			report.errorf("[format] %s: label %s=%q but metadata/annotations.yaml says %q", dockerfilePath, key, labels[key], ann[key])
		}
	}
}

// dockerfileLabels reads the `LABEL key=value` lines of a Dockerfile.
func dockerfileLabels(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		rest, ok := strings.CutPrefix(line, "LABEL ")
		if !ok {
			continue
		}
		key, value, ok := strings.Cut(strings.TrimSpace(rest), "=")
		if !ok {
			return nil, fmt.Errorf("%s: LABEL line %q is not key=value", path, line)
		}
		labels[key] = strings.Trim(value, `"`)
	}
	return labels, sc.Err()
}

func unionKeys(a, b map[string]string) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]string{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}
