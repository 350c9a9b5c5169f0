package devcluster

import (
	"context"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// provisionedLabel marks the PersistentVolumes the dev provisioner created.
const provisionedLabel = "paddock.dev/dev-provisioned"

// provision is the environment's volume provisioner: every pending claim gets a hostPath
// PersistentVolume, pre-bound to it, whose directory is .paddock/dev/data/claims/<ns>/<claim>
// (the real PersistentVolume binder then binds the pair, and the scheduler places the pods).
// Every node agent runs on this machine, so one directory is a true ReadWriteMany volume.
// Volumes whose claim is gone are deleted (their data directory stays until the next clean
// start).
func provision(ctx context.Context, rt *podRuntime) {
	logger := log.FromContext(ctx).WithName("provisioner")
	for {
		if err := provisionOnce(ctx, rt); err != nil && ctx.Err() == nil {
			logger.Error(err, "Provision volumes")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func provisionOnce(ctx context.Context, rt *podRuntime) error {
	core := rt.client.CoreV1()
	claims, err := core.PersistentVolumeClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, pvc := range claims.Items {
		if pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil {
			continue
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pvc-" + string(pvc.UID), Labels: map[string]string{provisionedLabel: "true"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              ptrValue(pvc.Spec.StorageClassName),
				VolumeMode:                    pvc.Spec.VolumeMode,
				ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
					Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: filepath.Join(rt.cfg.dataDir(), "claims", pvc.Namespace, pvc.Name),
				}},
			},
		}
		if _, err := core.PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	volumes, err := core.PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: provisionedLabel + "=true"})
	if err != nil {
		return err
	}
	for _, pv := range volumes.Items {
		if pv.Status.Phase == corev1.VolumeReleased || pv.Status.Phase == corev1.VolumeFailed {
			if err := core.PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
