package devcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// imageEntrypoint is the paddock image's ENTRYPOINT: a container without a command, or with
// this one, runs its image's entrypoint, and the only image the node agent can run is the
// operator's own (the image of the installed manager Deployment, which the manager also gives
// the brokers), mapped to the local paddock binary.
const imageEntrypoint = "/paddock"

// hostEnv are the variables of paddock dev's own environment a container process inherits;
// everything else comes from the pod spec, as in a container.
var hostEnv = []string{"PATH", "HOME", "TMPDIR", "LANG", "GOCOVERDIR"}

// anyInterfaceFlag matches a `--…address=:port` flag (also 0.0.0.0 or [::]): every interface
// of the pod's own network in a cluster. Here pods share one network, so such a flag is
// narrowed to the pod IP (the manager's --health-probe-bind-address=:8081 would otherwise
// take port 8081 from every other pod).
var anyInterfaceFlag = regexp.MustCompile(`^(--?[A-Za-z0-9-]*(?:address|addr)=)(?:|0\.0\.0\.0|\[::\])(:[0-9]+)$`)

// mount maps a container path to the local directory that stands in for it.
type mount struct{ containerPath, hostPath string }

// command builds the argv, environment and sandbox of a container's process. Volume mounts
// under /var/run are real mounts in the process's sandbox (sandbox.go). The others are local
// directories, so every argument and env value that names a path under one is rewritten to
// the directory standing in for it (e.g. --data-dir=/var/lib/paddock becomes
// --data-dir=.paddock/dev/data/claims/<ns>/<claim>).
func (w *podWorker) command(ctx context.Context, c corev1.Container) (argv, env []string, sandbox *podSandbox, err error) {
	rt := w.node.rt
	switch {
	case len(c.Command) == 0, c.Command[0] == imageEntrypoint:
		bin, ok := rt.images[c.Image]
		if !ok {
			return nil, nil, nil, fmt.Errorf("container %s: paddock dev cannot run image %q: it runs the operator's image (%s) as the local paddock binary, and containers that name their own command", c.Name, c.Image, strings.Join(slices.Sorted(maps.Keys(rt.images)), ", "))
		}
		argv = []string{bin}
		if len(c.Command) > 0 {
			argv = append(argv, c.Command[1:]...)
		}
	default:
		argv = append(argv, c.Command...)
	}
	argv = append(argv, c.Args...)

	mounts, runMounts, err := w.mounts(ctx, c)
	if err != nil {
		return nil, nil, nil, err
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
		argv[i] = anyInterfaceFlag.ReplaceAllString(rewrite(argv[i]), "${1}"+w.podIP+"${2}")
	}

	for _, name := range hostEnv {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	// What the kubelet gives every container so client-go's in-cluster config finds the
	// apiserver. There is no kube-proxy to route the kubernetes Service's ClusterIP, so
	// these name the apiserver's advertised address.
	env = append(env,
		"KUBERNETES_SERVICE_HOST="+apiServerAdvertiseAddress,
		"KUBERNETES_SERVICE_PORT="+strconv.Itoa(rt.cfg.APIServerPort))
	// A real pod has its own network namespace, so binding every interface binds its pod IP
	// only. Here all pods share one network: the broker binds its pod IP (its --bind-address
	// flag reads this variable as its default), so every broker can use the same port.
	env = append(env, "PADDOCK_BIND_ADDRESS="+w.podIP)
	if len(c.EnvFrom) > 0 {
		return nil, nil, nil, fmt.Errorf("container %s: envFrom is not supported by paddock dev", c.Name)
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, nil, nil, fmt.Errorf("container %s env %s: only fieldRef sources are supported by paddock dev", c.Name, e.Name)
			}
			if value, err = w.fieldRef(e.ValueFrom.FieldRef.FieldPath); err != nil {
				return nil, nil, nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+rewrite(value))
	}
	sandbox = &podSandbox{
		runMounts: runMounts,
		masked:    []string{filepath.Join(rt.cfg.Dir, "pki"), rt.cfg.KubeconfigPath()},
	}
	return argv, env, sandbox, nil
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
// one shared directory, standing in for a ReadWriteMany volume); a hostPath is itself; a
// projected volume is written by the node agent (projected.go). Mounts under /var/run are
// returned as runMounts, the real mounts of the container's sandbox; the others as mounts
// for path rewriting, longest container paths first so nested mounts win. A projected
// volume holds credentials and must be mounted under /var/run (where a ServiceAccount
// volume always is).
func (w *podWorker) mounts(ctx context.Context, c corev1.Container) ([]mount, []runMount, error) {
	volumes := map[string]corev1.Volume{}
	for _, v := range w.pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	var out []mount
	var real []runMount
	for _, vm := range c.VolumeMounts {
		v, ok := volumes[vm.Name]
		if !ok {
			return nil, nil, fmt.Errorf("volume mount %s names no volume", vm.Name)
		}
		_, underRun := runRelative(vm.MountPath)
		var dir string
		switch {
		case v.EmptyDir != nil:
			dir = filepath.Join(w.node.rt.cfg.podDir(w.pod.UID), v.Name)
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			pvc, err := w.node.rt.client.CoreV1().PersistentVolumeClaims(w.pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("get claim %s: %w", claim, err)
			}
			if pvc.Spec.VolumeName == "" {
				return nil, nil, fmt.Errorf("claim %s is not bound", claim)
			}
			pv, err := w.node.rt.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("get volume %s: %w", pvc.Spec.VolumeName, err)
			}
			if pv.Spec.HostPath == nil {
				return nil, nil, fmt.Errorf("volume %s is not a local directory", pv.Name)
			}
			dir = pv.Spec.HostPath.Path
		case v.HostPath != nil:
			dir = v.HostPath.Path
		case v.Projected != nil:
			if !underRun {
				return nil, nil, fmt.Errorf("volume mount %s: paddock dev mounts projected volumes only under /var/run, not at %s", vm.Name, vm.MountPath)
			}
			pv, err := w.projected(ctx, v)
			if err != nil {
				return nil, nil, err
			}
			dir = pv.dir
		default:
			return nil, nil, fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim, hostPath and projected volumes are supported by paddock dev", v.Name)
		}
		dir = filepath.Join(dir, vm.SubPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("create volume directory: %w", err)
		}
		if underRun {
			real = append(real, runMount{path: vm.MountPath, hostPath: dir, readOnly: vm.ReadOnly})
			continue
		}
		out = append(out, mount{containerPath: filepath.Clean(vm.MountPath), hostPath: dir})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].containerPath) > len(out[j].containerPath) })
	// Parents before children, so a nested mount lands on top of its parent's.
	sort.Slice(real, func(i, j int) bool {
		a, _ := runRelative(real[i].path)
		b, _ := runRelative(real[j].path)
		return len(a) < len(b)
	})
	return out, real, nil
}
