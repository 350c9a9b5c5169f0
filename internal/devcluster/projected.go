package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// Projected volumes are how a pod gets its ServiceAccount identity: the ServiceAccount
// admission plugin adds one (kube-api-access-*) holding a serviceAccountToken, the
// kube-root-ca.crt ConfigMap's ca.crt and the namespace from the downward API. The node agent
// fills it as the kubelet does: the token comes from the TokenRequest API
// (serviceaccounts/token), bound to the pod (it dies with the pod's UID), and is replaced
// before it expires. The files live under the pki directory, which every pod's sandbox hides,
// and are bind-mounted into the container's /run (sandbox.go).

// Token lifetimes, as the kubelet's token manager has them.
const (
	// defaultTokenSeconds is a serviceAccountToken source's lifetime when it names none.
	defaultTokenSeconds = 3600
	// tokenRefreshFraction of a token's lifetime passes before it is replaced.
	tokenRefreshFraction = 0.8
	// tokenMaxAge is the longest a token is kept, whatever its lifetime.
	tokenMaxAge = 24 * time.Hour
	// projectedRetry is how soon a failed refresh is tried again; the old token is kept.
	projectedRetry = 5 * time.Second
)

// tokenRefreshAt is when a token issued at issued and expiring at expires is replaced: after
// 80% of its lifetime, and at the latest a day after it was issued.
func tokenRefreshAt(issued, expires time.Time) time.Time {
	life := expires.Sub(issued)
	if life <= 0 {
		return issued
	}
	return issued.Add(min(time.Duration(float64(life)*tokenRefreshFraction), tokenMaxAge))
}

// projectedVolume is one of a pod's projected volumes. Owned by the pod worker's goroutine.
type projectedVolume struct {
	volume    corev1.Volume
	dir       string
	refreshAt time.Time // zero when nothing in it expires
}

// projectedFile is one file of a projected volume.
type projectedFile struct {
	data []byte
	mode os.FileMode
}

func (w *podWorker) projectedDir(volume string) string {
	return filepath.Join(w.node.rt.cfg.Dir, "pki", "pods", string(w.pod.UID), volume)
}

// projected returns the pod's projected volume v, writing it on first use.
func (w *podWorker) projected(ctx context.Context, v corev1.Volume) (*projectedVolume, error) {
	if pv, ok := w.projectedVolumes[v.Name]; ok {
		return pv, nil
	}
	pv := &projectedVolume{volume: v, dir: w.projectedDir(v.Name)}
	if err := w.writeProjected(ctx, pv); err != nil {
		return nil, err
	}
	w.projectedVolumes[v.Name] = pv
	return pv, nil
}

// refreshProjected rewrites every projected volume whose token is due. A failed refresh
// keeps the old files (the token is still valid until it expires) and is retried soon.
func (w *podWorker) refreshProjected(ctx context.Context, now time.Time) {
	for _, pv := range w.projectedVolumes {
		if pv.refreshAt.IsZero() || now.Before(pv.refreshAt) {
			continue
		}
		if err := w.writeProjected(ctx, pv); err != nil {
			if ctx.Err() == nil {
				log.FromContext(ctx).Error(err, "Refresh projected volume", "volume", pv.volume.Name)
			}
			pv.refreshAt = now.Add(projectedRetry)
		}
	}
}

// writeProjected gathers every file of pv from its sources and writes them, each replaced
// atomically so a reader never sees half a token.
func (w *podWorker) writeProjected(ctx context.Context, pv *projectedVolume) error {
	src := pv.volume.Projected
	defaultMode := os.FileMode(ptr.Deref(src.DefaultMode, 0o644))
	files := map[string]projectedFile{}
	var refreshAt time.Time
	add := func(path string, data []byte, mode *int32) error {
		if path == "" || filepath.IsAbs(path) || strings.HasPrefix(filepath.Clean(path), "..") {
			return fmt.Errorf("volume %s: file path %q must be relative and stay inside the volume", pv.volume.Name, path)
		}
		m := defaultMode
		if mode != nil {
			m = os.FileMode(*mode)
		}
		files[filepath.Clean(path)] = projectedFile{data: data, mode: m}
		return nil
	}
	for _, s := range src.Sources {
		switch {
		case s.ServiceAccountToken != nil:
			token, expires, err := w.requestToken(ctx, s.ServiceAccountToken)
			if err != nil {
				return fmt.Errorf("volume %s: %w", pv.volume.Name, err)
			}
			if err := add(s.ServiceAccountToken.Path, []byte(token), nil); err != nil {
				return err
			}
			at := tokenRefreshAt(time.Now(), expires)
			if every := w.node.rt.cfg.tokenRefreshEvery; every > 0 {
				at = time.Now().Add(every)
			}
			if refreshAt.IsZero() || at.Before(refreshAt) {
				refreshAt = at
			}
		case s.ConfigMap != nil:
			if err := w.projectConfigMap(ctx, s.ConfigMap, add); err != nil {
				return fmt.Errorf("volume %s: %w", pv.volume.Name, err)
			}
		case s.DownwardAPI != nil:
			for _, item := range s.DownwardAPI.Items {
				if item.FieldRef == nil {
					return fmt.Errorf("volume %s: only fieldRef downward API items are supported by paddock dev", pv.volume.Name)
				}
				value, err := w.fieldRef(item.FieldRef.FieldPath)
				if err != nil {
					return fmt.Errorf("volume %s: %w", pv.volume.Name, err)
				}
				if err := add(item.Path, []byte(value), item.Mode); err != nil {
					return err
				}
			}
		default:
			return fmt.Errorf("volume %s: only serviceAccountToken, configMap and downwardAPI projections are supported by paddock dev", pv.volume.Name)
		}
	}
	if err := writeFilesAtomically(pv.dir, files); err != nil {
		return fmt.Errorf("volume %s: %w", pv.volume.Name, err)
	}
	pv.refreshAt = refreshAt
	return nil
}

// requestToken asks the TokenRequest API for a token of the pod's ServiceAccount, bound to
// the pod, and returns it with its expiry.
func (w *podWorker) requestToken(ctx context.Context, src *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	sa := w.pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(ptr.Deref(src.ExpirationSeconds, defaultTokenSeconds)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: w.pod.Name, UID: w.pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	resp, err := w.node.rt.client.CoreV1().ServiceAccounts(w.pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", time.Time{}, fmt.Errorf("request a token for ServiceAccount %s/%s: %w", w.pod.Namespace, sa, err)
	}
	return resp.Status.Token, resp.Status.ExpirationTimestamp.Time, nil
}

// projectConfigMap adds the ConfigMap's keys (all, or the listed items) to the volume.
func (w *podWorker) projectConfigMap(ctx context.Context, src *corev1.ConfigMapProjection, add func(string, []byte, *int32) error) error {
	cm, err := w.node.rt.client.CoreV1().ConfigMaps(w.pod.Namespace).Get(ctx, src.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && ptr.Deref(src.Optional, false) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get ConfigMap %s: %w", src.Name, err)
	}
	value := func(key string) ([]byte, bool) {
		if v, ok := cm.Data[key]; ok {
			return []byte(v), true
		}
		v, ok := cm.BinaryData[key]
		return v, ok
	}
	if len(src.Items) == 0 {
		keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
		for k := range cm.Data {
			keys = append(keys, k)
		}
		for k := range cm.BinaryData {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v, _ := value(k)
			if err := add(k, v, nil); err != nil {
				return err
			}
		}
		return nil
	}
	for _, item := range src.Items {
		v, ok := value(item.Key)
		if !ok {
			if ptr.Deref(src.Optional, false) {
				continue
			}
			return fmt.Errorf("ConfigMap %s has no key %s", src.Name, item.Key)
		}
		if err := add(item.Path, v, item.Mode); err != nil {
			return err
		}
	}
	return nil
}

// writeFilesAtomically writes each file into dir through a temporary file and a rename.
func writeFilesAtomically(dir string, files map[string]projectedFile) error {
	for path, f := range files {
		target := filepath.Join(dir, path)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(target), err)
		}
		tmp, err := os.CreateTemp(filepath.Dir(target), ".tmp-"+filepath.Base(target)+"-")
		if err != nil {
			return fmt.Errorf("write %s: %w", target, err)
		}
		_, err = tmp.Write(f.data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Chmod(tmp.Name(), f.mode)
		}
		if err == nil {
			err = os.Rename(tmp.Name(), target)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("write %s: %w", target, err)
		}
	}
	return nil
}
