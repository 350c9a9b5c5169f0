package controllers

// The manager's permissions on the objects of the namespaces it watches, in one place so a
// reviewer can check them against what the reconcilers do. `make manifests` turns these
// markers into the ClusterRole of config/rbac/role.yaml, which the installation binds once
// for every namespace (a ClusterRoleBinding) or, for a manager started with --namespace, in
// each watched namespace (a RoleBinding each: `make build-installer NAMESPACES=a,b`; OLM's
// OwnNamespace and SingleNamespace modes do the same with the bundle's permissions). What is
// cluster-scoped (Nodes, PersistentVolumes, StorageClasses, the node-reader ClusterRole and
// its ClusterRoleBindings) is in controllers/clusterscope, config/rbac/cluster_role.yaml,
// always bound cluster-wide (docs/security.md, "Least privilege").
//
// The manager must hold every permission it grants in the per-cluster broker Role (Kubernetes
// refuses to let it escalate), which is why it can read and write Leases and KafkaTopics.
// It may update kafkaclusters/finalizers so it can set blockOwnerDeletion on the owner
// references of a cluster's children where the OwnerReferencesPermissionEnforcement admission
// plugin is on.
//
// The recovery reconciler (docs/recovery.md) deletes broker pods — force-deleting the pod of
// a broker whose node is lost — and zombie claims (persistentvolumeclaims delete, above).
// The KafkaCluster reconciler lists a Pending data claim's Events (why is it Pending?), and
// runs the storage check as a Job (create, and delete to run it again when the storage
// changed; docs/storage.md, "The storage check"), whose pods' termination messages it reads.
//
// The certificates reconciler (docs/security.md) writes a TLS cluster's CA and broker
// certificate Secrets, and reads a user-supplied CA's Secret (which it never writes); the
// KafkaUser reconciler writes each user's Secret and the cluster's salted-credentials Secret.
// Brokers read their own certificate Secrets and the salted credentials through the broker
// Role, which names those Secrets.
//
// A cluster with spec.monitoring.podMonitor enabled gets a Prometheus Operator PodMonitor
// (applied, read and deleted through the API server, never watched: the kind may not exist).

// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters;brokers;kafkatopics;kafkausers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters/status;brokers/status;kafkatopics/status;kafkausers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=kafka.paddock.dev,resources=kafkaclusters/finalizers;kafkausers/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;serviceaccounts;persistentvolumeclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch;list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=monitoring.coreos.com,resources=podmonitors,verbs=get;create;patch;delete
