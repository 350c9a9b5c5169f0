package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// InstallAdmission creates the ValidatingAdmissionPolicy and binding of config/admission —
// as they are in the repository, without config/default's name prefix — unless they exist
// (a suite's specs share one control plane). The API server starts enforcing them a moment
// later: a spec waits for the first refusal it expects.
func (e *Env) InstallAdmission(ctx context.Context) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	for _, name := range []string{"broker_writes_policy.yaml", "broker_writes_binding.yaml"} {
		path := filepath.Join(root, "config", "admission", name)
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("open %s: %w", path, err)
		}
		obj := &unstructured.Unstructured{}
		err = yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&obj.Object)
		_ = f.Close() // read-only
		if err != nil {
			return fmt.Errorf("decode %s: %w", path, err)
		}
		if err := e.Client.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return fmt.Errorf("create %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return nil
}

// PodIdentity is a rest config that acts as ServiceAccount namespace/serviceAccount with a
// token bound to pod (name and uid), as the API server sees a pod's projected token: the
// user system:serviceaccount:<namespace>:<serviceAccount>, its groups, and the pod in
// userInfo.extra. An empty pod is a token bound to no pod.
func (e *Env) PodIdentity(namespace, serviceAccount, pod, uid string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, serviceAccount),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	if pod != "" {
		cfg.Impersonate.Extra = map[string][]string{
			"authentication.kubernetes.io/pod-name": {pod},
			"authentication.kubernetes.io/pod-uid":  {uid},
		}
	}
	return cfg
}
