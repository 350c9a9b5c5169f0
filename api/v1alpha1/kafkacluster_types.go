package v1alpha1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ListenerType says how a listener is reachable from outside the broker pods.
// +kubebuilder:validation:Enum=Internal;NodePort;LoadBalancer
type ListenerType string

const (
	// ListenerInternal is reachable inside the Kubernetes cluster only (ClusterIP Services).
	ListenerInternal ListenerType = "Internal"
	// ListenerNodePort exposes the bootstrap and per-broker Services as NodePorts.
	ListenerNodePort ListenerType = "NodePort"
	// ListenerLoadBalancer exposes the bootstrap and per-broker Services as LoadBalancers.
	ListenerLoadBalancer ListenerType = "LoadBalancer"
)

// AdvertisedHostMode says which host a broker advertises to clients for a listener.
// +kubebuilder:validation:Enum=PodDNS;PodIP
type AdvertisedHostMode string

const (
	// AdvertisePodDNS advertises <pod>.<cluster>-brokers.<namespace>.svc.<domain>.
	AdvertisePodDNS AdvertisedHostMode = "PodDNS"
	// AdvertisePodIP advertises the pod's IP, for environments without cluster DNS.
	AdvertisePodIP AdvertisedHostMode = "PodIP"
)

// Listener is one port the brokers accept Kafka connections on.
// +kubebuilder:validation:XValidation:rule="!has(self.authentication) || self.authentication.type.startsWith('scram-') || (has(self.tls) && self.tls)",message="authentication plain and tls need tls: true"
// +kubebuilder:validation:XValidation:rule="self.name != 'health'",message="listener name health is reserved for the health port"
// +kubebuilder:validation:XValidation:rule="self.port != 9644",message="listener port 9644 is the health port (/healthz, /readyz, /metrics)"
// +kubebuilder:validation:XValidation:rule="!has(self.service) || (has(self.type) && self.type != 'Internal')",message="service applies to NodePort and LoadBalancer listeners only"
// +kubebuilder:validation:XValidation:rule="!has(self.service) || !has(self.service.loadBalancerSourceRanges) || self.type == 'LoadBalancer'",message="service.loadBalancerSourceRanges applies to LoadBalancer listeners only"
type Listener struct {
	// name identifies the listener; it is also the container and Service port name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// port is the TCP port the brokers listen on.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// type says how the listener is exposed: Internal (ClusterIP), NodePort or LoadBalancer.
	// +optional
	// +kubebuilder:default=Internal
	Type ListenerType `json:"type,omitempty"`

	// advertisedHost says which host the brokers advertise on an Internal listener: PodDNS
	// (the pod's stable DNS name under the headless Service) or PodIP. NodePort and
	// LoadBalancer listeners ignore it: each broker advertises the address of the node it
	// runs on and the nodePort of its own Service, or the ingress address of its own load
	// balancer.
	// +optional
	// +kubebuilder:default=PodDNS
	AdvertisedHost AdvertisedHostMode `json:"advertisedHost,omitempty"`

	// advertisedHostTemplate, when set, is the host every broker advertises on this listener
	// instead of the one its type gives — for brokers behind NAT, a port forward, or a DNS
	// name per broker. Placeholders are replaced per broker: {id} (the broker id), {pod},
	// {namespace}, {node} (the name of the node it runs on) and {nodeAddress} (that node's
	// ExternalIP, else its InternalIP). Without placeholders it is one host for all brokers
	// ("127.0.0.1" behind a port forward of every nodePort). The port stays the one the type
	// gives: the listener port, or the broker's own nodePort for NodePort.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([-a-zA-Z0-9.:]|\{(id|pod|namespace|node|nodeAddress)\})+$`
	AdvertisedHostTemplate string `json:"advertisedHostTemplate,omitempty"`

	// service tunes the Services a NodePort or LoadBalancer listener is exposed through (the
	// bootstrap Service and the per-broker Services): their annotations, the source ranges
	// a load balancer admits, and the external traffic policy. The external listeners of a
	// cluster share those Services (each broker reads its addresses from its one Service),
	// so every external listener must give the same service settings.
	// +optional
	Service *ListenerService `json:"service,omitempty"`

	// allowFrom says who may connect to this listener, as peers of the cluster's
	// NetworkPolicy (pod and namespace selectors, CIDR blocks). Empty admits every pod of
	// every namespace on an Internal listener, and any source on a NodePort or LoadBalancer
	// listener (its clients are outside the cluster; with externalTrafficPolicy Cluster their
	// connections arrive from node addresses). The brokers of the cluster always reach each
	// other. Ignored when spec.networkPolicy.enabled is false.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	AllowFrom []networkingv1.NetworkPolicyPeer `json:"allowFrom,omitempty"`

	// tls serves the listener over TLS (1.2 or newer) with a certificate the operator issues
	// each broker from the cluster CA, covering every name and address the broker advertises.
	// Clients trust the CA certificate in Secret <cluster>-cluster-ca-cert (key ca.crt).
	// +optional
	TLS bool `json:"tls,omitempty"`

	// authentication is how clients of this listener prove who they are. Without it anyone
	// who reaches the listener is User:ANONYMOUS.
	// +optional
	Authentication *ListenerAuthentication `json:"authentication,omitempty"`
}

// ListenerAuthenticationType is a listener's client authentication.
// +kubebuilder:validation:Enum=scram-sha-512;scram-sha-256;plain;tls
type ListenerAuthenticationType string

const (
	// AuthenticationScramSHA512 is SASL SCRAM-SHA-512 with a KafkaUser's password.
	AuthenticationScramSHA512 ListenerAuthenticationType = "scram-sha-512"
	// AuthenticationScramSHA256 is SASL SCRAM-SHA-256 with a KafkaUser's password.
	AuthenticationScramSHA256 ListenerAuthenticationType = "scram-sha-256"
	// AuthenticationPlain is SASL PLAIN with a KafkaUser's password; only over TLS.
	AuthenticationPlain ListenerAuthenticationType = "plain"
	// AuthenticationTLS is mutual TLS: a client certificate from the clients CA (a tls
	// KafkaUser's); only over TLS.
	AuthenticationTLS ListenerAuthenticationType = "tls"
)

// ListenerAuthentication says how a listener authenticates its clients.
type ListenerAuthentication struct {
	// type is scram-sha-512, scram-sha-256, plain (over TLS only) or tls (mutual TLS).
	// +required
	Type ListenerAuthenticationType `json:"type"`
}

// Secured reports whether the listener authenticates its clients over an encrypted channel:
// TLS with any authentication, or SCRAM (whose exchange never sends the password).
func (l Listener) Secured() bool {
	return l.Authentication != nil && (l.TLS || l.Authentication.Type != AuthenticationPlain)
}

// CertificateAuthority names a user-supplied CA.
type CertificateAuthority struct {
	// secretName is a Secret of the cluster's namespace holding the CA's tls.crt and tls.key.
	// paddock issues certificates from it and never writes or renews it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
}

// Certificates tunes the cluster's CAs and the certificates issued from them.
// +kubebuilder:validation:XValidation:rule="!has(self.validity) || !has(self.renewBefore) || duration(self.renewBefore) < duration(self.validity)",message="certificates.renewBefore must be shorter than certificates.validity"
type Certificates struct {
	// validity of the CAs the operator makes and of every certificate it issues (a
	// certificate never outlives its CA).
	// +optional
	// +kubebuilder:default="8760h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1h')",message="certificates.validity must be at least 1h"
	Validity *metav1.Duration `json:"validity,omitempty"`

	// renewBefore is how long before expiry a certificate or CA is renewed. A renewed CA is
	// trusted at once and signs only after half of renewBefore, so clients pick it up first.
	// +optional
	// +kubebuilder:default="720h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="certificates.renewBefore must be at least 1m"
	RenewBefore *metav1.Duration `json:"renewBefore,omitempty"`

	// clusterCA, when set, is the user's CA for the broker certificates instead of the one
	// the operator makes (Secret <cluster>-cluster-ca).
	// +optional
	ClusterCA *CertificateAuthority `json:"clusterCA,omitempty"`

	// clientsCA, when set, is the user's CA for client certificates (tls KafkaUsers, and the
	// certificates mutual-TLS listeners accept) instead of Secret <cluster>-clients-ca.
	// +optional
	ClientsCA *CertificateAuthority `json:"clientsCA,omitempty"`
}

// AuthorizationType is how a cluster authorizes requests.
// +kubebuilder:validation:Enum=simple
type AuthorizationType string

// AuthorizationSimple is Apache Kafka's ACL authorizer: KafkaUser ACLs, deny by default.
const AuthorizationSimple AuthorizationType = "simple"

// Authorization turns ACL checks on: every request is checked against the KafkaUsers' ACLs
// with Apache's semantics (docs/security.md, "Authorization").
type Authorization struct {
	// type is simple: the ACLs of the cluster's KafkaUsers, checked on every request (deny
	// by default).
	// +required
	Type AuthorizationType `json:"type"`

	// superUsers are principals allowed everything ("User:admin", "User:CN=ops,O=corp").
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=512
	// +kubebuilder:validation:items:Pattern=`^User:.+$`
	SuperUsers []string `json:"superUsers,omitempty"`

	// acls are the ACLs of the wildcard principal User:*: they apply to every principal,
	// authenticated or not, as Apache's User:* ACLs do (a deny here denies everyone but the
	// super users). They are declared here because no KafkaUser is everyone; DescribeAcls
	// lists them, CreateAcls and DeleteAcls cannot change them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	ACLs []ACLRule `json:"acls,omitempty"`
}

// ListenerService is how a NodePort or LoadBalancer listener's Services are set up.
type ListenerService struct {
	// annotations are put on the listener's Services, for the settings a cloud provider
	// reads from them (an internal load balancer, its health check, ...).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Annotations map[string]string `json:"annotations,omitempty"`

	// loadBalancerSourceRanges are the client CIDRs a LoadBalancer listener's load balancers
	// admit (where the provider supports it); empty admits any.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=43
	// +kubebuilder:validation:XValidation:rule="self.all(r, isCIDR(r))",message="loadBalancerSourceRanges must be CIDRs such as 203.0.113.0/24"
	LoadBalancerSourceRanges []string `json:"loadBalancerSourceRanges,omitempty"`

	// externalTrafficPolicy of the listener's Services: Cluster (the Kubernetes default: any
	// node forwards, the client's address is lost to NAT) or Local (only a node running a
	// broker answers, and the broker and the NetworkPolicy see the client's own address).
	// +optional
	// +kubebuilder:validation:Enum=Cluster;Local
	ExternalTrafficPolicy corev1.ServiceExternalTrafficPolicy `json:"externalTrafficPolicy,omitempty"`
}

// Placeholders of Listener.AdvertisedHostTemplate.
const (
	PlaceholderID          = "{id}"
	PlaceholderPod         = "{pod}"
	PlaceholderNamespace   = "{namespace}"
	PlaceholderNode        = "{node}"
	PlaceholderNodeAddress = "{nodeAddress}"
)

// NeedsNodeAddress reports whether a broker must read its Node to advertise this listener:
// a NodePort listener without a template, or a template that names {nodeAddress}. The
// operator grants the brokers read access to Nodes exactly when one listener does.
func (l Listener) NeedsNodeAddress() bool {
	if l.AdvertisedHostTemplate != "" {
		return strings.Contains(l.AdvertisedHostTemplate, PlaceholderNodeAddress)
	}
	return l.Type == ListenerNodePort
}

// IsExternal reports whether l is a NodePort or LoadBalancer listener.
func (l Listener) IsExternal() bool {
	return l.Type == ListenerNodePort || l.Type == ListenerLoadBalancer
}

// BootstrapServiceOf is the Service clients of listener bootstrap through: BootstrapServiceName
// — for every listener of a cluster whose listeners are all Internal, and for the NodePort or
// LoadBalancer listeners of one that has some — or, for an Internal listener beside them,
// InternalBootstrapServiceName (an external Service never carries an internal listener's
// port).
func (c *KafkaCluster) BootstrapServiceOf(listener string) string {
	external, internal := false, false
	for _, l := range c.Spec.Listeners {
		switch {
		case l.IsExternal():
			external = true
		case l.Name == listener:
			internal = true
		}
	}
	if external && internal {
		return InternalBootstrapServiceName(c.Name)
	}
	return BootstrapServiceName(c.Name)
}

// StorageType says where a cluster keeps its data.
// +kubebuilder:validation:Enum=PersistentClaim;Ephemeral
type StorageType string

const (
	// StoragePersistentClaim keeps data on a PersistentVolumeClaim that outlives pods and nodes.
	StoragePersistentClaim StorageType = "PersistentClaim"
	// StorageEphemeral keeps data in an emptyDir: lost with the pod. For development only.
	StorageEphemeral StorageType = "Ephemeral"
)

// Storage is where the brokers keep partition data and consumer offsets. Once the cluster
// holds data (status.clusterID is set) its type, accessMode and storageClassName (once set)
// cannot change: the API server refuses the edit. Before that — a cluster being created, or
// one whose spec is being made to match a retained claim it adopts — they may, and the
// operator checks them against the claim. The size of a PersistentClaim may grow (the claim is
// expanded where its StorageClass allows it) but never below the claim's (status.storageSize):
// the API server refuses that edit too.
type Storage struct {
	// type is PersistentClaim (the default: one shared ReadWriteMany claim that every broker
	// mounts, so a broker's partitions can be taken over by any other) or Ephemeral (an
	// emptyDir per pod; data is lost with the pod — for development).
	// +optional
	// +kubebuilder:default=PersistentClaim
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Type",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:PersistentClaim","urn:alm:descriptor:com.tectonic.ui:select:Ephemeral"}
	Type StorageType `json:"type,omitempty"`

	// size is the requested capacity of the claim.
	// +optional
	// +kubebuilder:default="10Gi"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Size",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	Size *resource.Quantity `json:"size,omitempty"`

	// storageClassName is the StorageClass of the claim; empty uses the cluster default.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Class",xDescriptors={"urn:alm:descriptor:io.kubernetes:StorageClass"}
	StorageClassName *string `json:"storageClassName,omitempty"`

	// accessMode of the claim. ReadWriteMany (the default) lets any broker take over any
	// partition, wherever it runs.
	// +optional
	// +kubebuilder:default=ReadWriteMany
	// +kubebuilder:validation:Enum=ReadWriteMany;ReadWriteOnce;ReadWriteOncePod
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Access Mode",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:ReadWriteMany","urn:alm:descriptor:com.tectonic.ui:select:ReadWriteOnce","urn:alm:descriptor:com.tectonic.ui:select:ReadWriteOncePod","urn:alm:descriptor:com.tectonic.ui:advanced"}
	AccessMode corev1.PersistentVolumeAccessMode `json:"accessMode,omitempty"`

	// deleteClaim deletes the data claim, and with it every message and committed offset, when
	// the KafkaCluster is deleted. By default (false, as in Strimzi) the claim outlives the
	// cluster: it has no owner reference, keeps its labels and the cluster-id annotation, and a
	// KafkaCluster re-created with the same name adopts it with its data and its clusterID.
	// Changing it on an existing cluster changes the claim's ownership. Ephemeral storage has
	// no claim and ignores it.
	// +optional
	// +kubebuilder:default=false
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Delete Claim With Cluster",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch","urn:alm:descriptor:com.tectonic.ui:advanced"}
	DeleteClaim bool `json:"deleteClaim,omitempty"`

	// verification says what the storage check does (docs/storage.md, "The storage check"):
	// two pods on different nodes exercise the claim (exclusive create and link races, rename
	// atomicity, fsync then read on the other node, close-to-open) when it is first bound and
	// whenever the storage changes, and the StorageVerified condition reports each property.
	// Enforce (the default) holds the brokers — the StatefulSet is scaled to zero — while a
	// property has failed; Report only reports; Skip does not run the check. A check that
	// cannot run (one node, a deadline) holds nothing: StorageVerified says why.
	// +optional
	// +kubebuilder:default=Enforce
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Verification",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:select:Enforce","urn:alm:descriptor:com.tectonic.ui:select:Report","urn:alm:descriptor:com.tectonic.ui:select:Skip","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Verification StorageVerification `json:"verification,omitempty"`
}

// Heartbeat sets how often brokers renew their Lease and how long a silent broker stays alive.
// +kubebuilder:validation:XValidation:rule="!has(self.interval) || !has(self.sessionTimeout) || duration(self.interval) < duration(self.sessionTimeout)",message="heartbeat.interval must be shorter than heartbeat.sessionTimeout"
type Heartbeat struct {
	// interval between two renewals of a broker's heartbeat Lease.
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms')",message="heartbeat.interval must be at least 100ms"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Heartbeat Interval",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Interval *metav1.Duration `json:"interval,omitempty"`

	// sessionTimeout is how long after its last renewal a broker counts as Dead. It becomes
	// the Lease's leaseDurationSeconds, so it is a whole number of seconds.
	// +optional
	// +kubebuilder:default="6s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="heartbeat.sessionTimeout must be between 1s and 1h"
	// +kubebuilder:validation:XValidation:rule="duration(self).getMilliseconds() % 1000 == 0",message="heartbeat.sessionTimeout must be a whole number of seconds"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Session Timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	SessionTimeout *metav1.Duration `json:"sessionTimeout,omitempty"`
}

// Rack spreads brokers over failure domains and reports each broker's rack to clients.
type Rack struct {
	// topologyKey is the Node label whose value is a broker's rack (its zone).
	// +optional
	// +kubebuilder:default="topology.kubernetes.io/zone"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Rack Topology Key",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	TopologyKey string `json:"topologyKey,omitempty"`
}

// NetworkPolicy is the cluster's NetworkPolicy <cluster>-broker: who may connect to the
// brokers.
type NetworkPolicy struct {
	// enabled keeps a NetworkPolicy that admits each listener from its allowFrom, the health
	// port from the broker's own node only (kubelet probes; a NetworkPolicy always admits a
	// pod's node), and every port from the cluster's other brokers; everything else is
	// refused. false deletes it (the brokers then take connections from anywhere the
	// network lets through). It is enforced only where the cluster's network plugin
	// implements NetworkPolicies.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`

	// healthFrom are peers, besides the node, that may reach the health port: a Prometheus
	// scraping /metrics, for example. Empty: the node only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	HealthFrom []networkingv1.NetworkPolicyPeer `json:"healthFrom,omitempty"`
}

// KafkaClusterSpec is what a user asks for: how many brokers, how they are reached, where
// they keep data and how quickly a silent broker is declared dead.
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || self.listeners.all(l, self.listeners.exists_one(m, m.port == l.port))",message="listener ports must be unique"
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || !(self.listeners.exists(l, has(l.type) && l.type == 'NodePort') && self.listeners.exists(l, has(l.type) && l.type == 'LoadBalancer'))",message="listeners mix NodePort and LoadBalancer types; the bootstrap Service can have only one"
// +kubebuilder:validation:XValidation:rule="!has(self.listeners) || self.listeners.all(a, !has(a.type) || a.type == 'Internal' || self.listeners.all(b, !has(b.type) || b.type == 'Internal' || (has(a.service) == has(b.service) && (!has(a.service) || a.service == b.service))))",message="every NodePort or LoadBalancer listener must give the same service settings: they share the external Services"
type KafkaClusterSpec struct {
	// replicas is the number of brokers. Lowering it deregisters the highest broker ids.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Brokers",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas,omitempty"`

	// image runs the brokers; empty uses the operator's default (its own image).
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Broker Image",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	Image string `json:"image,omitempty"`

	// listeners are the ports clients connect to.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:default={{name: "kafka", port: 9092}}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Listeners"
	Listeners []Listener `json:"listeners,omitempty"`

	// storage is where brokers keep their data.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage Storage `json:"storage,omitempty"`

	// heartbeat tunes broker liveness detection.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Heartbeat",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Heartbeat Heartbeat `json:"heartbeat,omitempty"`

	// drainTimeout is the longest a broker that got SIGTERM keeps serving while it hands its
	// partitions and group coordinators over. The pod's termination grace period is a little
	// longer.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="drainTimeout must be between 0s and 1h"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Drain Timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text"}
	DrainTimeout *metav1.Duration `json:"drainTimeout,omitempty"`

	// nodeLossTimeout is how long a broker's node must have been NotReady (or Unknown) before
	// the operator force-deletes the broker's pod so the StatefulSet can recreate it on
	// another node — and only once the broker's heartbeat has expired and every partition it
	// led has been claimed by its new leader (docs/recovery.md). Those gates already prove
	// the old process can acknowledge nothing, so the default only rides out a brief NotReady.
	// The node taint node.kubernetes.io/out-of-service cuts it short. The annotation
	// kafka.paddock.dev/auto-recover: "false" turns recovery off.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="nodeLossTimeout must be between 1s and 24h"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Node Loss Timeout",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:text","urn:alm:descriptor:com.tectonic.ui:advanced"}
	NodeLossTimeout *metav1.Duration `json:"nodeLossTimeout,omitempty"`

	// rack spreads brokers over zones and reports each broker's zone as its rack.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Rack Awareness",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Rack Rack `json:"rack,omitempty"`

	// resources of the broker container. Left empty (no requests and no limits), the brokers
	// request 500m CPU and 1Gi of memory, limited to 1Gi. With a memory limit the broker's Go
	// runtime gets GOMEMLIMIT at 90% of it, so the garbage collector works harder before the
	// kernel's OOM killer would, and the memory budgets (queued.max.request.bytes and
	// queued.max.response.bytes) are held to it: each defaults to a quarter of the limit (at
	// most 256 MiB), and spec.config's are refused (Degraded InvalidConfig) when unbounded or
	// together over half of it (docs/bounds.md).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Broker Resources",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:resourceRequirements"}
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// limits bound how many topics and partitions the cluster holds: each is a KafkaTopic in
	// the API server's etcd, so the defaults keep a cluster's topics well inside etcd's
	// default 2 GiB quota (docs/bounds.md, "Topics and partitions"). CreateTopics and
	// CreatePartitions beyond them, and Metadata auto-creation, are refused with
	// POLICY_VIOLATION.
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Limits",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Limits ClusterLimits `json:"limits,omitempty"`

	// template customizes the broker pods: scheduling (nodeSelector, tolerations, affinity,
	// topologySpreadConstraints, priorityClassName), imagePullSecrets, security contexts and
	// extra labels and annotations.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Broker Pod Template",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Template BrokerPodTemplate `json:"template,omitempty"`

	// config holds Kafka broker settings that reach every broker (for example
	// "num.partitions", "auto.create.topics.enable", "log.retention.ms"). Unknown keys and
	// malformed values are reported by the Degraded condition (reason InvalidConfig) and not
	// applied; docs/topics.md lists the keys.
	// +optional
	// +kubebuilder:validation:MaxProperties=256
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Broker Configuration",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Config map[string]string `json:"config,omitempty"`

	// certificates tunes the CAs and certificates of TLS listeners and tls KafkaUsers.
	// +optional
	// +kubebuilder:default={}
	Certificates Certificates `json:"certificates,omitempty"`

	// authorization checks every request against the KafkaUsers' ACLs (Apache's semantics);
	// without it, every client a listener admits may do everything (docs/security.md,
	// "Authorization").
	// +optional
	Authorization *Authorization `json:"authorization,omitempty"`

	// networkPolicy scopes who may connect to the brokers (on by default).
	// +optional
	// +kubebuilder:default={}
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Network Policy",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	NetworkPolicy NetworkPolicy `json:"networkPolicy,omitempty"`

	// monitoring asks the operator for the objects a Prometheus Operator scrapes the brokers
	// by (README "Monitoring").
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Monitoring",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:advanced"}
	Monitoring *Monitoring `json:"monitoring,omitempty"`
}

// Monitoring is what the operator makes for a Prometheus Operator.
type Monitoring struct {
	// podMonitor, enabled, makes a monitoring.coreos.com/v1 PodMonitor <cluster>-broker in
	// the cluster's namespace that scrapes every broker's /metrics on the health port with
	// the labels the monitoring kit's rules and dashboard group by (cluster, broker) — the
	// kit's paddock-brokers PodMonitor narrowed to this cluster. It needs the Prometheus
	// Operator's CRDs; without them the Monitored condition says so and the operator looks
	// again every five minutes. The alert rules and the dashboard stay the kit's
	// (config/monitoring): one set serves every cluster.
	// +optional
	PodMonitor *PodMonitorSpec `json:"podMonitor,omitempty"`
}

// PodMonitorSpec shapes the operator's PodMonitor of a cluster.
type PodMonitorSpec struct {
	// enabled keeps the PodMonitor; false deletes it.
	Enabled bool `json:"enabled"`

	// labels are added to the PodMonitor's, so that a Prometheus's podMonitorSelector
	// selects it (the operator sets app.kubernetes.io/name: paddock and the cluster's own
	// labels; these may not replace them).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Labels map[string]string `json:"labels,omitempty"`

	// interval is how often Prometheus scrapes each broker.
	// +optional
	// +kubebuilder:default="15s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="interval must be between 1s and 1h"
	Interval *metav1.Duration `json:"interval,omitempty"`
}

// ClusterLimits bound what a cluster keeps in the API server.
type ClusterLimits struct {
	// maxTopics is the most topics (KafkaTopics, those being deleted included) the admin APIs
	// and auto-creation create in the cluster.
	// +optional
	// +kubebuilder:default=2000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	MaxTopics int32 `json:"maxTopics,omitempty"`

	// maxPartitions is the most partitions, over all the cluster's topics, the admin APIs and
	// auto-creation create or add to. At about 200 bytes of etcd per partition (measured:
	// docs/bounds.md) the default holds ~10 MB, under 1% of etcd's default quota.
	// +optional
	// +kubebuilder:default=50000
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxPartitions int32 `json:"maxPartitions,omitempty"`
}

// BrokerState says whether a registered broker serves clients.
// +kubebuilder:validation:Enum=Serving;Fenced
type BrokerState string

const (
	// BrokerServing: registered and its endpoint is serving; clients see it in Metadata.
	BrokerServing BrokerState = "Serving"
	// BrokerFenced: registered but not serving; omitted from Metadata, listed by
	// DescribeCluster v2 with IsFenced.
	BrokerFenced BrokerState = "Fenced"
)

// BrokerHealth is what a broker's heartbeat says.
// +kubebuilder:validation:Enum=Alive;Draining;Dead
type BrokerHealth string

const (
	// BrokerAlive: fresh heartbeat, healthy, not draining; eligible for work.
	BrokerAlive BrokerHealth = "Alive"
	// BrokerDraining: fresh heartbeat announcing a shutdown; its work is being moved away.
	BrokerDraining BrokerHealth = "Draining"
	// BrokerDead: no fresh healthy heartbeat. Still registered: it counts in the coordinator
	// divisor.
	BrokerDead BrokerHealth = "Dead"
)

// BrokerRow is one broker's entry in the registry.
type BrokerRow struct {
	// id is the broker id: the ordinal of its StatefulSet pod.
	// +kubebuilder:validation:Minimum=0
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Broker ID"
	ID int32 `json:"id"`

	// pod is the broker's pod name.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Pod",xDescriptors={"urn:alm:descriptor:io.kubernetes:Pod"}
	Pod string `json:"pod,omitempty"`

	// node is the Node the pod runs on.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Node",xDescriptors={"urn:alm:descriptor:io.kubernetes:Node"}
	Node string `json:"node,omitempty"`

	// host is the broker's address as listed by its endpoint. Clients are told the addresses
	// in listeners; host and port stay for readers written before listeners existed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Host"
	Host string `json:"host,omitempty"`

	// port is the broker's first listener port (see host).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Port"
	Port int32 `json:"port,omitempty"`

	// listeners gives the host and port the broker advertises on each of its listeners, as
	// its heartbeat Lease announces them. A broker is left out of the answers on a listener
	// it has no address for.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Listener Addresses"
	Listeners []ListenerAddress `json:"listeners,omitempty"`

	// rack is the broker's zone.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Rack"
	Rack string `json:"rack,omitempty"`

	// state is Serving or Fenced.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="State"
	State BrokerState `json:"state"`

	// health is Alive, Draining or Dead.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Health"
	Health BrokerHealth `json:"health"`

	// reason says why the broker is Fenced or not Alive; empty when it is Serving and Alive.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Reason"
	Reason string `json:"reason,omitempty"`

	// epoch grows with each incarnation of the broker (its Lease's leaseTransitions).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Epoch"
	Epoch int64 `json:"epoch,omitempty"`

	// lastSeen is when the broker last renewed its heartbeat. A dead broker keeps the time it
	// was last heard from.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Last Seen"
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`

	// failedPartitions are the partitions whose storage failed on this broker recently, as
	// its heartbeat Lease announces them: the assignment takes one that failed once over
	// again at the next epoch here, and moves one that failed here again elsewhere.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Failed Partitions"
	FailedPartitions []PartitionFailure `json:"failedPartitions,omitempty"`

	// uncleanablePartitions are the compacted partitions this broker leads whose last
	// cleaning pass failed, as its heartbeat Lease announces them; they still serve.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Uncleanable Partitions"
	UncleanablePartitions []UncleanablePartition `json:"uncleanablePartitions,omitempty"`

	// mountRefused says why the broker refuses to serve from its data volume's mount, as its
	// heartbeat Lease announces it; empty when the mount is accepted.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Mount Refused"
	MountRefused string `json:"mountRefused,omitempty"`

	// groups counts the consumer groups this broker coordinates and serves, by protocol and
	// state, as its heartbeat Lease announces them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Groups"
	Groups []GroupCount `json:"groups,omitempty"`

	// ongoingTransactions counts the transactions this broker's transaction coordinator holds
	// open (Ongoing, PrepareCommit or PrepareAbort), as its heartbeat Lease announces them.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ongoing Transactions"
	OngoingTransactions int32 `json:"ongoingTransactions,omitempty"`
}

// ListenerAddress is where clients reach a broker on one listener.
type ListenerAddress struct {
	// name of the listener (spec.listeners[].name).
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// host the broker advertises on this listener: its pod's DNS name or IP, its node's
	// address, its load balancer's ingress, or the listener's advertisedHostTemplate.
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`
	// port the broker advertises on this listener.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
}

// Address is the listener named name, or ok=false when there is none.
func (r *BrokerRow) Address(name string) (ListenerAddress, bool) {
	for _, a := range r.Listeners {
		if a.Name == name {
			return a, true
		}
	}
	return ListenerAddress{}, false
}

// BrokerCounts sums the registry rows.
type BrokerCounts struct {
	// registered is the number of registered brokers: the coordinator divisor.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Registered Brokers"
	Registered int32 `json:"registered"`
	// serving is the number of registered brokers whose endpoint is serving.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Serving Brokers"
	Serving int32 `json:"serving"`
	// fenced is the number of registered brokers that are not serving.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Fenced Brokers"
	Fenced int32 `json:"fenced"`
	// alive is the number of brokers with a fresh, healthy heartbeat that are not draining.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Alive Brokers"
	Alive int32 `json:"alive"`
	// draining is the number of brokers handing their work over before a shutdown.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Draining Brokers"
	Draining int32 `json:"draining"`
	// dead is the number of registered brokers without a fresh healthy heartbeat.
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Dead Brokers"
	Dead int32 `json:"dead"`
	// groups is the number of consumer groups the brokers that are not dead coordinate
	// (status.groups, summed). Written as 0, never left out, so the registry's merge patch
	// of counts replaces an older total.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Consumer Groups"
	Groups int32 `json:"groups"`
	// ongoingTransactions is the number of transactions the transaction coordinators of the
	// brokers that are not dead hold open (status.brokers[].ongoingTransactions, summed).
	// Written as 0, never left out, so the registry's merge patch of counts replaces an
	// older total.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ongoing Transactions"
	OngoingTransactions int32 `json:"ongoingTransactions"`
}

// CoordinatorBrokers are the broker sets one coordinator epoch stands for.
type CoordinatorBrokers struct {
	// registered are the registered broker ids, sorted.
	// +optional
	// +listType=atomic
	Registered []int32 `json:"registered,omitempty"`
	// alive are the alive broker ids, sorted.
	// +optional
	// +listType=atomic
	Alive []int32 `json:"alive,omitempty"`
	// aliveEpochs are the alive brokers' incarnations (their registry rows' epochs), in the
	// order of alive. A broker that restarts before it is declared dead keeps both sets but
	// not its epoch; its new process must not inherit the group fences its old one claimed,
	// so the coordinator epoch is bumped for it too.
	// +optional
	// +listType=atomic
	AliveEpochs []int64 `json:"aliveEpochs,omitempty"`
}

// ListenerStatus is where clients find a listener.
type ListenerStatus struct {
	// name of the listener.
	Name string `json:"name"`
	// type of the listener.
	// +optional
	Type ListenerType `json:"type,omitempty"`
	// bootstrap is the host:port clients use for their first connection.
	// +optional
	Bootstrap string `json:"bootstrap,omitempty"`
}

// KafkaClusterStatus is what the operator observed.
type KafkaClusterStatus struct {
	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// clusterID is the Kafka cluster id: 22 characters of base64url, minted once and never
	// changed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Cluster ID",xDescriptors={"urn:alm:descriptor:text"}
	ClusterID string `json:"clusterID,omitempty"`

	// conditions are Ready, Progressing and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// replicas is the number of broker pods the StatefulSet has.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Broker Pods"
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of ready broker pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Broker Pods"
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// storageSize is the size the data claim asks for (its spec.resources.requests.storage),
	// as the operator last read it; unset while there is no claim. spec.storage.size may not
	// be set below it (the API server refuses the edit): a claim never shrinks. It is larger
	// than the claim's capacity while the storage provider expands the volume (Progressing,
	// ExpandingStorage).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Storage Size"
	StorageSize *resource.Quantity `json:"storageSize,omitempty"`

	// brokers lists every registered broker, sorted by id.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Broker Registry"
	Brokers []BrokerRow `json:"brokers,omitempty"`

	// counts sums the brokers rows.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Broker Counts"
	Counts BrokerCounts `json:"counts,omitempty"`

	// groups counts the cluster's consumer groups by protocol and state: the sum of what the
	// brokers that are not dead announce of the groups they coordinate (status.brokers[].groups).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Consumer Groups by State"
	Groups []GroupCount `json:"groups,omitempty"`

	// coordinatorEpoch fences group coordinators as a leader epoch fences a partition. The
	// assignment reconciler bumps it, and never lowers it, whenever the registered or the
	// alive set of brokers changes — whenever a group's coordinator may have moved — and
	// whenever an alive broker restarted (a new incarnation).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Coordinator Epoch"
	CoordinatorEpoch int64 `json:"coordinatorEpoch,omitempty"`

	// coordinatorBrokers are the registered and alive broker ids coordinatorEpoch was set
	// for. A broker whose status.brokers give other sets reads a registry change the epoch
	// has not caught up with yet.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Coordinator Brokers"
	CoordinatorBrokers *CoordinatorBrokers `json:"coordinatorBrokers,omitempty"`

	// topics is the number of the cluster's KafkaTopics that are served (not being deleted,
	// no conflicting name).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Topics"
	Topics int32 `json:"topics,omitempty"`

	// partitions is the number of partitions of those topics.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Partitions"
	Partitions int32 `json:"partitions,omitempty"`

	// listeners gives each listener's bootstrap address.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Bootstrap Addresses"
	Listeners []ListenerStatus `json:"listeners,omitempty"`
}

// KafkaCluster is a set of paddock brokers run by the operator, and the honest report of their
// registration and health.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.clusterID) || !has(oldSelf.spec.storage.type) || (has(self.spec.storage.type) && self.spec.storage.type == oldSelf.spec.storage.type)",message="spec.storage.type cannot change once the cluster holds data (status.clusterID is set)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.clusterID) || !has(oldSelf.spec.storage.accessMode) || (has(self.spec.storage.accessMode) && self.spec.storage.accessMode == oldSelf.spec.storage.accessMode)",message="spec.storage.accessMode cannot change once the cluster holds data (status.clusterID is set)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.clusterID) || !has(oldSelf.spec.storage.storageClassName) || (has(self.spec.storage.storageClassName) && self.spec.storage.storageClassName == oldSelf.spec.storage.storageClassName)",message="spec.storage.storageClassName cannot change once the cluster holds data (status.clusterID is set)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.storageSize) || !has(self.spec.storage.size) || (has(oldSelf.spec.storage.size) && quantity(string(self.spec.storage.size)).compareTo(quantity(string(oldSelf.spec.storage.size))) == 0) || (has(self.spec.storage.type) && self.spec.storage.type != 'PersistentClaim') || quantity(string(self.spec.storage.size)).compareTo(quantity(string(oldSelf.status.storageSize))) >= 0",message="spec.storage.size cannot be smaller than the data claim (status.storageSize): a claim never shrinks"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pkc,categories={paddock,kafka}
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.counts.registered`
// +kubebuilder:printcolumn:name="Fenced",type=integer,JSONPath=`.status.counts.fenced`
// +kubebuilder:printcolumn:name="Alive",type=integer,JSONPath=`.status.counts.alive`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitions`
// +kubebuilder:printcolumn:name="Topics",type=integer,JSONPath=`.status.topics`,priority=1
// +kubebuilder:printcolumn:name="Groups",type=integer,JSONPath=`.status.counts.groups`,priority=1
// +kubebuilder:printcolumn:name="Transactions",type=integer,JSONPath=`.status.counts.ongoingTransactions`,priority=1
// +kubebuilder:printcolumn:name="Cluster-ID",type=string,JSONPath=`.status.clusterID`,priority=1
// +kubebuilder:printcolumn:name="Secured",type=string,JSONPath=`.status.conditions[?(@.type=="Secured")].status`,priority=1
// +kubebuilder:printcolumn:name="Storage-Verified",type=string,JSONPath=`.status.conditions[?(@.type=="StorageVerified")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Kafka Cluster",resources={{StatefulSet,v1,<cluster>-broker},{Service,v1,<cluster>-brokers},{Service,v1,<cluster>-bootstrap},{Service,v1,<cluster>-broker-<id>},{Pod,v1,<cluster>-broker-<id>},{Lease,v1,<cluster>-broker-<id>},{Broker,v1alpha1,<cluster>-<id>},{PodDisruptionBudget,v1,<cluster>-broker},{ServiceAccount,v1,<cluster>-broker},{Role,v1,<cluster>-broker},{RoleBinding,v1,<cluster>-broker},{PersistentVolumeClaim,v1,<cluster>-data}}
type KafkaCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired cluster.
	// +optional
	// +kubebuilder:default={}
	Spec KafkaClusterSpec `json:"spec,omitempty"`

	// status is what the operator observed.
	// +optional
	Status KafkaClusterStatus `json:"status,omitempty"`
}

// KafkaClusterList is a list of KafkaClusters.
// +kubebuilder:object:root=true
type KafkaClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaCluster `json:"items"`
}

func init() {
	register(&KafkaCluster{}, &KafkaClusterList{})
}
