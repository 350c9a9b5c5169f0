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
	// Replaces is the CSV this one upgrades (<package>.v<semver>, older than Version); empty
	// for the first release. SkipRange is the semver range of versions OLM may upgrade from
	// straight to this one (olm.skipRange), which must not contain Version.
	Replaces  string
	SkipRange string
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

// sortInputs sorts the kustomize output by what the bundle does with each object, and checks
// that the parts every bundle needs are there.
func sortInputs(objs []*unstructured.Unstructured) (*inputs, error) {
	in := &inputs{roles: map[string]*unstructured.Unstructured{}}
	owned, err := in.readCRDs(objs)
	if err != nil {
		return nil, err
	}
	var serviceAccounts []*unstructured.Unstructured
	for _, obj := range objs {
		if obj.GetKind() == "ServiceAccount" {
			serviceAccounts = append(serviceAccounts, obj)
		} else if err := in.add(obj, owned); err != nil {
			return nil, err
		}
	}
	if err := in.complete(); err != nil {
		return nil, err
	}
	// OLM creates the manager's ServiceAccount itself; any other one is shipped.
	for _, sa := range serviceAccounts {
		if sa.GetName() != in.deployment.Spec.Template.Spec.ServiceAccountName {
			in.extras = append(in.extras, sa)
		}
	}
	return in, nil
}

// readCRDs takes the CRDs first, since they decide which objects are examples: it returns
// the group/kind of every custom resource the bundle owns.
func (in *inputs) readCRDs(objs []*unstructured.Unstructured) (owned map[string]bool, err error) {
	owned = map[string]bool{}
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := fromUnstructured(obj, crd); err != nil {
			return nil, err
		}
		in.crds = append(in.crds, crd)
		in.crdObjs = append(in.crdObjs, obj)
		owned[crd.Spec.Group+"/"+crd.Spec.Names.Kind] = true
	}
	return owned, nil
}

// add files one object (not a CRD or ServiceAccount) by its kind; a kind OLM bundles do not
// ship is an error.
func (in *inputs) add(obj *unstructured.Unstructured, owned map[string]bool) error {
	kind := obj.GetKind()
	group := obj.GroupVersionKind().Group
	switch {
	case kind == "CustomResourceDefinition", kind == "Namespace":
		// CRDs are read first; OLM installs into a namespace it is given.
	case kind == "ClusterServiceVersion":
		if in.base != nil {
			return errors.New("more than one ClusterServiceVersion base in the manifests")
		}
		in.base = &operatorsv1alpha1.ClusterServiceVersion{}
		return fromUnstructured(obj, in.base)
	case kind == "Deployment":
		if in.deployment != nil {
			return fmt.Errorf("more than one Deployment (%s, %s): the bundle installs one manager", in.deployment.Name, obj.GetName())
		}
		in.deployment = &appsv1.Deployment{}
		return fromUnstructured(obj, in.deployment)
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
		return fmt.Errorf("%s %s: OLM bundles do not ship this kind; leave it out of config/manifests", kind, obj.GetName())
	}
	return nil
}

// complete checks that the parts every bundle needs were found.
func (in *inputs) complete() error {
	switch {
	case in.base == nil:
		return errors.New("no ClusterServiceVersion base in the manifests (config/manifests/bases)")
	case in.deployment == nil:
		return errors.New("no manager Deployment in the manifests")
	case len(in.crds) == 0:
		return errors.New("no CustomResourceDefinitions in the manifests")
	}
	return nil
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
		roleRef, subjects, err := readBinding(obj)
		if err != nil {
			return nil, nil, err
		}
		toManager, err := bindsManager(obj, subjects, sa, in.deployment.Namespace)
		if err != nil {
			return nil, nil, err
		}
		if !toManager {
			in.extras = append(in.extras, obj)
			continue
		}
		key, rules, err := in.boundRules(obj, roleRef)
		if err != nil {
			return nil, nil, err
		}
		bound[key] = true
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
	return deploymentPermissions(sa, clusterRules), deploymentPermissions(sa, nsRules), nil
}

// readBinding decodes a RoleBinding or ClusterRoleBinding.
func readBinding(obj *unstructured.Unstructured) (rbacv1.RoleRef, []rbacv1.Subject, error) {
	if obj.GetKind() == "ClusterRoleBinding" {
		b := &rbacv1.ClusterRoleBinding{}
		err := fromUnstructured(obj, b)
		return b.RoleRef, b.Subjects, err
	}
	b := &rbacv1.RoleBinding{}
	err := fromUnstructured(obj, b)
	return b.RoleRef, b.Subjects, err
}

// bindsManager reports whether binding obj names the manager's ServiceAccount sa (in
// namespace ns, or in no namespace); naming any other ServiceAccount is an error.
func bindsManager(obj *unstructured.Unstructured, subjects []rbacv1.Subject, sa, ns string) (bool, error) {
	toManager := false
	for _, s := range subjects {
		if s.Kind != rbacv1.ServiceAccountKind {
			continue
		}
		if s.Name != sa || (s.Namespace != "" && s.Namespace != ns) {
			return false, fmt.Errorf("%s %s binds ServiceAccount %s/%s, but the manager runs as %s/%s",
				obj.GetKind(), obj.GetName(), s.Namespace, s.Name, ns, sa)
		}
		toManager = true
	}
	return toManager, nil
}

// boundRules returns the rules of the role binding obj refers to, and that role's key in
// in.roles; a role that is not in the manifests is an error.
func (in *inputs) boundRules(obj *unstructured.Unstructured, roleRef rbacv1.RoleRef) (string, []rbacv1.PolicyRule, error) {
	key := roleRef.Kind + "/" + obj.GetNamespace() + "/" + roleRef.Name
	if roleRef.Kind == "ClusterRole" {
		key = "ClusterRole//" + roleRef.Name
	}
	roleObj, ok := in.roles[key]
	if !ok {
		return "", nil, fmt.Errorf("%s %s refers to %s %s, which is not in the manifests", obj.GetKind(), obj.GetName(), roleRef.Kind, roleRef.Name)
	}
	if roleRef.Kind == "ClusterRole" {
		r := &rbacv1.ClusterRole{}
		err := fromUnstructured(roleObj, r)
		return key, r.Rules, err
	}
	r := &rbacv1.Role{}
	err := fromUnstructured(roleObj, r)
	return key, r.Rules, err
}

// deploymentPermissions is the CSV entry granting rules to sa, or none without rules.
func deploymentPermissions(sa string, rules []rbacv1.PolicyRule) []operatorsv1alpha1.StrategyDeploymentPermissions {
	if len(rules) == 0 {
		return nil
	}
	return []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: sa, Rules: rules}}
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

// generate builds the bundle from the kustomize output and the API package: the options
// checked, the objects sorted, the ClusterServiceVersion built, then the manifests and the
// metadata written.
func generate(objs []*unstructured.Unstructured, opts generateOptions) (*bundleOutput, error) {
	version, err := opts.check()
	if err != nil {
		return nil, err
	}
	in, err := sortInputs(objs)
	if err != nil {
		return nil, err
	}
	csv, err := clusterServiceVersion(in, opts, version)
	if err != nil {
		return nil, err
	}
	out := &bundleOutput{Files: map[string][]byte{}}
	if err := out.addManifests(opts.Package, csv, in); err != nil {
		return nil, err
	}
	if err := out.addMetadata(opts, in.scorecard); err != nil {
		return nil, err
	}
	return out, nil
}

// check validates the version and the channels and fills in the default channel.
func (opts *generateOptions) check() (semver.Version, error) {
	version, err := semver.Parse(opts.Version)
	if err != nil {
		return version, fmt.Errorf("version %q: %w", opts.Version, err)
	}
	if len(opts.Channels) == 0 {
		return version, errors.New("at least one channel is required")
	}
	if opts.DefaultChannel == "" {
		opts.DefaultChannel = opts.Channels[0]
	}
	if !contains(opts.Channels, opts.DefaultChannel) {
		return version, fmt.Errorf("default channel %q is not one of the channels %v", opts.DefaultChannel, opts.Channels)
	}
	return version, opts.checkUpgradeGraph(version)
}

// checkUpgradeGraph refuses an upgrade edge OLM would follow the wrong way or never: replaces
// names another package or a version that is not older, a skip range that is not semver or
// that contains this very version.
func (opts *generateOptions) checkUpgradeGraph(version semver.Version) error {
	if opts.Replaces != "" {
		prefix := opts.Package + ".v"
		if !strings.HasPrefix(opts.Replaces, prefix) {
			return fmt.Errorf("replaces %q: want %s<version>", opts.Replaces, prefix)
		}
		prev, err := semver.Parse(strings.TrimPrefix(opts.Replaces, prefix))
		if err != nil {
			return fmt.Errorf("replaces %q: %w", opts.Replaces, err)
		}
		if !prev.LT(version) {
			return fmt.Errorf("replaces %q: version %s is not older than %s", opts.Replaces, prev, version)
		}
	}
	if opts.SkipRange != "" {
		inRange, err := semver.ParseRange(opts.SkipRange)
		if err != nil {
			return fmt.Errorf("skip range %q: %w", opts.SkipRange, err)
		}
		if inRange(version) {
			return fmt.Errorf("skip range %q contains the bundle's own version %s", opts.SkipRange, version)
		}
	}
	return nil
}

// clusterServiceVersion is the base CSV completed with what the bundle derives: the owned
// CRDs and their descriptors (from the API markers), the manager's permissions and image,
// the examples, the icon, and the Deployment install strategy.
func clusterServiceVersion(in *inputs, opts generateOptions, version semver.Version) (*operatorsv1alpha1.ClusterServiceVersion, error) {
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
	csv.Spec.Replaces = opts.Replaces
	annotateCSV(csv, opts.CreatedAt, image, examples)
	if opts.SkipRange != "" {
		csv.Annotations["olm.skipRange"] = opts.SkipRange
	}
	csv.Spec.Icon = []operatorsv1alpha1.Icon{{Data: base64.StdEncoding.EncodeToString(icon), MediaType: "image/svg+xml"}}
	csv.Spec.RelatedImages = []operatorsv1alpha1.RelatedImage{{Name: opts.Package, Image: image}}
	csv.Spec.CustomResourceDefinitions.Owned = owned
	csv.Spec.InstallStrategy = deploymentStrategy(in.deployment, nsPerms, clusterPerms)
	return csv, nil
}

// annotateCSV sets the CSV annotations OLM and the catalogs read: the examples, the image,
// the creation time (when given; else the base's stays) and who built the bundle.
func annotateCSV(csv *operatorsv1alpha1.ClusterServiceVersion, createdAt, image, examples string) {
	if csv.Annotations == nil {
		csv.Annotations = map[string]string{}
	}
	csv.Annotations["alm-examples"] = examples
	csv.Annotations["containerImage"] = image
	if createdAt != "" {
		csv.Annotations["createdAt"] = createdAt
	}
	csv.Annotations["operators.operatorframework.io/builder"] = builder
	csv.Annotations["operators.operatorframework.io/project_layout"] = projectLayout
}

// deploymentStrategy installs the manager Deployment d with its permissions.
func deploymentStrategy(d *appsv1.Deployment, namespaced, cluster []operatorsv1alpha1.StrategyDeploymentPermissions) operatorsv1alpha1.NamedInstallStrategy {
	return operatorsv1alpha1.NamedInstallStrategy{
		StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
		StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
			DeploymentSpecs:    []operatorsv1alpha1.StrategyDeploymentSpec{{Name: d.Name, Label: d.Labels, Spec: d.Spec}},
			Permissions:        namespaced,
			ClusterPermissions: cluster,
		},
	}
}

// addManifests writes manifests/: the CSV, the CRDs as kustomize rendered them, and the
// extra objects without their namespace (OLM installs them into the operator's).
func (out *bundleOutput) addManifests(pkg string, csv *operatorsv1alpha1.ClusterServiceVersion, in *inputs) error {
	csvYAML, err := marshalObject(csv, "status")
	if err != nil {
		return fmt.Errorf("marshal csv: %w", err)
	}
	out.Files["manifests/"+pkg+".clusterserviceversion.yaml"] = csvYAML
	for i, obj := range in.crdObjs {
		crd := in.crds[i]
		data, err := marshalObject(obj.Object)
		if err != nil {
			return err
		}
		out.Files["manifests/"+crd.Spec.Group+"_"+crd.Spec.Names.Plural+".yaml"] = data
	}
	for _, obj := range in.extras {
		obj = obj.DeepCopy()
		obj.SetNamespace("")
		data, err := marshalObject(obj.Object)
		if err != nil {
			return err
		}
		out.Files[extraManifestName(obj)] = data
	}
	return nil
}

// extraManifestName is where an extra object goes: manifests/<name>_<group>_<version>_<kind>.yaml
// (no group for the core API), as operator-sdk names them.
func extraManifestName(obj *unstructured.Unstructured) string {
	gvk := obj.GroupVersionKind()
	gv := gvk.Version
	if gvk.Group != "" {
		gv = gvk.Group + "_" + gvk.Version
	}
	return "manifests/" + obj.GetName() + "_" + gv + "_" + strings.ToLower(gvk.Kind) + ".yaml"
}

// addMetadata writes metadata/annotations.yaml, the scorecard configuration when there is
// one, and the bundle.Dockerfile whose labels repeat the annotations.
func (out *bundleOutput) addMetadata(opts generateOptions, scorecard *unstructured.Unstructured) error {
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
	if scorecard != nil {
		data, err := marshalObject(scorecard.Object)
		if err != nil {
			return err
		}
		out.Files[scorecardDir+"config.yaml"] = data
		annotations = append(annotations, [2]string{annTestMedia, "scorecard+v1"}, [2]string{annTestConfig, scorecardDir})
	}
	out.Files["metadata/annotations.yaml"] = annotationsYAML(annotations)
	out.Dockerfile = dockerfile(annotations, opts.CopyDir, scorecard != nil)
	return nil
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
