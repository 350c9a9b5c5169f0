package kafkacluster

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// The desired* builders turn a KafkaCluster into the children it needs. They are pure: the
// same cluster and options always give the same object, which is what makes server-side
// apply a no-op when nothing changed and what the golden files in testdata/golden pin.
// Every builder sets TypeMeta, because the object is sent as an apply configuration.

// drainMargin is added to spec.drainTimeout to get the pod's
// terminationGracePeriodSeconds: the broker closes its listeners and exits after the drain
// timeout, and the margin leaves room for that plus a last heartbeat before SIGKILL.
const drainMargin = 15 * time.Second

// Probe timings. Readiness is checked often because it is the Fenced/Serving signal clients
// see through Metadata; liveness is slower so a busy broker is not restarted on one slow
// answer; the startup probe allows five minutes for a broker to recover its partitions.
const (
	readinessPeriod    = 2
	readinessFailures  = 2
	livenessPeriod     = 10
	livenessFailures   = 3
	startupPeriod      = 2
	startupFailures    = 150
	probeTimeout       = 2
	brokerUser         = 65532 // the distroless "nonroot" user
	tmpVolumeName      = "tmp"
	antiAffinityWeight = 100
)

// podSelector selects cluster's broker pods. It is the StatefulSet's selector, which
// Kubernetes never lets change, so it must stay this small and stable.
func podSelector(cluster *kafkav1alpha1.KafkaCluster) map[string]string {
	return map[string]string{
		kafkav1alpha1.LabelName:    kafkav1alpha1.LabelNameValue,
		kafkav1alpha1.LabelCluster: cluster.Name,
	}
}

// childMeta is the ObjectMeta of a child: name, cluster's namespace and labels, and a
// controller owner reference so the child is garbage-collected with the cluster.
func childMeta(cluster *kafkav1alpha1.KafkaCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: cluster.Namespace,
		Labels:    kafkav1alpha1.ClusterLabels(cluster.Name),
		OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(cluster, kafkav1alpha1.GroupVersion.WithKind("KafkaCluster")),
		},
	}
}

// desiredServiceAccount is the identity the broker pods run as.
func desiredServiceAccount(cluster *kafkav1alpha1.KafkaCluster) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.StatefulSetName(cluster.Name)),
	}
}

// desiredRole grants the brokers exactly what they need and nothing more: read their own
// KafkaCluster, the Brokers and KafkaTopics; create, update and delete KafkaTopics (the admin
// APIs: CreateTopics and Metadata auto-creation create, CreatePartitions and the AlterConfigs
// APIs update the spec, DeleteTopics deletes, and the broker that removes a deleted topic's
// data updates its finalizers); renew their own heartbeat Leases; and, with a NodePort or
// LoadBalancer listener, read their own per-broker Services (their nodePorts and load-balancer
// ingress, through an informer whose field selector names the Service, which is what lets
// list and watch be limited by name). List and watch cannot be limited by name for an
// informer without a field selector, and create cannot be limited by name at all (the name is
// not known when the request is authorized), so those rules carry none. Nodes are
// cluster-scoped, so no Role can grant them: desiredNodeReaderBinding does, for clusters whose
// brokers need it.
func desiredRole(cluster *kafkav1alpha1.KafkaCluster) *rbacv1.Role {
	perBroker := make([]string, 0, cluster.Spec.Replicas)
	for id := int32(0); id < cluster.Spec.Replicas; id++ {
		perBroker = append(perBroker, kafkav1alpha1.LeaseName(cluster.Name, id))
	}
	group := kafkav1alpha1.GroupVersion.Group
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: []string{"kafkaclusters"}, ResourceNames: []string{cluster.Name}, Verbs: []string{"get"}},
		{APIGroups: []string{group}, Resources: []string{"kafkaclusters"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{group}, Resources: []string{"brokers"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{group}, Resources: []string{"kafkatopics"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: perBroker, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	}
	if kafkav1alpha1.ClusterHasSecurity(cluster) {
		// Each broker reads its certificate Secret and the salted SCRAM credentials through
		// informers whose field selector names the Secret (docs/security.md, "Secrets and
		// who reads them"), and the cluster's KafkaUsers (principals, ACLs, quotas). The CA
		// keys and the users' own Secrets are out of reach. CreateAcls and DeleteAcls write
		// KafkaUsers (create for a principal without one, update with the resourceVersion
		// read; never delete or patch), which the admission policy limits to the cluster's.
		secrets := make([]string, 0, cluster.Spec.Replicas+1)
		for id := int32(0); id < cluster.Spec.Replicas; id++ {
			secrets = append(secrets, kafkav1alpha1.BrokerCertSecretName(cluster.Name, id))
		}
		secrets = append(secrets, kafkav1alpha1.ScramCredentialsSecretName(cluster.Name))
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: secrets, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{"kafkausers"}, Verbs: []string{"get", "list", "watch", "create", "update"}},
		)
	}
	if exposure(cluster) != corev1.ServiceTypeClusterIP {
		// The per-broker Services have the Lease names (BrokerServiceName).
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, ResourceNames: perBroker, Verbs: []string{"get", "list", "watch"}})
	}
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.StatefulSetName(cluster.Name)),
		Rules:      rules,
	}
}

// needsNodeReader reports whether cluster's brokers must read their Node: a listener
// advertises the node's address (v1alpha1.Listener.NeedsNodeAddress).
func needsNodeReader(cluster *kafkav1alpha1.KafkaCluster) bool {
	return slices.ContainsFunc(cluster.Spec.Listeners, kafkav1alpha1.Listener.NeedsNodeAddress)
}

// desiredNodeReaderRole is the one ClusterRole, shared by every cluster, that lets brokers
// read Nodes: get, list and watch, nothing else. Each broker watches only its own Node (a
// field selector on its name), but the node a pod lands on is not known in advance, so the
// rule cannot name it. The operator applies it (it holds these permissions itself, which is
// what lets it grant them) and never deletes it: it grants nothing until a binding names it.
func desiredNodeReaderRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   kafkav1alpha1.NodeReaderClusterRoleName,
			Labels: map[string]string{kafkav1alpha1.LabelName: kafkav1alpha1.LabelNameValue},
		},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}},
	}
}

// desiredNodeReaderBinding binds the node-reader ClusterRole to cluster's broker
// ServiceAccount. It is cluster-scoped, so it cannot be owned by the (namespaced) cluster:
// the cluster carries FinalizerNodeReader while it exists, and the operator deletes it when
// the cluster goes or stops needing it. Its labels name the cluster and its namespace.
func desiredNodeReaderBinding(cluster *kafkav1alpha1.KafkaCluster) *rbacv1.ClusterRoleBinding {
	labels := kafkav1alpha1.ClusterLabels(cluster.Name)
	labels[kafkav1alpha1.LabelNamespace] = cluster.Namespace
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: kafkav1alpha1.NodeReaderBindingName(cluster.Namespace, cluster.Name), Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: kafkav1alpha1.NodeReaderClusterRoleName},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: kafkav1alpha1.StatefulSetName(cluster.Name), Namespace: cluster.Namespace,
		}},
	}
}

// desiredRoleBinding binds the broker Role to the broker ServiceAccount.
func desiredRoleBinding(cluster *kafkav1alpha1.KafkaCluster) *rbacv1.RoleBinding {
	name := kafkav1alpha1.StatefulSetName(cluster.Name)
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: childMeta(cluster, name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: cluster.Namespace}},
	}
}

// servicePorts are the Service ports of listeners, in spec order, each targeting the
// container port of the same name.
func servicePorts(listeners []kafkav1alpha1.Listener) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, 0, len(listeners)+1)
	for _, l := range listeners {
		ports = append(ports, corev1.ServicePort{
			Name: l.Name, Port: l.Port, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString(l.Name),
		})
	}
	return ports
}

// exposure is the Service type of the bootstrap and per-broker Services: the
// type of the first listener that asks for outside access, else ClusterIP. Validation
// refuses a spec that mixes NodePort and LoadBalancer listeners.
func exposure(cluster *kafkav1alpha1.KafkaCluster) corev1.ServiceType {
	if i := slices.IndexFunc(cluster.Spec.Listeners, kafkav1alpha1.Listener.IsExternal); i >= 0 {
		return corev1.ServiceType(cluster.Spec.Listeners[i].Type)
	}
	return corev1.ServiceTypeClusterIP
}

// exposedListeners are the listeners the bootstrap and per-broker Services carry: the
// NodePort or LoadBalancer ones when the cluster has any — an internal listener is never
// given a nodePort or a load balancer — else every listener (ClusterIP Services).
func exposedListeners(cluster *kafkav1alpha1.KafkaCluster) []kafkav1alpha1.Listener {
	if exposure(cluster) == corev1.ServiceTypeClusterIP {
		return cluster.Spec.Listeners
	}
	return slices.DeleteFunc(slices.Clone(cluster.Spec.Listeners), func(l kafkav1alpha1.Listener) bool { return !l.IsExternal() })
}

// internalListeners are the Internal listeners of a cluster that also has external ones:
// they get their own ClusterIP bootstrap Service (desiredInternalBootstrapService). Nil for
// a cluster whose listeners are all Internal (c-bootstrap is theirs) or all external.
func internalListeners(cluster *kafkav1alpha1.KafkaCluster) []kafkav1alpha1.Listener {
	if exposure(cluster) == corev1.ServiceTypeClusterIP {
		return nil
	}
	internal := slices.DeleteFunc(slices.Clone(cluster.Spec.Listeners), kafkav1alpha1.Listener.IsExternal)
	if len(internal) == 0 {
		return nil
	}
	return internal
}

// exposeAs sets the external Service settings of cluster's listeners on svc (a bootstrap or
// per-broker Service of type exposure): the annotations, load-balancer source ranges and
// external traffic policy the listeners give. Every external listener gives the same ones
// (a CRD rule: they share these Services), so the first one's are taken.
func exposeAs(cluster *kafkav1alpha1.KafkaCluster, svc *corev1.Service) {
	svc.Spec.Type = exposure(cluster)
	i := slices.IndexFunc(cluster.Spec.Listeners, kafkav1alpha1.Listener.IsExternal)
	if i < 0 || cluster.Spec.Listeners[i].Service == nil {
		return
	}
	settings := cluster.Spec.Listeners[i].Service
	if len(settings.Annotations) > 0 {
		svc.Annotations = maps.Clone(settings.Annotations)
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		svc.Spec.LoadBalancerSourceRanges = slices.Clone(settings.LoadBalancerSourceRanges)
	}
	svc.Spec.ExternalTrafficPolicy = settings.ExternalTrafficPolicy
}

// desiredHeadlessService is the StatefulSet's governing Service: it gives every pod its DNS
// name, and its EndpointSlices are the registry's registration source. Not-ready addresses
// are published so a fenced broker stays registered (and keeps its DNS name).
func desiredHeadlessService(cluster *kafkav1alpha1.KafkaCluster) *corev1.Service {
	ports := servicePorts(cluster.Spec.Listeners)
	ports = append(ports, corev1.ServicePort{
		Name: kafkav1alpha1.HealthPortName, Port: kafkav1alpha1.HealthPort, Protocol: corev1.ProtocolTCP,
		TargetPort: intstr.FromString(kafkav1alpha1.HealthPortName),
	})
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.HeadlessServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 podSelector(cluster),
			Ports:                    ports,
		},
	}
}

// desiredBootstrapService is where clients make their first connection: it load-balances
// over the ready brokers only, so a first connection never lands on a fenced broker. It
// carries the exposed listeners' ports only (exposedListeners), with their Service settings.
func desiredBootstrapService(cluster *kafkav1alpha1.KafkaCluster) *corev1.Service {
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.BootstrapServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			Selector: podSelector(cluster),
			Ports:    servicePorts(exposedListeners(cluster)),
		},
	}
	exposeAs(cluster, svc)
	return svc
}

// desiredInternalBootstrapService is the ClusterIP bootstrap Service of the Internal
// listeners of a cluster that also has NodePort or LoadBalancer listeners, whose bootstrap
// Service then carries only those. Nil when the cluster needs none.
func desiredInternalBootstrapService(cluster *kafkav1alpha1.KafkaCluster) *corev1.Service {
	internal := internalListeners(cluster)
	if internal == nil {
		return nil
	}
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.InternalBootstrapServiceName(cluster.Name)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: podSelector(cluster),
			Ports:    servicePorts(internal),
		},
	}
}

// desiredBrokerServices are the per-broker Services c-broker-<id>, one per desired broker.
// Each selects its pod by the StatefulSet's pod-name label, so the broker's network target
// follows the pod wherever it is rescheduled. Not-ready addresses are published: the broker
// decides whom it serves, and a client that was told about it must be able to reach it.
// Like the bootstrap Service they carry only the exposed listeners' ports: a broker reads its
// nodePorts and load-balancer ingress from its own one.
func desiredBrokerServices(cluster *kafkav1alpha1.KafkaCluster) []*corev1.Service {
	services := make([]*corev1.Service, 0, cluster.Spec.Replicas)
	for id := int32(0); id < cluster.Spec.Replicas; id++ {
		meta := childMeta(cluster, kafkav1alpha1.BrokerServiceName(cluster.Name, id))
		meta.Labels = kafkav1alpha1.BrokerLabels(cluster.Name, id)
		selector := podSelector(cluster)
		selector[kafkav1alpha1.LabelPodName] = kafkav1alpha1.BrokerPodName(cluster.Name, id)
		svc := &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta,
			Spec: corev1.ServiceSpec{
				PublishNotReadyAddresses: true,
				Selector:                 selector,
				Ports:                    servicePorts(exposedListeners(cluster)),
			},
		}
		exposeAs(cluster, svc)
		services = append(services, svc)
	}
	return services
}

// desiredNetworkPolicy admits connections to cluster's brokers from where its spec says
// (docs/security.md, "The NetworkPolicy"), and refuses the rest: every port from the
// cluster's own brokers; each listener's port from its allowFrom peers — by default every pod
// of every namespace on an Internal listener and any source on an external one; the health
// port from spec.networkPolicy.healthFrom. The health port has no rule of its own otherwise:
// a NetworkPolicy always admits a pod's own node, which is where kubelet probes come from,
// and no selector or CIDR names "the pod's node" more narrowly (a CIDR of node addresses
// would admit every node, and under externalTrafficPolicy Cluster every client a node
// forwards). Nil when spec.networkPolicy.enabled is false.
func desiredNetworkPolicy(cluster *kafkav1alpha1.KafkaCluster) *networkingv1.NetworkPolicy {
	if !cluster.Spec.NetworkPolicyEnabled() {
		return nil
	}
	tcp := corev1.ProtocolTCP
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(p))}}
	}
	rules := []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: podSelector(cluster)}}},
	}}
	for _, l := range cluster.Spec.Listeners {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(l.Port), From: listenerPeers(l)})
	}
	if peers := cluster.Spec.NetworkPolicy.HealthFrom; len(peers) > 0 {
		rules = append(rules, networkingv1.NetworkPolicyIngressRule{Ports: port(kafkav1alpha1.HealthPort), From: slices.Clone(peers)})
	}
	return &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: networkingv1.SchemeGroupVersion.String(), Kind: "NetworkPolicy"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.StatefulSetName(cluster.Name)),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: podSelector(cluster)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     rules,
		},
	}
}

// listenerPeers are who may connect to l: its allowFrom, else every pod of every namespace
// for an Internal listener, else anyone (nil: a rule without peers admits every source).
func listenerPeers(l kafkav1alpha1.Listener) []networkingv1.NetworkPolicyPeer {
	switch {
	case len(l.AllowFrom) > 0:
		return slices.Clone(l.AllowFrom)
	case l.IsExternal():
		return nil
	}
	return []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}
}

// desiredDataClaim is the shared ReadWriteMany claim every broker mounts, so any broker can
// take over any partition. Nil when the cluster's storage is Ephemeral. Unless
// spec.storage.deleteClaim is true it has no owner reference, so the garbage collector leaves
// it, and the data, behind when the cluster is deleted; applying it without one removes the
// reference an earlier apply set (server-side apply drops what its field owner no longer
// asks for), and the other way round. It carries status.clusterID (once there is one) so a
// cluster re-created with the same name adopts it with that id (docs/architecture.md, "The
// data claim").
func desiredDataClaim(cluster *kafkav1alpha1.KafkaCluster) *corev1.PersistentVolumeClaim {
	if cluster.Spec.Storage.Type == kafkav1alpha1.StorageEphemeral {
		return nil
	}
	mode := cluster.Spec.Storage.AccessMode
	if mode == "" {
		mode = corev1.ReadWriteMany
	}
	meta := childMeta(cluster, kafkav1alpha1.DataClaimName(cluster.Name))
	if !cluster.Spec.Storage.DeleteClaim {
		meta.OwnerReferences = nil
	}
	if id := cluster.Status.ClusterID; id != "" {
		meta.Annotations = map[string]string{kafkav1alpha1.AnnotationClusterID: id}
	}
	return &corev1.PersistentVolumeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: meta,
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{mode},
			StorageClassName: cluster.Spec.Storage.StorageClassName,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: cluster.Spec.StorageSize()},
			},
		},
	}
}

// desiredPodDisruptionBudget keeps voluntary evictions (node drains) to one broker at a
// time, so a drain never takes two brokers' work away at once.
func desiredPodDisruptionBudget(cluster *kafkav1alpha1.KafkaCluster) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.SchemeGroupVersion.String(), Kind: "PodDisruptionBudget"},
		ObjectMeta: childMeta(cluster, kafkav1alpha1.StatefulSetName(cluster.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: podSelector(cluster)},
		},
	}
}

// brokerImage is the image the brokers run: the spec's, else the manager's
// default. Empty when neither is set, which validation reports.
func brokerImage(cluster *kafkav1alpha1.KafkaCluster, opts Options) string {
	if cluster.Spec.Image != "" {
		return cluster.Spec.Image
	}
	return opts.DefaultBrokerImage
}

// brokerArgs are the broker container's arguments (docs/architecture.md, "The broker pod").
// Each listener is name:port:how — how is the advertised-host mode of an Internal listener,
// else the listener type, whose address the broker learns from its Service and Node — and
// each template goes in --advertised-host-templates.
func brokerArgs(cluster *kafkav1alpha1.KafkaCluster) []string {
	listeners := make([]string, 0, len(cluster.Spec.Listeners))
	var templates []string
	for _, l := range cluster.Spec.Listeners {
		how := string(l.AdvertisedHost)
		switch {
		case l.Type == kafkav1alpha1.ListenerNodePort || l.Type == kafkav1alpha1.ListenerLoadBalancer:
			how = string(l.Type)
		case how == "":
			how = string(kafkav1alpha1.AdvertisePodDNS)
		}
		listeners = append(listeners, fmt.Sprintf("%s:%d:%s", l.Name, l.Port, how))
		if l.AdvertisedHostTemplate != "" {
			templates = append(templates, l.Name+"="+l.AdvertisedHostTemplate)
		}
	}
	args := []string{
		"broker",
		"--cluster=" + cluster.Name,
		"--listeners=" + strings.Join(listeners, ","),
	}
	if len(templates) > 0 {
		args = append(args, "--advertised-host-templates="+strings.Join(templates, ","))
	}
	if security := listenerSecurity(cluster); security != "" {
		args = append(args, "--listener-security="+security)
	}
	args = append(args,
		fmt.Sprintf("--health-port=%d", kafkav1alpha1.HealthPort),
		"--heartbeat-interval="+cluster.Spec.HeartbeatInterval().String(),
		"--session-timeout="+cluster.Spec.SessionTimeout().String(),
		"--drain-timeout="+cluster.Spec.DrainTimeoutOrDefault().String(),
		"--data-dir="+kafkav1alpha1.DataMountPath,
	)
	// The static keys of spec.config (the resource bounds: docs/bounds.md) are read by the
	// broker at start; a change rolls the brokers. The memory budgets follow the container's
	// memory limit (planMemoryBudgets): those it refuses are left out, and the shares of the
	// limit are given where they are below the table's defaults.
	budgets := planMemoryBudgets(cluster.Spec.Config, brokerResources(cluster))
	args = append(args, kafkaconfig.StaticFlags(withoutKeys(cluster.Spec.Config, budgets.refused))...)
	return append(args, budgets.flags...)
}

// listenerSecurity is the --listener-security value: name=tls, name=<authentication> or
// name=tls+<authentication> for each listener with either, comma-separated; empty when no
// listener has any.
func listenerSecurity(cluster *kafkav1alpha1.KafkaCluster) string {
	var items []string
	for _, l := range cluster.Spec.Listeners {
		var parts []string
		if l.TLS {
			parts = append(parts, "tls")
		}
		if l.Authentication != nil {
			parts = append(parts, string(l.Authentication.Type))
		}
		if len(parts) > 0 {
			items = append(items, l.Name+"="+strings.Join(parts, "+"))
		}
	}
	return strings.Join(items, ",")
}

// gracePeriodSeconds is drainTimeout plus the margin, rounded up to a second.
func gracePeriodSeconds(cluster *kafkav1alpha1.KafkaCluster) int64 {
	return int64(math.Ceil((cluster.Spec.DrainTimeoutOrDefault() + drainMargin).Seconds()))
}

// downwardEnv gives the broker its pod identity (docs/architecture.md, "The broker pod").
func downwardEnv() []corev1.EnvVar {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
		}}
	}
	return []corev1.EnvVar{
		field("POD_NAME", "metadata.name"),
		field("POD_NAMESPACE", "metadata.namespace"),
		field("POD_UID", "metadata.uid"),
		field("POD_IP", "status.podIP"),
		field("NODE_NAME", "spec.nodeName"),
	}
}

// hTTPProbe is a GET of path on the health port.
func hTTPProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString(kafkav1alpha1.HealthPortName), Scheme: corev1.URISchemeHTTP,
		}},
		TimeoutSeconds:   probeTimeout,
		PeriodSeconds:    period,
		SuccessThreshold: 1,
		FailureThreshold: failures,
	}
}

// dataVolume is the broker's data volume: the shared claim, or an emptyDir
// capped at the requested size for Ephemeral storage.
func dataVolume(cluster *kafkav1alpha1.KafkaCluster) corev1.Volume {
	v := corev1.Volume{Name: kafkav1alpha1.DataVolumeName}
	if cluster.Spec.Storage.Type == kafkav1alpha1.StorageEphemeral {
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
		if cluster.Spec.Storage.Size != nil {
			v.EmptyDir.SizeLimit = ptr.To(cluster.Spec.Storage.Size.DeepCopy())
		}
		return v
	}
	v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: kafkav1alpha1.DataClaimName(cluster.Name)}
	return v
}

// desiredStatefulSet runs the brokers. Pods are managed in parallel: brokers need no ordered
// bootstrap (there is no quorum to form), and parallel management lets a scale-up or the
// replacement of several lost pods happen at once; rolling updates still replace one pod at
// a time. The grace period covers the drain, zone spread and one-broker-per-node placement
// are preferences (a cluster with fewer zones or nodes than brokers still runs).
func desiredStatefulSet(cluster *kafkav1alpha1.KafkaCluster, opts Options) *appsv1.StatefulSet {
	name := kafkav1alpha1.StatefulSetName(cluster.Name)
	selector := &metav1.LabelSelector{MatchLabels: podSelector(cluster)}
	meta := childMeta(cluster, name)
	meta.Annotations = map[string]string{kafkav1alpha1.AnnotationPodTemplateInputs: podTemplateInputs(cluster, brokerImage(cluster, opts))}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: meta,
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(cluster.Spec.Replicas),
			Selector:            selector,
			ServiceName:         kafkav1alpha1.HeadlessServiceName(cluster.Name),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels(cluster), Annotations: podAnnotations(cluster)},
				Spec:       brokerPodSpec(cluster, opts, name, selector),
			},
		},
	}
}

// brokerPodSpec is a broker pod: its identity (ServiceAccount serviceAccount), the drain's
// grace period, its security context and placement (spec.template's, else the defaults of
// podtemplate.go), the broker container, and the data and scratch volumes.
func brokerPodSpec(cluster *kafkav1alpha1.KafkaCluster, opts Options, serviceAccount string, selector *metav1.LabelSelector) corev1.PodSpec {
	spec := corev1.PodSpec{
		ServiceAccountName:            serviceAccount,
		TerminationGracePeriodSeconds: ptr.To(gracePeriodSeconds(cluster)),
		// Service links would put one env var per Service of the namespace into the
		// broker's environment; the broker learns what it needs from its flags.
		EnableServiceLinks:        ptr.To(false),
		SecurityContext:           podSecurityContext(cluster),
		TopologySpreadConstraints: topologySpread(cluster, selector),
		Affinity:                  affinity(cluster, selector),
		Containers:                []corev1.Container{brokerContainer(cluster, opts)},
		Volumes: []corev1.Volume{
			dataVolume(cluster),
			// The root filesystem is read-only; the broker gets a scratch /tmp.
			{Name: tmpVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	schedulingExtras(cluster, &spec)
	return spec
}

// zoneSpread prefers an even spread of the brokers over the cluster's rack topology key
// (zones by default); a cluster with fewer zones than brokers still schedules.
func zoneSpread(cluster *kafkav1alpha1.KafkaCluster, selector *metav1.LabelSelector) corev1.TopologySpreadConstraint {
	return corev1.TopologySpreadConstraint{
		MaxSkew:           1,
		TopologyKey:       cluster.Spec.RackTopologyKey(),
		WhenUnsatisfiable: corev1.ScheduleAnyway,
		LabelSelector:     selector,
	}
}

// onePerNode prefers one broker per node, without requiring it.
func onePerNode(selector *metav1.LabelSelector) *corev1.Affinity {
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: antiAffinityWeight,
			PodAffinityTerm: corev1.PodAffinityTerm{
				LabelSelector: selector,
				TopologyKey:   corev1.LabelHostname,
			},
		}},
	}}
}

// brokerContainer runs `paddock broker` (docs/architecture.md, "The broker pod"): its flags
// and downward-API environment, one port per listener and the health port, the probes, the
// resources (with GOMEMLIMIT below the memory limit), the mounts, and its security context.
func brokerContainer(cluster *kafkav1alpha1.KafkaCluster, opts Options) corev1.Container {
	resources := brokerResources(cluster)
	ports := make([]corev1.ContainerPort, 0, len(cluster.Spec.Listeners)+1)
	for _, l := range cluster.Spec.Listeners {
		ports = append(ports, corev1.ContainerPort{Name: l.Name, ContainerPort: l.Port, Protocol: corev1.ProtocolTCP})
	}
	ports = append(ports, corev1.ContainerPort{Name: kafkav1alpha1.HealthPortName, ContainerPort: kafkav1alpha1.HealthPort, Protocol: corev1.ProtocolTCP})
	return corev1.Container{
		Name:           kafkav1alpha1.BrokerContainerName,
		Image:          brokerImage(cluster, opts),
		Args:           brokerArgs(cluster),
		Env:            append(downwardEnv(), goMemLimitEnv(resources)...),
		Ports:          ports,
		ReadinessProbe: hTTPProbe("/readyz", readinessPeriod, readinessFailures),
		LivenessProbe:  hTTPProbe("/healthz", livenessPeriod, livenessFailures),
		StartupProbe:   hTTPProbe("/healthz", startupPeriod, startupFailures),
		Resources:      resources,
		VolumeMounts: []corev1.VolumeMount{
			{Name: kafkav1alpha1.DataVolumeName, MountPath: kafkav1alpha1.DataMountPath},
			{Name: tmpVolumeName, MountPath: "/tmp"},
		},
		SecurityContext: containerSecurityContext(cluster),
	}
}

// desiredChildren is every child cluster needs, in the order they are applied: identity and
// permissions first, then the Services the pods' DNS names and registration depend on, the
// NetworkPolicy (before any broker pod runs), the data claim, and the StatefulSet last.
func desiredChildren(cluster *kafkav1alpha1.KafkaCluster, opts Options) []client.Object {
	children := []client.Object{
		desiredServiceAccount(cluster),
		desiredRole(cluster),
		desiredRoleBinding(cluster),
		desiredHeadlessService(cluster),
		desiredBootstrapService(cluster),
	}
	if s := desiredInternalBootstrapService(cluster); s != nil {
		children = append(children, s)
	}
	for _, s := range desiredBrokerServices(cluster) {
		children = append(children, s)
	}
	if np := desiredNetworkPolicy(cluster); np != nil {
		children = append(children, np)
	}
	if pvc := desiredDataClaim(cluster); pvc != nil {
		children = append(children, pvc)
	}
	return append(children, desiredPodDisruptionBudget(cluster), desiredStatefulSet(cluster, opts))
}
