// Package testenv starts the envtest control plane — a real kube-apiserver and etcd, built from
// source by `make k8s-bins` — with paddock's CRDs installed, for the test suites of api/,
// controllers/ and broker/. It is test support: only _test.go files import it.
//
// The binaries are found through KUBEBUILDER_ASSETS, which the Makefile exports; a plain
// `go test` in a checkout falls back to the newest bin/k8s/<version> that `make k8s-bins`
// built. There is no other fallback: without the binaries Start fails and says how to build
// them.
package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/scheme"
)

// Env is a running control plane.
type Env struct {
	// Config reaches the apiserver as an administrator.
	Config *rest.Config
	// Client is uncached: every read sees the apiserver's current state.
	Client client.Client
	// Scheme knows the Kubernetes and paddock types.
	Scheme *runtime.Scheme

	env *envtest.Environment
}

// controlPlaneWait is how long starting or stopping etcd or kube-apiserver, or establishing the
// CRDs, may take: generous, since a shared two-core machine can be slow by minutes.
const controlPlaneWait = 3 * time.Minute

// Start starts etcd and kube-apiserver and installs the CRDs of config/crd/bases.
func Start() (*Env, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		if dir := builtBinaries(root); dir != "" {
			if err := os.Setenv("KUBEBUILDER_ASSETS", dir); err != nil {
				return nil, fmt.Errorf("set KUBEBUILDER_ASSETS: %w", err)
			}
		}
	}
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is unset and bin/k8s holds no binaries: run the tests with `make test`, or `make k8s-bins` first")
	}
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: s, env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		CRDInstallOptions:     envtest.CRDInstallOptions{MaxTime: controlPlaneWait},
		// envtest's own bounds (20 s to start or stop each process, 10 s for the CRDs to be
		// established) are what an idle machine needs; a loaded one failed a suite's
		// BeforeSuite on them (kube-apiserver not ready after five 20 s tries).
		ControlPlaneStartTimeout: controlPlaneWait,
		ControlPlaneStopTimeout:  controlPlaneWait,
	}}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("start envtest (KUBEBUILDER_ASSETS=%s): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: s}); err != nil {
		return nil, errors.Join(fmt.Errorf("create client: %w", err), e.Stop())
	}
	return e, nil
}

// Stop stops the control plane. It is safe on a nil Env.
func (e *Env) Stop() error {
	if e == nil || e.env == nil {
		return nil
	}
	if err := e.env.Stop(); err != nil {
		return fmt.Errorf("stop envtest: %w", err)
	}
	return nil
}

// AdminKubeconfig returns a kubeconfig for a new system:masters user called name, for a
// process the test starts (the broker binary).
func (e *Env) AdminKubeconfig(name string) ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("add envtest user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig of %s: %w", name, err)
	}
	return kubeconfig, nil
}

// NewNamespace creates a namespace named prefix-<random> and returns its name.
func NewNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("create namespace: %w", err)
	}
	return ns.Name, nil
}

// Table asks the apiserver for the server-side table of a kafka.paddock.dev resource in
// namespace — what `kubectl get` prints; -o wide adds the priority-1 columns, which the table
// always carries.
func (e *Env) Table(ctx context.Context, namespace, resource string) (*metav1.Table, error) {
	gv := v1alpha1.GroupVersion
	rc, err := e.RESTClient()
	if err != nil {
		return nil, err
	}
	raw, err := rc.Get().AbsPath("/apis", gv.Group, gv.Version, "namespaces", namespace, resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get %s table: %w", resource, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		return nil, fmt.Errorf("decode %s table: %w", resource, err)
	}
	return &table, nil
}

// RESTClient is a raw client of the kafka.paddock.dev API, for requests the typed client
// cannot make (a body Go's omitempty would change).
func (e *Env) RESTClient() (*rest.RESTClient, error) {
	gv := v1alpha1.GroupVersion
	c := rest.CopyConfig(e.Config)
	c.APIPath = "/apis"
	c.GroupVersion = &gv
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("rest client: %w", err)
	}
	return rc, nil
}

// repoRoot is the directory of paddock's go.mod, found upwards from the working directory
// (a test runs in its package's directory).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			strings.HasPrefix(string(b), "module github.com/paddock-dev/paddock\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the paddock module")
		}
		dir = parent
	}
}

// builtBinaries is the newest bin/k8s/<version> directory that holds a kube-apiserver, or "".
func builtBinaries(root string) string {
	dirs, _ := filepath.Glob(filepath.Join(root, "bin", "k8s", "*"))
	slices.Sort(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "kube-apiserver")); err == nil {
			return dirs[i]
		}
	}
	return ""
}
