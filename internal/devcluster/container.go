package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// imageEntrypoint is the paddock image's ENTRYPOINT: a container without a command, or with
// this one, runs the local paddock binary.
const imageEntrypoint = "/paddock"

// hostEnv are the variables of paddock dev's own environment a container process inherits;
// everything else comes from the pod spec, as in a container.
var hostEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "GOCOVERDIR"}

// mount maps a container path to the local directory that stands in for it.
type mount struct{ containerPath, hostPath string }

// command builds the argv and environment of a container's process. Volume mount paths are
// local directories here, so every argument and env value that names a path under a mount is
// rewritten to the directory standing in for it (e.g. --data-dir=/var/lib/paddock becomes
// --data-dir=.paddock/dev/data/claims/<ns>/<claim>).
func (w *podWorker) command(ctx context.Context, c corev1.Container) (argv, env []string, err error) {
	cfg := w.node.rt.cfg
	switch {
	case len(c.Command) == 0, c.Command[0] == imageEntrypoint:
		argv = []string{cfg.PaddockBinary}
		if len(c.Command) > 0 {
			argv = append(argv, c.Command[1:]...)
		}
	default:
		argv = append(argv, c.Command...)
	}
	argv = append(argv, c.Args...)

	mounts, err := w.mounts(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	rewrite := func(s string) string {
		for _, m := range mounts {
			if i := strings.Index(s, m.containerPath); i == 0 || (i > 0 && s[i-1] == '=') {
				rest := s[i+len(m.containerPath):]
				if rest == "" || rest[0] == '/' {
					return s[:i] + m.hostPath + rest
				}
			}
		}
		return s
	}
	for i := 1; i < len(argv); i++ {
		argv[i] = rewrite(argv[i])
	}

	for _, name := range hostEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	// The broker reaches the apiserver with the dev kubeconfig instead of in-cluster config.
	env = append(env, "KUBECONFIG="+cfg.KubeconfigPath())
	// A real pod has its own network namespace, so binding every interface binds its pod IP
	// only. Here all pods share one network: the broker binds its pod IP (its --bind-address
	// flag reads this variable as its default), so every broker can use the same port.
	env = append(env, "PADDOCK_BIND_ADDRESS="+w.podIP)
	if len(c.EnvFrom) > 0 {
		return nil, nil, fmt.Errorf("container %s: envFrom is not supported by paddock dev", c.Name)
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, nil, fmt.Errorf("container %s env %s: only fieldRef sources are supported by paddock dev", c.Name, e.Name)
			}
			if value, err = w.fieldRef(e.ValueFrom.FieldRef.FieldPath); err != nil {
				return nil, nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+rewrite(value))
	}
	return argv, env, nil
}

// fieldRef resolves a downward API field of the pod.
func (w *podWorker) fieldRef(path string) (string, error) {
	pod := w.pod
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return w.podIP, nil
	case "status.hostIP":
		return w.node.ips.nodeIP(), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// mounts maps each of the container's volume mounts to a local directory, creating it:
// an emptyDir lives under the pod's directory and goes with the pod; a persistent claim is
// the directory of the PersistentVolume it is bound to (the dev provisioner gives every claim
// one shared directory, standing in for a ReadWriteMany volume); a hostPath is itself.
// Longest container paths come first so nested mounts win.
func (w *podWorker) mounts(ctx context.Context, c corev1.Container) ([]mount, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range w.pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var out []mount
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s names no volume", vm.Name)
		}
		var dir string
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(w.node.rt.cfg.podDir(w.pod.UID), v.Name)
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			pvc, err := w.node.rt.client.CoreV1().PersistentVolumeClaims(w.pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get claim %s: %w", claim, err)
			}
			if pvc.Spec.VolumeName == "" {
				return nil, fmt.Errorf("claim %s is not bound", claim)
			}
			pv, err := w.node.rt.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get volume %s: %w", pvc.Spec.VolumeName, err)
			}
			if pv.Spec.HostPath == nil {
				return nil, fmt.Errorf("volume %s is not a local directory", pv.Name)
			}
			dir = pv.Spec.HostPath.Path
		case v.HostPath != nil:
			dir = v.HostPath.Path
		default:
			return nil, fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim and hostPath volumes are supported by paddock dev", v.Name)
		}
		dir = filepath.Join(dir, vm.SubPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create volume directory: %w", err)
		}
		out = append(out, mount{containerPath: filepath.Clean(vm.MountPath), hostPath: dir})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].containerPath) > len(out[j].containerPath) })
	return out, nil
}
