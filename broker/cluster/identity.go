package cluster

import (
	"strconv"
	"strings"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// ListenerSpec is one --listeners entry, name:port:how, with its --advertised-host-templates
// entry. how is PodDNS or PodIP for an Internal listener, NodePort or LoadBalancer for an
// external one (addresses.go). The broker reads them from its flags (broker/config.go).
type ListenerSpec struct {
	Name string
	Port int32
	// Type is Internal (also when empty), NodePort or LoadBalancer.
	Type v1alpha1.ListenerType
	// Mode is an Internal listener's PodDNS or PodIP; empty for the external types.
	Mode v1alpha1.AdvertisedHostMode
	// Template is the listener's advertisedHostTemplate as given; empty without one.
	Template string
	// Host is the advertised host as far as the flags and the pod identity tell it: the
	// template with every placeholder but {nodeAddress} replaced, else Mode's host. Empty for
	// a NodePort or LoadBalancer listener without a template, whose host only the node or
	// the load balancer can give.
	Host string
	// TLS serves the listener over TLS with the broker's certificate.
	TLS bool
	// Authentication is the listener's client authentication: scram-sha-512, scram-sha-256,
	// plain, tls (mutual TLS), or empty for none (docs/security.md).
	Authentication v1alpha1.ListenerAuthenticationType
}

// NeedsNodeAddress is the API's rule (v1alpha1.Listener.NeedsNodeAddress) for this listener.
func (l ListenerSpec) NeedsNodeAddress() bool {
	return v1alpha1.Listener{Type: l.Type, AdvertisedHostTemplate: l.Template}.NeedsNodeAddress()
}

// Static reports whether the listener's address is known from the flags and the pod identity
// alone: an Internal listener whose template names no {nodeAddress}.
func (l ListenerSpec) Static() bool {
	return (l.Type == "" || l.Type == v1alpha1.ListenerInternal) && !l.NeedsNodeAddress()
}

// Identity is who this broker is, from the pod's downward-API environment.
type Identity struct {
	ID        int32
	Pod       string // POD_NAME
	Namespace string // POD_NAMESPACE
	UID       string // POD_UID
	IP        string // POD_IP
	Node      string // NODE_NAME
}

// HolderIdentity is the heartbeat Lease's holderIdentity: one value per pod incarnation.
func (id Identity) HolderIdentity() string { return id.Pod + "_" + id.UID }

// ExpandTemplate replaces the placeholders of an advertisedHostTemplate that the pod identity
// answers ({id}, {pod}, {namespace}, {node}); {nodeAddress} stays for the node to answer
// (addresses.go).
func ExpandTemplate(tmpl string, id Identity) string {
	return strings.NewReplacer(
		v1alpha1.PlaceholderID, strconv.Itoa(int(id.ID)),
		v1alpha1.PlaceholderPod, id.Pod,
		v1alpha1.PlaceholderNamespace, id.Namespace,
		v1alpha1.PlaceholderNode, id.Node,
	).Replace(tmpl)
}
