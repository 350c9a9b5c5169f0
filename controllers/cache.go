package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// CacheByObject scopes the manager's informers to objects that belong to a KafkaCluster (they
// carry the kafka.paddock.dev/cluster label) for every kind the reconcilers watch that is
// not paddock's own. Without it the manager would cache every Lease (each Node renews one),
// every EndpointSlice and every Service, StatefulSet, claim, NetworkPolicy and RBAC object in
// the cluster.
//
// EndpointSlices carry the label because the EndpointSlice controller copies the headless
// Service's labels onto its slices; heartbeat Leases carry it by contract. The manager and
// `paddock dev` both use it; envtest specs that hand-write objects without the label run
// their own managers without it.
func CacheByObject() map[client.Object]cache.ByObject {
	belongs, err := labels.NewRequirement(kafkav1alpha1.LabelCluster, selection.Exists, nil)
	if err != nil {
		panic(err) // a constant label key: cannot fail
	}
	ours := cache.ByObject{Label: labels.NewSelector().Add(*belongs)}
	return map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}:         ours,
		&discoveryv1.EndpointSlice{}:    ours,
		&appsv1.StatefulSet{}:           ours,
		&corev1.Service{}:               ours,
		&corev1.Pod{}:                   ours,
		&corev1.Secret{}:                ours,
		&corev1.ServiceAccount{}:        ours,
		&corev1.PersistentVolumeClaim{}: ours,
		&rbacv1.Role{}:                  ours,
		&rbacv1.RoleBinding{}:           ours,
		&rbacv1.ClusterRoleBinding{}:    ours,
		&policyv1.PodDisruptionBudget{}: ours,
		&networkingv1.NetworkPolicy{}:   ours,
		&batchv1.Job{}:                  ours,
	}
}
