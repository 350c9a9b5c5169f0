package v1alpha1

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Label keys and values every paddock-managed object carries (docs/names.md, "Labels").
const (
	// LabelName is app.kubernetes.io/name; its value is always LabelNameValue.
	LabelName = "app.kubernetes.io/name"
	// LabelNameValue is the value of LabelName on every object paddock creates.
	LabelNameValue = "paddock"
	// LabelInstance is app.kubernetes.io/instance: the KafkaCluster's name.
	LabelInstance = "app.kubernetes.io/instance"
	// LabelCluster names the KafkaCluster an object belongs to.
	LabelCluster = "kafka.paddock.dev/cluster"
	// LabelBrokerID is the numeric broker id of a per-broker object (Lease, Service, Broker).
	LabelBrokerID = "kafka.paddock.dev/broker-id"
	// LabelNamespace is the namespace of the KafkaCluster a cluster-scoped object belongs to
	// (its node-reader ClusterRoleBinding).
	LabelNamespace = "kafka.paddock.dev/namespace"
)

// NodeReaderClusterRoleName is the ClusterRole, shared by every cluster, that lets brokers
// read Nodes (for listeners that advertise their node's address).
const NodeReaderClusterRoleName = "paddock-broker-node-reader"

// FinalizerNodeReader is on a KafkaCluster while it has a node-reader ClusterRoleBinding:
// a cluster-scoped object the cluster cannot own, deleted by the operator before the
// cluster goes.
const FinalizerNodeReader = "kafka.paddock.dev/node-reader"

// NodeReaderBindingName is the ClusterRoleBinding that lets cluster's brokers read Nodes.
func NodeReaderBindingName(namespace, cluster string) string {
	return NodeReaderClusterRoleName + ":" + namespace + ":" + cluster
}

// Annotations a broker writes on its heartbeat Lease (docs/registry.md, "Heartbeat Lease";
// docs/names.md, "Annotations").
const (
	// AnnotationDraining is "true" once the broker has received SIGTERM and is handing its
	// work over.
	AnnotationDraining = "kafka.paddock.dev/draining"
	// AnnotationHealthy is "false" when the broker's request loop is wedged or its storage
	// is failing; "true" otherwise.
	AnnotationHealthy = "kafka.paddock.dev/healthy"
	// AnnotationListeners is the host and port the broker advertises on each listener, as
	// FormatListeners writes them ("kafka=demo-broker-0.demo-brokers.ns.svc.cluster.local:9092").
	// The registry copies them into the broker's row, so every broker tells clients the
	// addresses each broker tells about itself.
	AnnotationListeners = "kafka.paddock.dev/listeners"
)

// FormatListeners is the AnnotationListeners value for addrs: name=host:port entries joined
// by commas, in the given order (an IPv6 host is bracketed).
func FormatListeners(addrs []ListenerAddress) string {
	parts := make([]string, len(addrs))
	for i, a := range addrs {
		parts[i] = a.Name + "=" + net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port)))
	}
	return strings.Join(parts, ",")
}

// ParseListeners reads an AnnotationListeners value. An entry that is not name=host:port with
// a non-empty name and host and a port in 1..65535 is skipped, and so is a repeated name:
// the Lease is the broker's to write, and one bad entry must not hide the others.
func ParseListeners(s string) []ListenerAddress {
	if s == "" {
		return nil
	}
	var out []ListenerAddress
	for _, entry := range strings.Split(s, ",") {
		name, hostPort, ok := strings.Cut(entry, "=")
		if !ok || name == "" {
			continue
		}
		host, portStr, err := net.SplitHostPort(hostPort)
		if err != nil || host == "" {
			continue
		}
		port, err := strconv.ParseUint(portStr, 10, 16)
		if err != nil || port == 0 || slices.ContainsFunc(out, func(a ListenerAddress) bool { return a.Name == name }) {
			continue
		}
		out = append(out, ListenerAddress{Name: name, Host: host, Port: int32(port)})
	}
	return out
}

// ReadListeners reads an AnnotationListeners value strictly, as the operator must read what
// a broker says about itself (docs/registry.md, "What a Lease may say"): every entry is
// name=host:port with name one of known and not repeated, host an IP address or a DNS name of
// at most 253 characters, port a decimal in 1..65535 without a sign or leading zeros. The
// first entry that is not is the error, and nothing is returned with it: one bad entry makes
// the whole announcement untrustworthy. "" is a valid announcement of no address at all.
func ReadListeners(s string, known []string) ([]ListenerAddress, error) {
	if s == "" {
		return []ListenerAddress{}, nil
	}
	var out []ListenerAddress
	for _, entry := range strings.Split(s, ",") {
		a, err := readListener(entry, known)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(b ListenerAddress) bool { return b.Name == a.Name }) {
			return nil, fmt.Errorf("listener %q announced twice", a.Name)
		}
		out = append(out, a) // at most len(known): a name is known and never repeated
	}
	return out, nil
}

// readListener reads one name=host:port entry of ReadListeners.
func readListener(entry string, known []string) (ListenerAddress, error) {
	name, hostPort, ok := strings.Cut(entry, "=")
	if !ok {
		return ListenerAddress{}, fmt.Errorf("entry %.40q is not name=host:port", entry)
	}
	if !slices.Contains(known, name) {
		return ListenerAddress{}, fmt.Errorf("listener %.40q is not one of the cluster's (%s)", name, strings.Join(known, ", "))
	}
	host, portStr, err := net.SplitHostPort(hostPort)
	if err != nil {
		return ListenerAddress{}, fmt.Errorf("listener %s: %.60q is not host:port", name, hostPort)
	}
	if err := validHost(host); err != nil {
		return ListenerAddress{}, fmt.Errorf("listener %s: %w", name, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 || portStr != strconv.FormatUint(port, 10) {
		return ListenerAddress{}, fmt.Errorf("listener %s: port %.10q is not in 1..65535", name, portStr)
	}
	return ListenerAddress{Name: name, Host: host, Port: int32(port)}, nil
}

// maxHostLength is the longest host a row may carry (ListenerAddress.host's MaxLength).
const maxHostLength = 253

// validHost accepts an IP address or a DNS name: labels of letters (either case), digits and
// inner '-', each at most 63 characters.
func validHost(host string) error {
	switch {
	case host == "":
		return errors.New("empty host")
	case len(host) > maxHostLength:
		return fmt.Errorf("host of %d characters, more than %d", len(host), maxHostLength)
	case net.ParseIP(host) != nil:
		return nil
	}
	for _, label := range strings.Split(strings.ToLower(host), ".") {
		if errs := validation.IsDNS1123Label(label); len(errs) > 0 {
			return fmt.Errorf("host %.60q is neither an IP address nor a DNS name", host)
		}
	}
	return nil
}

// ClusterLabels are the labels of every object paddock makes for cluster: its name, instance
// and cluster labels. The StatefulSet selector is a smaller, fixed subset (it can never change).
func ClusterLabels(cluster string) map[string]string {
	return map[string]string{
		LabelName:     LabelNameValue,
		LabelInstance: cluster,
		LabelCluster:  cluster,
	}
}

// BrokerLabels are the labels of a per-broker object of cluster (its Service, heartbeat Lease
// and Broker object): ClusterLabels plus the broker id.
func BrokerLabels(cluster string, id int32) map[string]string {
	l := ClusterLabels(cluster)
	l[LabelBrokerID] = strconv.Itoa(int(id))
	return l
}

// FieldOwner is the server-side-apply field manager of every write the operator makes.
const FieldOwner = "paddock-manager"

// StatefulSetName is the name of cluster's broker StatefulSet; also the PDB, ServiceAccount,
// Role and RoleBinding name.
func StatefulSetName(cluster string) string { return cluster + "-broker" }

// HeadlessServiceName is the governing headless Service whose EndpointSlices are the
// registration source.
func HeadlessServiceName(cluster string) string { return cluster + "-brokers" }

// BootstrapServiceName is the Service clients use for their first connection.
func BootstrapServiceName(cluster string) string { return cluster + "-bootstrap" }

// InternalBootstrapServiceName is the ClusterIP bootstrap Service of the Internal listeners
// of a cluster that also has NodePort or LoadBalancer listeners (their bootstrap Service,
// BootstrapServiceName, then carries only theirs).
func InternalBootstrapServiceName(cluster string) string { return cluster + "-bootstrap-internal" }

// BrokerPodName is the StatefulSet pod that runs broker id.
func BrokerPodName(cluster string, id int32) string { return fmt.Sprintf("%s-broker-%d", cluster, id) }

// BrokerServiceName is the per-broker Service that follows broker id's pod.
func BrokerServiceName(cluster string, id int32) string { return BrokerPodName(cluster, id) }

// LeaseName is broker id's heartbeat Lease.
func LeaseName(cluster string, id int32) string { return BrokerPodName(cluster, id) }

// BrokerObjectName is the Broker object that reports broker id's registry row.
func BrokerObjectName(cluster string, id int32) string { return fmt.Sprintf("%s-%d", cluster, id) }

// DataClaimName is the shared ReadWriteMany claim all of cluster's brokers mount.
func DataClaimName(cluster string) string { return cluster + "-data" }

// Secrets of a cluster's security (docs/security.md, "Secrets and who reads them").

// ClusterCASecretName holds the cluster CA the operator makes: its certificate and key
// (operator only).
func ClusterCASecretName(cluster string) string { return cluster + "-cluster-ca" }

// ClusterCACertSecretName holds the cluster CA's trust bundle (ca.crt) clients mount.
func ClusterCACertSecretName(cluster string) string { return cluster + "-cluster-ca-cert" }

// ClientsCASecretName holds the clients CA the operator makes (operator only).
func ClientsCASecretName(cluster string) string { return cluster + "-clients-ca" }

// ClientsCACertSecretName holds the clients CA's trust bundle (ca.crt).
func ClientsCACertSecretName(cluster string) string { return cluster + "-clients-ca-cert" }

// BrokerCertSecretName holds broker id's certificate and key and the trust bundles it needs.
func BrokerCertSecretName(cluster string, id int32) string {
	return fmt.Sprintf("%s-broker-%d-cert", cluster, id)
}

// ScramCredentialsSecretName holds the salted SCRAM credentials of the cluster's KafkaUsers,
// the only credentials the brokers read.
func ScramCredentialsSecretName(cluster string) string { return cluster + "-scram-credentials" }

// Keys of the security Secrets.
const (
	// SecretKeyCACert is a trust bundle: ca.crt.
	SecretKeyCACert = "ca.crt"
	// SecretKeyClientsCACert is the clients CA bundle in a broker's Secret.
	SecretKeyClientsCACert = "clients-ca.crt"
	// SecretKeyNextCert and SecretKeyNextKey hold a renewed CA not yet signing;
	// SecretKeyPreviousCert the CA that signed before, trusted until it expires.
	SecretKeyNextCert     = "next.crt"
	SecretKeyNextKey      = "next.key"
	SecretKeyPreviousCert = "previous.crt"
	// SecretKeyPassword, SecretKeyJAAS, SecretKeyUserCert and SecretKeyUserKey are the keys
	// of a KafkaUser's own Secret.
	SecretKeyPassword = "password"
	SecretKeyJAAS     = "sasl.jaas.config"
	SecretKeyUserCert = "user.crt"
	SecretKeyUserKey  = "user.key"
)

// BrokerPrincipalCommonName is the common name of every broker certificate of cluster: the
// brokers' own identity, a super user (docs/security.md, "Authorization").
func BrokerPrincipalCommonName(cluster string) string { return cluster + "-broker" }

// PrincipalOrganization is the organization of every certificate subject paddock issues.
const PrincipalOrganization = "paddock.dev"

// OperatorPrincipalCommonName is the common name of the operator's own client certificate:
// User:CN=paddock-operator,O=paddock.dev is a super user of every cluster with
// spec.authorization (docs/security.md, "Authorization").
const OperatorPrincipalCommonName = "paddock-operator"
