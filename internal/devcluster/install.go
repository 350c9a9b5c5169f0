package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// fieldOwner is the server-side apply field manager of what paddock dev installs.
const fieldOwner = "paddock-dev"

// RenderInstall builds <configDir>/default with kustomize, the way `make build-installer`
// writes dist/install.yaml (same kustomize library version as the Makefile's pinned kustomize;
// `make verify` diffs the two), and returns the YAML.
func RenderInstall(configDir string) ([]byte, error) {
	resources, err := buildInstall(configDir)
	if err != nil {
		return nil, err
	}
	out, err := resources.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", filepath.Join(configDir, "default"), err)
	}
	return out, nil
}

// buildInstall runs kustomize on configDir/default with the options of a plain
// `kustomize build` (no --reorder, plugins off, files only from inside the tree).
func buildInstall(configDir string) (resmap.ResMap, error) {
	return kustomizeBuild(filepath.Join(configDir, "default"))
}

// kustomizeBuild is `kustomize build dir` (also of config/monitoring: prometheus.go).
func kustomizeBuild(dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionUnspecified
	resources, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	return resources, nil
}

// installation is what RenderInstall produced, sorted for applying, and what the environment
// needs to know about the operator it installs.
type installation struct {
	crds    []*apiextensionsv1.CustomResourceDefinition
	objects []*unstructured.Unstructured // everything else, in apply order (namespaces first)
	// manager is the operator's Deployment (labelled app.kubernetes.io/component=manager).
	manager types.NamespacedName
	// image is the manager container's image: the node agent runs it as the local paddock
	// binary, and the manager passes it on to the brokers (--default-broker-image).
	image string
}

// loadInstall renders configDir/default and picks it apart.
func loadInstall(configDir string) (*installation, error) {
	resources, err := buildInstall(configDir)
	if err != nil {
		return nil, err
	}
	inst := &installation{}
	var namespaces, rest []*unstructured.Unstructured
	for _, r := range resources.Resources() {
		// Through JSON, so numbers are what the API machinery expects (int64, float64).
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("install manifest %s: %w", r.CurId(), err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("install manifest %s: %w", r.CurId(), err)
		}
		m := u.Object
		switch u.GetKind() {
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, crd); err != nil {
				return nil, fmt.Errorf("CRD %s: %w", u.GetName(), err)
			}
			inst.crds = append(inst.crds, crd)
		case "Namespace":
			namespaces = append(namespaces, u)
		default:
			rest = append(rest, u)
		}
		if u.GetKind() == "Deployment" && u.GetLabels()["app.kubernetes.io/component"] == "manager" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &d); err != nil {
				return nil, fmt.Errorf("manager Deployment: %w", err)
			}
			if len(d.Spec.Template.Spec.Containers) == 0 {
				return nil, errors.New("the manager Deployment has no container")
			}
			inst.manager = types.NamespacedName{Namespace: d.Namespace, Name: d.Name}
			inst.image = d.Spec.Template.Spec.Containers[0].Image
		}
	}
	if inst.manager.Name == "" {
		return nil, fmt.Errorf("%s renders no Deployment labelled app.kubernetes.io/component=manager", filepath.Join(configDir, "default"))
	}
	inst.objects = append(namespaces, rest...)
	return inst, nil
}

// install applies the operator as `kubectl apply -f dist/install.yaml` would: CRDs (waiting
// until they are served), then the namespace, RBAC and the manager Deployment. Server-side
// apply makes it idempotent, so a --keep restart re-applies the current manifests.
func (e *Env) install(ctx context.Context) error {
	if _, err := envtest.InstallCRDs(e.restConfig, envtest.CRDInstallOptions{CRDs: e.inst.crds, Scheme: e.client.Scheme()}); err != nil {
		return fmt.Errorf("install CRDs: %w", err)
	}
	for _, obj := range e.inst.objects {
		obj = obj.DeepCopy()
		if err := e.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), client.ObjectKeyFromObject(obj), err)
		}
	}
	return nil
}

// StartManager scales the operator's Deployment to one replica and waits until it is
// Available with an up-to-date pod (so after an upgrade, until the rollout is done); the node
// agents run that pod like any other.
func (e *Env) StartManager() error {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	if err := e.scaleManager(ctx, 1); err != nil {
		return err
	}
	return e.waitManagerAvailable(ctx)
}

// StopManager scales the operator's Deployment to zero and waits until its pod is gone (the
// manager got SIGTERM, released its leader Lease and exited); the brokers keep running.
func (e *Env) StopManager() error {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Minute)
	defer cancel()
	if err := e.scaleManager(ctx, 0); err != nil {
		return err
	}
	for {
		pods, err := e.managerPods(ctx)
		if err == nil && len(pods) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager pods still there after scaling %s to 0 (%d left, err %v): %w", e.inst.manager, len(pods), err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *Env) scaleManager(ctx context.Context, replicas int32) error {
	var d appsv1.Deployment
	if err := e.client.Get(ctx, e.inst.manager, &d); err != nil {
		return fmt.Errorf("get manager Deployment: %w", err)
	}
	orig := d.DeepCopy()
	d.Spec.Replicas = ptr.To(replicas)
	if err := e.client.Patch(ctx, &d, client.MergeFrom(orig)); err != nil {
		return fmt.Errorf("scale manager Deployment %s to %d: %w", e.inst.manager, replicas, err)
	}
	return nil
}

// waitManagerAvailable waits for the manager Deployment's Available condition with an
// up-to-date, ready pod, and points logs/manager.log at that pod's log.
func (e *Env) waitManagerAvailable(ctx context.Context) error {
	for {
		ok, detail := e.managerAvailable(ctx)
		if ok {
			return e.linkManagerLog(ctx)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("manager Deployment %s not Available (%s; see %s): %w",
				e.inst.manager, detail, filepath.Join(e.cfg.Dir, "logs"), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (e *Env) managerAvailable(ctx context.Context) (bool, string) {
	var d appsv1.Deployment
	if err := e.client.Get(ctx, e.inst.manager, &d); err != nil {
		return false, err.Error()
	}
	want := ptr.Deref(d.Spec.Replicas, 1)
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want || d.Status.AvailableReplicas < want {
		return false, fmt.Sprintf("%d of %d replicas available, %d up to date", d.Status.AvailableReplicas, want, d.Status.UpdatedReplicas)
	}
	// During a rollout the old pod stays Available beside the new one (maxUnavailable 0):
	// the rollout is done only once no replica of an older template is left.
	if d.Status.Replicas > d.Status.UpdatedReplicas {
		return false, fmt.Sprintf("rolling out: %d replicas, %d up to date", d.Status.Replicas, d.Status.UpdatedReplicas)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			return c.Status == corev1.ConditionTrue, c.Message
		}
	}
	return false, "no Available condition"
}

// managerPods lists the manager Deployment's pods that exist (terminating ones included).
func (e *Env) managerPods(ctx context.Context) ([]corev1.Pod, error) {
	var d appsv1.Deployment
	if err := e.client.Get(ctx, e.inst.manager, &d); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := e.client.List(ctx, &pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// ManagerPod returns the operator's running pod (ready, not terminating).
func (e *Env) ManagerPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := e.managerPods(ctx)
	if err != nil {
		return nil, fmt.Errorf("list manager pods: %w", err)
	}
	for i := range pods {
		if pods[i].DeletionTimestamp == nil && podReady(&pods[i]) {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("no ready manager pod of %s", e.inst.manager)
}

// Manager is the operator's Deployment.
func (e *Env) Manager() types.NamespacedName { return e.inst.manager }

// ManagerServiceAccount is the ServiceAccount the operator's pods run as.
func (e *Env) ManagerServiceAccount(ctx context.Context) (types.NamespacedName, error) {
	var d appsv1.Deployment
	if err := e.client.Get(ctx, e.inst.manager, &d); err != nil {
		return types.NamespacedName{}, fmt.Errorf("get manager Deployment: %w", err)
	}
	return types.NamespacedName{Namespace: d.Namespace, Name: d.Spec.Template.Spec.ServiceAccountName}, nil
}

// linkManagerLog points logs/manager.log at the running manager pod's container log, so the
// operator's log is where it always was.
func (e *Env) linkManagerLog(ctx context.Context) error {
	pod, err := e.ManagerPod(ctx)
	if err != nil {
		return err
	}
	target := filepath.Join("pods", containerLogName(pod.Namespace, pod.Name, pod.Spec.Containers[0].Name)+".log")
	link := e.cfg.logPath("manager")
	_ = os.Remove(link)
	if err := os.Symlink(target, link); err != nil {
		return fmt.Errorf("link manager log: %w", err)
	}
	return nil
}

func containerLogName(namespace, pod, container string) string {
	return strings.Join([]string{namespace, pod, container}, "_")
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
