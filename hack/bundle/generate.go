package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// generateOptions are the inputs of one bundle besides the kustomize output.
type generateOptions struct {
	Package        string   // OLM package name
	Version        string   // semver without the leading v
	Channels       []string // first one is the default unless DefaultChannel is set
	DefaultChannel string
	Image          string // operator (and default broker) image; empty keeps the kustomize one
	CreatedAt      string // overrides the base CSV's createdAt when set
	APIDir         string // the Go API package with the csv markers
	IconPath       string // SVG icon
	CopyDir        string // the bundle directory as the Dockerfile's COPY lines name it
}

// bundleOutput is a generated bundle: files relative to the bundle directory, and the
// bundle.Dockerfile that builds its image.
type bundleOutput struct {
	Files      map[string][]byte
	Dockerfile []byte
}

// Bundle metadata: the annotation keys OLM reads from metadata/annotations.yaml and from the
// bundle image's labels.
const (
	annMediatype      = "operators.operatorframework.io.bundle.mediatype.v1"
	annManifests      = "operators.operatorframework.io.bundle.manifests.v1"
	annMetadata       = "operators.operatorframework.io.bundle.metadata.v1"
	annPackage        = "operators.operatorframework.io.bundle.package.v1"
	annChannels       = "operators.operatorframework.io.bundle.channels.v1"
	annDefaultChannel = "operators.operatorframework.io.bundle.channel.default.v1"
	annBuilder        = "operators.operatorframework.io.metrics.builder"
	annMetricsMedia   = "operators.operatorframework.io.metrics.mediatype.v1"
	annLayout         = "operators.operatorframework.io.metrics.project_layout"
	annTestMedia      = "operators.operatorframework.io.test.mediatype.v1"
	annTestConfig     = "operators.operatorframework.io.test.config.v1"

	scorecardDir = "tests/scorecard/"

	// builder names this tool where operator-sdk would put its own version.
	builder       = "paddock-hack-bundle"
	projectLayout = "go.kubebuilder.io/v3"
)

// decodeObjects reads a multi-document YAML stream (kustomize's output).
func decodeObjects(r io.Reader) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, fmt.Errorf("decode manifests: %w", err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// inputs is the kustomize output sorted by what the bundle does with each object.
type inputs struct {
	base       *operatorsv1alpha1.ClusterServiceVersion
	crds       []*apiextensionsv1.CustomResourceDefinition
	crdObjs    []*unstructured.Unstructured
	deployment *appsv1.Deployment
	roles      map[string]*unstructured.Unstructured // "Kind/namespace/name" → Role or ClusterRole
	bindings   []*unstructured.Unstructured
	examples   []*unstructured.Unstructured
	scorecard  *unstructured.Unstructured
	extras     []*unstructured.Unstructured // shipped as they are (Services, ConfigMaps, ...)
}

// extraKinds are the objects besides the CSV and CRDs that OLM installs from a bundle and
// that paddock may ship.
var extraKinds = map[string]bool{
	"Service": true, "ConfigMap": true, "Secret": true, "PodDisruptionBudget": true,
	"PriorityClass": true, "ServiceMonitor": true, "PrometheusRule": true,
}

func sortInputs(objs []*unstructured.Unstructured) (*inputs, error) {
	in := &inputs{roles: map[string]*unstructured.Unstructured{}}
	// The CRDs first: they decide which objects are examples.
	owned := map[string]bool{}
	for _, obj := range objs {
		if obj.GetKind() == "CustomResourceDefinition" {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := fromUnstructured(obj, crd); err != nil {
				return nil, err
			}
			in.crds = append(in.crds, crd)
			in.crdObjs = append(in.crdObjs, obj)
			owned[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
		}
	}
	var serviceAccounts []*unstructured.Unstructured
	for _, obj := range objs {
		kind := obj.GetKind()
		group := obj.GroupVersionKind().Group
		switch {
		case kind == "CustomResourceDefinition", kind == "Namespace":
			// CRDs are handled above; OLM installs into a namespace it is given.
		case kind == "ClusterServiceVersion":
			if in.base != nil {
				return nil, errors.New("more than one ClusterServiceVersion base in the manifests")
			}
			in.base = &operatorsv1alpha1.ClusterServiceVersion{}
			if err := fromUnstructured(obj, in.base); err != nil {
				return nil, err
			}
		case kind == "Deployment":
			if in.deployment != nil {
				return nil, fmt.Errorf("more than one Deployment (%s, %s): the bundle installs one manager", in.deployment.Name, obj.GetName())
			}
			in.deployment = &appsv1.Deployment{}
			if err := fromUnstructured(obj, in.deployment); err != nil {
				return nil, err
			}
		case kind == "ServiceAccount":
			serviceAccounts = append(serviceAccounts, obj)
		case kind == "Role" || kind == "ClusterRole":
			in.roles[kind+"/"+obj.GetNamespace()+"/"+obj.GetName()] = obj
		case kind == "RoleBinding" || kind == "ClusterRoleBinding":
			in.bindings = append(in.bindings, obj)
		case kind == "Configuration" && group == "scorecard.operatorframework.io":
			in.scorecard = obj
		case owned[group+"/"+kind]:
			in.examples = append(in.examples, obj)
		case extraKinds[kind]:
			in.extras = append(in.extras, obj)
		default:
			return nil, fmt.Errorf("%s %s: OLM bundles do not ship this kind; leave it out of config/manifests", kind, obj.GetName())
		}
	}
	switch {
	case in.base == nil:
		return nil, errors.New("no ClusterServiceVersion base in the manifests (config/manifests/bases)")
	case in.deployment == nil:
		return nil, errors.New("no manager Deployment in the manifests")
	case len(in.crds) == 0:
		return nil, errors.New("no CustomResourceDefinitions in the manifests")
	}
	// OLM creates the manager's ServiceAccount itself; any other one is shipped.
	for _, sa := range serviceAccounts {
		if sa.GetName() != in.deployment.Spec.Template.Spec.ServiceAccountName {
			in.extras = append(in.extras, sa)
		}
	}
	return in, nil
}

func fromUnstructured(obj *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, into, true); err != nil {
		return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return nil
}

// permissions turns the RBAC bound to the manager's ServiceAccount into the CSV's
// clusterPermissions (ClusterRoleBindings) and permissions (RoleBindings). OLM creates the
// roles and bindings itself, so the bound roles leave the bundle; unbound roles are shipped.
// A binding to any other ServiceAccount is an error: OLM would never create that account.
func permissions(in *inputs) (cluster, namespaced []operatorsv1alpha1.StrategyDeploymentPermissions, err error) {
	sa := in.deployment.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		return nil, nil, fmt.Errorf("deployment %s has no serviceAccountName", in.deployment.Name)
	}
	var clusterRules, nsRules []rbacv1.PolicyRule
	bound := map[string]bool{}
	for _, obj := range in.bindings {
		var roleRef rbacv1.RoleRef
		var subjects []rbacv1.Subject
		if obj.GetKind() == "ClusterRoleBinding" {
			b := &rbacv1.ClusterRoleBinding{}
			if err := fromUnstructured(obj, b); err != nil {
				return nil, nil, err
			}
			roleRef, subjects = b.RoleRef, b.Subjects
		} else {
			b := &rbacv1.RoleBinding{}
			if err := fromUnstructured(obj, b); err != nil {
				return nil, nil, err
			}
			roleRef, subjects = b.RoleRef, b.Subjects
		}
		toManager := false
		for _, s := range subjects {
			if s.Kind != rbacv1.ServiceAccountKind {
				continue
			}
			if s.Name != sa || (s.Namespace != "" && s.Namespace != in.deployment.Namespace) {
				return nil, nil, fmt.Errorf("%s %s binds ServiceAccount %s/%s, but the manager runs as %s/%s",
					obj.GetKind(), obj.GetName(), s.Namespace, s.Name, in.deployment.Namespace, sa)
			}
			toManager = true
		}
		if !toManager {
			in.extras = append(in.extras, obj)
			continue
		}
		key := roleRef.Kind + "/" + obj.GetNamespace() + "/" + roleRef.Name
		if roleRef.Kind == "ClusterRole" {
			key = "ClusterRole//" + roleRef.Name
		}
		roleObj, ok := in.roles[key]
		if !ok {
			return nil, nil, fmt.Errorf("%s %s refers to %s %s, which is not in the manifests", obj.GetKind(), obj.GetName(), roleRef.Kind, roleRef.Name)
		}
		bound[key] = true
		var rules []rbacv1.PolicyRule
		if roleRef.Kind == "ClusterRole" {
			r := &rbacv1.ClusterRole{}
			if err := fromUnstructured(roleObj, r); err != nil {
				return nil, nil, err
			}
			rules = r.Rules
		} else {
			r := &rbacv1.Role{}
			if err := fromUnstructured(roleObj, r); err != nil {
				return nil, nil, err
			}
			rules = r.Rules
		}
		if obj.GetKind() == "ClusterRoleBinding" {
			clusterRules = append(clusterRules, rules...)
		} else {
			nsRules = append(nsRules, rules...)
		}
	}
	for key, obj := range in.roles {
		if !bound[key] {
			in.extras = append(in.extras, obj)
		}
	}
	if len(clusterRules) > 0 {
		cluster = []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: clusterRules}}
	}
	if len(nsRules) > 0 {
		namespaced = []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: nsRules}}
	}
	return cluster, namespaced, nil
}

// setImage points the manager container at image. The manager's default broker image is its
// own image, so an argument or environment value that names the old image is updated too.
func setImage(d *appsv1.Deployment, image string) (string, error) {
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		if c.Name != "manager" {
			continue
		}
		if image == "" || image == c.Image {
			return c.Image, nil
		}
		old := c.Image
		c.Image = image
		for j, arg := range c.Args {
			if arg == old {
				c.Args[j] = image
			} else if name, value, ok := strings.Cut(arg, "="); ok && value == old {
				c.Args[j] = name + "=" + image
			}
		}
		for j := range c.Env {
			if c.Env[j].Value == old {
				c.Env[j].Value = image
			}
		}
		return image, nil
	}
	return "", fmt.Errorf("deployment %s has no container named manager", d.Name)
}

// generate builds the bundle from the kustomize output and the API package.
func generate(objs []*unstructured.Unstructured, opts generateOptions) (*bundleOutput, error) {
	version, err := semver.Parse(opts.Version)
	if err != nil {
		return nil, fmt.Errorf("version %q: %w", opts.Version, err)
	}
	if len(opts.Channels) == 0 {
		return nil, errors.New("at least one channel is required")
	}
	if opts.DefaultChannel == "" {
		opts.DefaultChannel = opts.Channels[0]
	}
	if !contains(opts.Channels, opts.DefaultChannel) {
		return nil, fmt.Errorf("default channel %q is not one of the channels %v", opts.DefaultChannel, opts.Channels)
	}
	in, err := sortInputs(objs)
	if err != nil {
		return nil, err
	}
	types, err := parseAPITypes(opts.APIDir)
	if err != nil {
		return nil, err
	}
	owned, err := ownedCRDs(types, in.crds)
	if err != nil {
		return nil, err
	}
	clusterPerms, nsPerms, err := permissions(in)
	if err != nil {
		return nil, err
	}
	image, err := setImage(in.deployment, opts.Image)
	if err != nil {
		return nil, err
	}
	examples, err := almExamples(in.examples)
	if err != nil {
		return nil, err
	}
	icon, err := os.ReadFile(opts.IconPath)
	if err != nil {
		return nil, fmt.Errorf("read icon: %w", err)
	}

	csv := in.base.DeepCopy()
	csv.Name = opts.Package + ".v" + version.String()
	csv.Namespace = ""
	csv.Spec.Version.Version = version
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	csv.Annotations["alm-examples"] = examples
	csv.Annotations["containerImage"] = image
	if opts.CreatedAt != "" {
		csv.Annotations["createdAt"] = opts.CreatedAt
	}
	csv.Annotations["operators.operatorframework.io/builder"] = builder
	csv.Annotations["operators.operatorframework.io/project_layout"] = projectLayout
	csv.Spec.Icon = []operatorsv1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString(icon), MediaType: "image/svg+xml"}}
	csv.Spec.RelatedImages = []operatorsv1alpha1.RelatedImage{{Name: opts.Package, Image: image}}
	csv.Spec.CustomResourceDefinitions.Owned = owned
	d := in.deployment
	csv.Spec.InstallStrategy = operatorsv1alpha1.NamedInstallStrategy{
		StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
		StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    []operatorsv1alpha1.StrategyDeploymentSpec{{Name: d.Name, Label: d.Labels, Spec: d.Spec}},
			Permissions:        nsPerms,
			ClusterPermissions: clusterPerms,
		},
	}

	out := &bundleOutput{Files: map[string][]byte{}}
	csvYAML, err := marshalObject(csv, "status")
	if err != nil {
		return nil, fmt.Errorf("marshal csv: %w", err)
	}
	out.Files["manifests/"+opts.Package+".clusterserviceversion.yaml"] = csvYAML
	for i, obj := range in.crdObjs {
		crd := in.crds[i]
		data, err := marshalObject(obj.Object)
		if err != nil {
			return nil, err
		}
		out.Files["manifests/"+crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml"] = data
	}
	for _, obj := range in.extras {
		obj = obj.DeepCopy()
		obj.SetNamespace("")
		data, err := marshalObject(obj.Object)
		if err != nil {
			return nil, err
		}
		gvk := obj.GroupVersionKind()
		gv := gvk.Version
		if gvk.Group != "" {
			gv = gvk.Group + "_" + gvk.Version
		}
		out.Files["manifests/"+obj.GetName()+"_"+gv+"_"+strings.ToLower(gvk.Kind)+".yaml"] = data
	}

	annotations := [][2]string{
		{annMediatype, "registry+v1"},
		{annManifests, "manifests/"},
		{annMetadata, "metadata/"},
		{annPackage, opts.Package},
		{annChannels, strings.Join(opts.Channels, ",")},
		{annDefaultChannel, opts.DefaultChannel},
		{annBuilder, builder},
		{annMetricsMedia, "metrics+v1"},
		{annLayout, projectLayout},
	}
	if in.scorecard != nil {
		data, err := marshalObject(in.scorecard.Object)
		if err != nil {
			return nil, err
		}
		out.Files[scorecardDir+"config.yaml"] = data
		annotations = append(annotations, [2]string{annTestMedia, "scorecard+v1"}, [2]string{annTestConfig, scorecardDir})
	}
	out.Files["metadata/annotations.yaml"] = annotationsYAML(annotations)
	out.Dockerfile = dockerfile(annotations, opts.CopyDir, in.scorecard != nil)
	return out, nil
}

// almExamples renders the samples as the alm-examples JSON array, without namespaces (the
// user picks one when creating them).
func almExamples(samples []*unstructured.Unstructured) (string, error) {
	list := make([]map[string]any, 0, len(samples))
	for _, s := range samples {
		s = s.DeepCopy()
		s.SetNamespace("")
		list = append(list, s.Object)
	}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return "", fmt.Errorf("marshal alm-examples: %w", err)
	}
	return string(data), nil
}

// marshalObject renders obj as YAML with sorted keys and without the nulls that Go's zero
// values leave behind (creationTimestamp: null); drop names top-level keys to leave out.
func marshalObject(obj any, drop ...string) ([]byte, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for _, k := range drop {
		delete(m, k)
	}
	return yaml.Marshal(pruneNulls(m))
}

func pruneNulls(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if val == nil {
				delete(x, k)
				continue
			}
			x[k] = pruneNulls(val)
		}
	case []any:
		for i := range x {
			x[i] = pruneNulls(x[i])
		}
	}
	return v
}

func annotationsYAML(annotations [][2]string) []byte {
	var b bytes.Buffer
	b.WriteString("annotations:\n")
	for _, a := range annotations {
		fmt.Fprintf(&b, "  %s: %s\n", a[0], a[1])
	}
	return b.Bytes()
}

func dockerfile(annotations [][2]string, bundleDir string, scorecard bool) []byte {
	var b bytes.Buffer
	b.WriteString("# Generated by `make bundle` (hack/bundle). Do not edit.\nFROM scratch\n\n")
	for _, a := range annotations {
		fmt.Fprintf(&b, "LABEL %s=%s\n", a[0], a[1])
	}
	dir := filepath.ToSlash(bundleDir)
	fmt.Fprintf(&b, "\nCOPY %s/manifests /manifests/\nCOPY %s/metadata /metadata/\n", dir, dir)
	if scorecard {
		fmt.Fprintf(&b, "COPY %s/%s /%s\n", dir, strings.TrimSuffix(scorecardDir, "/"), scorecardDir)
	}
	return b.Bytes()
}

// writeBundle replaces the generated parts of dir with out, so a file that is no longer
// generated does not linger.
func writeBundle(dir, dockerfilePath string, out *bundleOutput) error {
	for _, sub := range []string{"manifests", "metadata", "tests"} {
		if err := os.RemoveAll(filepath.Join(dir, sub)); err != nil {
			return fmt.Errorf("clean %s: %w", sub, err)
		}
	}
	for name, data := range out.Files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("mkdir for %s: %w", name, err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if err := os.WriteFile(dockerfilePath, out.Dockerfile, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dockerfilePath, err)
	}
	return nil
}
