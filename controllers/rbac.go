package controllers

// The manager's permissions, in one place so a reviewer can check them against what the
// reconcilers do. `make manifests` turns these markers into config/rbac/role.yaml.
//
// The manager must hold every permission it grants in the per-cluster broker Role (Kubernetes
// refuses to let it escalate), which is why it can read and write Leases and KafkaTopics.
// It may update kafkaclusters/finalizers so it can set blockOwnerDeletion on the owner
// references of a cluster's children where the OwnerReferencesPermissionEnforcement admission
// plugin is on.
//
// Nodes are cluster-scoped, so a broker Role cannot grant reading them; brokers whose
// listeners advertise their node's address get the shared ClusterRole
// paddock-broker-node-reader (nodes: get, list, watch) through a ClusterRoleBinding per
// cluster. The manager reads Nodes itself, which is what lets it create that role and bind
// it; create cannot be limited by name, the role's other verbs are. The bindings carry
// cluster labels and are watched like the other children.
//
// The recovery reconciler (docs/recovery.md) deletes broker pods — force-deleting the pod of
// a broker whose node is lost — and zombie claims (persistentvolumeclaims delete, above), and
// reads, only for a broker pod the scheduler cannot place, the claim's volume and
// StorageClass.
//
// The certificates reconciler (docs/security.md) writes a TLS cluster's CA and broker
// certificate Secrets, and reads a user-supplied CA's Secret (which it never writes); the
// KafkaUser reconciler writes each user's Secret and the cluster's salted-credentials Secret.
// Brokers read their own certificate Secrets and the salted credentials through the broker
// Role, which names those Secrets.

// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters;brokers;kafkatopics;kafkausers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters/status;brokers/status;kafkatopics/status;kafkausers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters/finalizers;kafkausers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterrolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;update;patch,resourceNames=paddock-broker-node-reader
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
