// Package clusterscope holds only the RBAC markers of the manager's cluster-scoped
// permissions: `make manifests` turns them into the ClusterRole of
// config/rbac/cluster_role.yaml, which every installation binds cluster-wide, whichever
// namespaces the manager watches (controllers/rbac.go has the namespaced ones). It has no
// code and must never get any.
//
// Nodes are cluster-scoped, so a broker Role cannot grant reading them; brokers whose
// listeners advertise their node's address get the shared ClusterRole
// paddock-broker-node-reader (nodes: get, list, watch) through a ClusterRoleBinding per
// cluster. The manager reads Nodes itself — the recovery reconciler watches their readiness —
// which is what lets it create that role and bind it; create cannot be limited by name, the
// role's other verbs are. The bindings carry cluster labels and are watched like the other
// children. The recovery reconciler reads, only for a broker pod the scheduler cannot place,
// the claim's PersistentVolume and StorageClass; the KafkaCluster reconciler reads the data
// claim's StorageClass (may the claim be expanded?).
//
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;update;patch,resourceNames=paddock-broker-node-reader
package clusterscope
