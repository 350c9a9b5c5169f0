package certificates

import (
	"crypto/x509/pkix"
	"net"
	"slices"
	"strings"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
)

// defaultClusterDomain is the cluster DNS domain the brokers default to (--cluster-domain):
// the long forms of Service names use it. A broker's advertised PodDNS name carries the
// domain it really uses and comes from its registry row.
const defaultClusterDomain = "cluster.local"

// caPolicy is how the operator makes the CA of kind ("cluster" or "clients") for cluster.
func caPolicy(cluster *kafkav1alpha1.KafkaCluster, kind string) pki.CAPolicy {
	return pki.CAPolicy{
		CommonName:   "paddock " + kind + " CA " + cluster.Namespace + "/" + cluster.Name,
		Organization: kafkav1alpha1.PrincipalOrganization,
		Validity:     cluster.Spec.CertificateValidity(),
		RenewBefore:  cluster.Spec.CertificateRenewBefore(),
	}
}

// brokerLeaf is what broker id's certificate is issued for: the brokers' common subject
// (their identity as clients of each other) and every name and address the broker may be
// reached at — its pod's DNS names under the headless Service, the bootstrap and its own
// per-broker Service in every form a client may use, and whatever its registry row says it
// advertises on each listener (its pod IP, its node's address, its load balancer's ingress, a
// template's result).
func brokerLeaf(cluster *kafkav1alpha1.KafkaCluster, id int32) pki.Leaf {
	ns := cluster.Namespace
	var dns []string
	var ips []net.IP
	service := func(name string) {
		dns = append(dns, name, name+"."+ns, name+"."+ns+".svc", name+"."+ns+".svc."+defaultClusterDomain)
	}
	pod := kafkav1alpha1.BrokerPodName(cluster.Name, id)
	service(pod + "." + kafkav1alpha1.HeadlessServiceName(cluster.Name))
	for _, l := range cluster.Spec.Listeners {
		service(cluster.BootstrapServiceOf(l.Name))
	}
	service(kafkav1alpha1.BrokerServiceName(cluster.Name, id))
	for _, row := range cluster.Status.Brokers {
		if row.ID != id {
			continue
		}
		for _, l := range row.Listeners {
			if ip := net.ParseIP(l.Host); ip != nil {
				ips = append(ips, ip)
			} else if validDNSName(l.Host) {
				dns = append(dns, strings.ToLower(l.Host))
			}
		}
	}
	slices.Sort(dns)
	dns = slices.Compact(dns)
	slices.SortFunc(ips, func(a, b net.IP) int { return strings.Compare(a.String(), b.String()) })
	ips = slices.CompactFunc(ips, func(a, b net.IP) bool { return a.Equal(b) })
	return pki.Leaf{
		Subject:  pkix.Name{CommonName: kafkav1alpha1.BrokerPrincipalCommonName(cluster.Name), Organization: []string{kafkav1alpha1.PrincipalOrganization}},
		DNSNames: dns, IPs: ips, Server: true, Client: true,
	}
}

// validDNSName is a host name a certificate may carry: labels of letters, digits and '-',
// not starting or ending with '-', at most 253 characters. What a registry row says is a
// broker's own claim, so nothing else reaches a certificate.
func validDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}
