package recovery

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// clearZombieClaims looks at every broker pod the scheduler cannot place, reports one stuck on
// its volumes' node affinity, and deletes its zombie claims and then the pod (DecideClaims),
// so its controller recreates both where the pod can run — one recovery per cluster at a
// time, like pod deletions.
func (r *Reconciler) clearZombieClaims(ctx context.Context, s *scope) error {
	var errs []error
	for _, id := range sortedKeys(s.pods) {
		pod := s.pods[id]
		sched := podScheduled(pod)
		if pod.Status.Phase != corev1.PodPending || pod.Spec.NodeName != "" || sched == nil ||
			sched.Status != corev1.ConditionFalse || sched.Reason != corev1.PodReasonUnschedulable {
			continue
		}
		p := PendingFacts{Broker: id, Pod: pod.Name, Unschedulable: true, Message: sched.Message, AutoRecover: s.base.AutoRecover}
		for _, vol := range pod.Spec.Volumes {
			if vol.PersistentVolumeClaim == nil {
				continue
			}
			c, err := r.claimFacts(ctx, s, vol.PersistentVolumeClaim.ClaimName)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			p.Claims = append(p.Claims, c)
		}
		v := DecideClaims(p)
		if v.Reason == "" {
			continue
		}
		done := false
		if len(v.Delete) > 0 {
			if others := slices.DeleteFunc(slices.Clone(s.base.Recovering), func(o int32) bool { return o == id }); s.acted || len(others) > 0 {
				v.Reason, v.Message = kafkav1alpha1.ReasonRecoveryInProgress, fmt.Sprintf(
					"Broker %d's pod %s is Pending on zombie claims (%v); another broker of the cluster is being recovered first", id, pod.Name, v.Delete)
			} else {
				if err := r.deleteZombie(ctx, pod, v.Delete); err != nil {
					errs = append(errs, err)
					continue
				}
				s.acted, done = true, true
				s.base.Recovering = append(s.base.Recovering, id)
			}
		}
		errs = append(errs, r.report(ctx, s, id, v.Reason, v.Message, done))
	}
	return errors.Join(errs...)
}

// claimFacts reads claim name, its StorageClass and its volume from the API server (the
// cache holds only labelled claims, and no volumes or classes).
func (r *Reconciler) claimFacts(ctx context.Context, s *scope, name string) (ClaimFacts, error) {
	c := ClaimFacts{Name: name, DataClaim: name == kafkav1alpha1.DataClaimName(s.cluster.Name)}
	pvc := &corev1.PersistentVolumeClaim{}
	switch err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.cluster.Namespace, Name: name}, pvc); {
	case apierrors.IsNotFound(err):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("get claim %s: %w", name, err)
	}
	class := ptr.Deref(pvc.Spec.StorageClassName, "")
	if pvc.Spec.VolumeName != "" {
		pv := &corev1.PersistentVolume{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return c, fmt.Errorf("get volume %s of claim %s: %w", pvc.Spec.VolumeName, name, err)
		default:
			if class == "" {
				class = pv.Spec.StorageClassName
			}
			c.AffinityNodes = affinityNodes(pv)
			for _, n := range c.AffinityNodes {
				err := r.Get(ctx, client.ObjectKey{Name: n}, &corev1.Node{})
				switch {
				case apierrors.IsNotFound(err):
					c.MissingNodes = append(c.MissingNodes, n)
				case err != nil:
					return c, fmt.Errorf("get node %s of volume %s: %w", n, pv.Name, err)
				}
			}
		}
	}
	if class != "" {
		sc := &storagev1.StorageClass{}
		switch err := r.APIReader.Get(ctx, client.ObjectKey{Name: class}, sc); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return c, fmt.Errorf("get storageclass %s of claim %s: %w", class, name, err)
		default:
			c.Provisioner = sc.Provisioner
		}
	}
	return c, nil
}

// affinityNodes are the hostnames a volume's required node affinity allows.
func affinityNodes(pv *corev1.PersistentVolume) []string {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil
	}
	var out []string
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		for _, e := range term.MatchExpressions {
			if e.Key == corev1.LabelHostname && e.Operator == corev1.NodeSelectorOpIn {
				out = append(out, e.Values...)
			}
		}
	}
	return out
}

// deleteZombie deletes the zombie claims, then the Pending pod that holds them (a claim in use
// is kept by its protection finalizer until its pod is gone), so the controller recreates the
// pod and its claims wherever the pod can run. The pod never ran: deleting it loses nothing.
func (r *Reconciler) deleteZombie(ctx context.Context, pod *corev1.Pod, claims []string) error {
	for _, name := range claims {
		pvc := &corev1.PersistentVolumeClaim{}
		pvc.Namespace, pvc.Name = pod.Namespace, name
		if err := r.Delete(ctx, pvc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete zombie claim %s: %w", name, err)
		}
	}
	if err := r.Delete(ctx, pod, client.Preconditions{UID: ptr.To(pod.UID)}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete pod %s stuck on zombie claims: %w", pod.Name, err)
	}
	log.FromContext(ctx).Info("Deleted zombie claims and the pod they held", "pod", pod.Name, "claims", claims)
	return nil
}

func podScheduled(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}
