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
	if argv, err = w.argv(c); err != nil {
		return nil, nil, nil, err
	}
	mounts, runMounts, err := w.mounts(ctx, c)
	if err != nil {
		return nil, nil, nil, err
	}
	rewrite := func(s string) string { return rewriteMountPath(mounts, s) }
	for i := 1; i < len(argv); i++ {
		argv[i] = anyInterfaceFlag.ReplaceAllString(rewrite(argv[i]), "${1}"+w.podIP+"${2}")
	}
	if env, err = w.env(c, rewrite); err != nil {
		return nil, nil, nil, err
	}
	resolv, err := w.writeResolvConf()
	if err != nil {
		return nil, nil, nil, err
	}
	rt := w.node.rt
	sandbox = &podSandbox{
		runMounts:  runMounts,
		masked:     []string{filepath.Join(rt.cfg.Dir, "pki"), rt.cfg.KubeconfigPath()},
		resolvConf: resolv,
	}
	return argv, env, sandbox, nil
}

// argv is the container's command and arguments: its own command, or its image's
// entrypoint — the operator's image, run as the local paddock binary.
func (w *podWorker) argv(c corev1.Container) ([]string, error) {
	var argv []string
	images := w.node.rt.images
	switch {
	case len(c.Command) == 0, c.Command[0] == imageEntrypoint:
		bin, ok := images[c.Image]
		if !ok {
			return nil, fmt.Errorf("container %s: paddock dev cannot run image %q: it runs the operator's image (%s) as the local paddock binary, and containers that name their own command", c.Name, c.Image, strings.Join(slices.Sorted(maps.Keys(images)), ", "))
		}
		argv = []string{bin}
		if len(c.Command) > 0 {
			argv = append(argv, c.Command[1:]...)
		}
	default:
		argv = append(argv, c.Command...)
	}
	return append(argv, c.Args...), nil
}

// rewriteMountPath replaces a container path under one of mounts at the start of s, or right
// after an '=' (a flag's value), by the local directory standing in for it.
func rewriteMountPath(mounts []mount, s string) string {
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

// env is the container process's environment: a few of paddock dev's own variables, what
// a kubelet gives every container, and the container's env with its fieldRefs resolved.
func (w *podWorker) env(c corev1.Container, rewrite func(string) string) ([]string, error) {
	var env []string
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
		"KUBERNETES_SERVICE_PORT="+strconv.Itoa(w.node.rt.cfg.APIServerPort))
	// A real pod has its own network namespace, so binding every interface binds its pod IP
	// only. Here all pods share one network: the broker binds its pod IP (its --bind-address
	// flag reads this variable as its default), so every broker can use the same port.
	env = append(env, "PADDOCK_BIND_ADDRESS="+w.podIP)
	// The fault plan paddock dev can switch at run time (Env.SetStorageFaults): a broker reads
	// it; nothing else looks at the variable.
	env = append(env, "PADDOCK_DEV_STORAGE_FAULTS="+w.node.rt.cfg.StorageFaultsFile(w.pod.Namespace, w.pod.Name))
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom is not supported by paddock dev", c.Name)
	}
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, fmt.Errorf("container %s env %s: only fieldRef sources are supported by paddock dev", c.Name, e.Name)
			}
			var err error
			if value, err = w.fieldRef(e.ValueFrom.FieldRef.FieldPath); err != nil {
				return nil, fmt.Errorf("container %s env %s: %w", c.Name, e.Name, err)
			}
		}
		env = append(env, e.Name+"="+rewrite(value))
	}
	return env, nil
}

// writeResolvConf writes the pod's resolv.conf (podResolvConf) into the pod's directory,
// which goes with the pod, and returns its path.
func (w *podWorker) writeResolvConf() (string, error) {
	path := filepath.Join(w.node.rt.cfg.podDir(w.pod.UID), "resolv.conf")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("create the pod's directory: %w", err)
	}
	if err := os.WriteFile(path, podResolvConf(w.pod, nodeResolver).render(), 0o644); err != nil {
		return "", fmt.Errorf("write the pod's resolv.conf: %w", err)
	}
	return path, nil
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
		dir, err := w.volumeDir(ctx, v, vm, underRun)
		if err != nil {
			return nil, nil, err
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
	if path := c.TerminationMessagePath; path != "" {
		// The kubelet mounts a file of its own at the termination message path; here it is
		// a file of the pod's directory, and arguments naming the path are rewritten to it.
		file := w.terminationMessageFile(c.Name)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			return nil, nil, fmt.Errorf("create the termination message directory: %w", err)
		}
		out = append(out, mount{containerPath: filepath.Clean(path), hostPath: file})
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

// terminationMessageFile is the local file standing in for container's terminationMessagePath.
func (w *podWorker) terminationMessageFile(container string) string {
	return filepath.Join(w.node.rt.cfg.podDir(w.pod.UID), "termination", container)
}

// maxTerminationMessage is what the kubelet keeps of a termination message: 4096 bytes.
const maxTerminationMessage = 4096

// terminationMessage is what the kubelet reports as the exited container c's message: the
// file at its terminationMessagePath, or, when that is empty and the container failed under
// FallbackToLogsOnError, the tail of its log (the last 80 lines, at most 4096 bytes).
func (w *podWorker) terminationMessage(c corev1.Container, exitCode int) string {
	if c.TerminationMessagePath == "" {
		return ""
	}
	if b, err := os.ReadFile(w.terminationMessageFile(c.Name)); err == nil && len(b) > 0 {
		return string(b[:min(len(b), maxTerminationMessage)])
	}
	if exitCode == 0 || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(w.node.rt.cfg.Dir, "logs", "pods", containerLogName(w.pod.Namespace, w.pod.Name, c.Name)+".log"))
	if err != nil {
		return ""
	}
	return logTail(b, 80, maxTerminationMessage)
}

// logTail is the last lines of b, at most limit bytes of them.
func logTail(b []byte, lines, limit int) string {
	s := strings.TrimRight(string(b), "\n")
	parts := strings.Split(s, "\n")
	s = strings.Join(parts[max(0, len(parts)-lines):], "\n")
	if len(s) > limit {
		s = s[len(s)-limit:]
	}
	return s
}

// volumeDir is the local directory that stands in for volume v (mounted by vm).
func (w *podWorker) volumeDir(ctx context.Context, v corev1.Volume, vm corev1.VolumeMount, underRun bool) (string, error) {
	switch {
	case v.EmptyDir != nil:
		return filepath.Join(w.node.rt.cfg.podDir(w.pod.UID), v.Name), nil
	case v.PersistentVolumeClaim != nil:
		return w.claimDir(ctx, v.PersistentVolumeClaim.ClaimName)
	case v.HostPath != nil:
		return v.HostPath.Path, nil
	case v.Projected != nil:
		if !underRun {
			return "", fmt.Errorf("volume mount %s: paddock dev mounts projected volumes only under /var/run, not at %s", vm.Name, vm.MountPath)
		}
		pv, err := w.projected(ctx, v)
		if err != nil {
			return "", err
		}
		return pv.dir, nil
	}
	return "", fmt.Errorf("volume %s: only emptyDir, persistentVolumeClaim, hostPath and projected volumes are supported by paddock dev", v.Name)
}

// claimDir is the local directory of the PersistentVolume claim is bound to.
func (w *podWorker) claimDir(ctx context.Context, claim string) (string, error) {
	core := w.node.rt.client.CoreV1()
	pvc, err := core.PersistentVolumeClaims(w.pod.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get claim %s: %w", claim, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s is not bound", claim)
	}
	pv, err := core.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get volume %s: %w", pvc.Spec.VolumeName, err)
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("volume %s is not a local directory", pv.Name)
	}
	return pv.Spec.HostPath.Path, nil
}
