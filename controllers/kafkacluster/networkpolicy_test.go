package kafkacluster

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The NetworkPolicy's rules, read the way a network plugin reads them (the Kubernetes
// NetworkPolicy semantics, for ingress): a connection to a selected pod is admitted when it
// comes from the pod's own node, or when some rule lists its port (or no ports) and a peer
// that matches its source (or no peers). paddock dev does not enforce NetworkPolicies, so
// these rules are what pins them (docs/security.md, "The NetworkPolicy").

// source is where a connection comes from.
type source struct {
	what string
	// node is true for the selected pod's own node (kubelet probes).
	node bool
	// namespace and its labels, pod labels: a pod's connection. Empty namespace: an address
	// outside the cluster's pods, ip.
	namespace       string
	namespaceLabels map[string]string
	podLabels       map[string]string
	ip              string
}

// admits reports whether np lets src reach port on a pod in namespace podNamespace.
func admits(t *testing.T, np *networkingv1.NetworkPolicy, podNamespace string, src source, port int32) bool {
	t.Helper()
	if src.node {
		return true
	}
	for _, rule := range np.Spec.Ingress {
		if !portListed(rule.Ports, port) {
			continue
		}
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peerMatches(t, peer, podNamespace, src) {
				return true
			}
		}
	}
	return false
}

func portListed(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || p.Port.IntValue() == int(port) {
			return true
		}
	}
	return false
}

func peerMatches(t *testing.T, peer networkingv1.NetworkPolicyPeer, podNamespace string, src source) bool {
	t.Helper()
	if peer.IPBlock != nil {
		if src.ip == "" {
			return false
		}
		addr := netip.MustParseAddr(src.ip)
		if !netip.MustParsePrefix(peer.IPBlock.CIDR).Contains(addr) {
			return false
		}
		for _, except := range peer.IPBlock.Except {
			if netip.MustParsePrefix(except).Contains(addr) {
				return false
			}
		}
		return true
	}
	if src.namespace == "" {
		return false // selectors match pods only
	}
	switch {
	case peer.NamespaceSelector == nil && src.namespace != podNamespace:
		return false // a pod selector alone selects in the policy's namespace
	case peer.NamespaceSelector != nil && !selects(t, peer.NamespaceSelector, src.namespaceLabels):
		return false
	}
	return peer.PodSelector == nil || selects(t, peer.PodSelector, src.podLabels)
}

func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labels.Set(set))
}

func TestTheNetworkPolicyAdmitsEachListenerFromWhereTheSpecSays(t *testing.T) {
	const ns = "kafka"
	nsLabels := func(name string) map[string]string { return map[string]string{"kubernetes.io/metadata.name": name} }
	var (
		peerBroker  = source{what: "another broker of the cluster", namespace: ns, namespaceLabels: nsLabels(ns), podLabels: podSelector(goldenCluster())}
		node        = source{what: "the pod's node (kubelet probes)", node: true}
		sameNSApp   = source{what: "an application pod in the cluster's namespace", namespace: ns, namespaceLabels: nsLabels(ns), podLabels: map[string]string{"app": "orders"}}
		otherNSApp  = source{what: "an application pod in another namespace", namespace: "shop", namespaceLabels: nsLabels("shop"), podLabels: map[string]string{"app": "orders"}}
		thirdNSApp  = source{what: "a pod of a third namespace", namespace: "dev", namespaceLabels: nsLabels("dev"), podLabels: map[string]string{"app": "x"}}
		prometheus  = source{what: "Prometheus in monitoring", namespace: "monitoring", namespaceLabels: nsLabels("monitoring"), podLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}}
		outsider    = source{what: "an address outside the cluster", ip: "198.51.100.9"}
		allowedNet  = source{what: "an address in the LoadBalancer listener's allowFrom", ip: "203.0.113.20"}
		otherBroker = source{what: "a broker of another cluster in the namespace", namespace: ns, namespaceLabels: nsLabels(ns),
			podLabels: map[string]string{kafkav1alpha1.LabelName: kafkav1alpha1.LabelNameValue, kafkav1alpha1.LabelCluster: "other"}}
	)
	type want struct {
		src  source
		port int32
		ok   bool
	}
	health := kafkav1alpha1.HealthPort
	for _, tc := range []struct {
		name    string
		cluster *kafkav1alpha1.KafkaCluster
		wants   []want
	}{
		{"defaults: an internal listener for every pod, the health port for the node and the brokers", goldenCluster(), []want{
			{peerBroker, 9092, true}, {peerBroker, health, true},
			{sameNSApp, 9092, true}, {otherNSApp, 9092, true},
			{outsider, 9092, false},
			{node, health, true}, {sameNSApp, health, false}, {otherNSApp, health, false}, {prometheus, health, false},
			{otherBroker, health, false},
			{sameNSApp, 9999, false},
		}},
		{"an external listener admits any source by default, its internal one pods only", goldenExternalCluster(), []want{
			{outsider, 9094, true}, {otherNSApp, 9094, true},
			{outsider, 9092, false}, {otherNSApp, 9092, true},
			{outsider, health, false}, {node, health, true},
		}},
		{"allowFrom and healthFrom narrow and widen what they name", goldenLoadBalancerCluster(), []want{
			{otherNSApp, 9092, true}, {sameNSApp, 9092, false}, {thirdNSApp, 9092, false},
			{allowedNet, 9094, true}, {outsider, 9094, false}, {otherNSApp, 9094, false},
			{prometheus, health, true}, {prometheus, 9092, false}, {otherNSApp, health, false},
			{peerBroker, 9094, true}, {peerBroker, health, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := desiredNetworkPolicy(tc.cluster)
			if np == nil {
				t.Fatal("no NetworkPolicy for a cluster that did not opt out")
			}
			if !selects(t, &np.Spec.PodSelector, podSelector(tc.cluster)) || selects(t, &np.Spec.PodSelector, otherBroker.podLabels) {
				t.Fatalf("the policy selects %v: want exactly this cluster's broker pods", np.Spec.PodSelector)
			}
			if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
				t.Errorf("policyTypes %v, want [Ingress]: the brokers' own connections (to the API server) are not restricted", np.Spec.PolicyTypes)
			}
			for _, w := range tc.wants {
				if got := admits(t, np, ns, w.src, w.port); got != w.ok {
					t.Errorf("%s → port %d: admitted %v, want %v", w.src.what, w.port, got, w.ok)
				}
			}
		})
	}
}

func TestAClusterThatOptsOutHasNoNetworkPolicy(t *testing.T) {
	c := goldenCluster()
	c.Spec.NetworkPolicy.Enabled = ptr.To(false)
	if np := desiredNetworkPolicy(c); np != nil {
		t.Fatalf("want no NetworkPolicy with networkPolicy.enabled false, got %s", np.Name)
	}
}

func TestExternalServicesCarryOnlyTheExternalListeners(t *testing.T) {
	ext := goldenExternalCluster()
	for _, svc := range append(desiredBrokerServices(ext), desiredBootstrapService(ext)) {
		if svc.Spec.Type != corev1.ServiceTypeNodePort || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "external" {
			t.Errorf("%s: type %s ports %v, want a NodePort Service of the external listener only", svc.Name, svc.Spec.Type, svc.Spec.Ports)
		}
	}
	internal := desiredInternalBootstrapService(ext)
	if internal == nil || internal.Spec.Type != corev1.ServiceTypeClusterIP || len(internal.Spec.Ports) != 1 || internal.Spec.Ports[0].Name != "kafka" {
		t.Fatalf("want a ClusterIP bootstrap Service of the internal listener, got %+v", internal)
	}
	if got := desiredInternalBootstrapService(goldenCluster()); got != nil {
		t.Errorf("a cluster of internal listeners only needs no second bootstrap Service, got %s", got.Name)
	}
	if ports := desiredBootstrapService(goldenCluster()).Spec.Ports; len(ports) != 1 || ports[0].Name != "kafka" {
		t.Errorf("an internal-only cluster's bootstrap Service: ports %v", ports)
	}
}
