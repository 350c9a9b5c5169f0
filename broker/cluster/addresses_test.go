package cluster

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/scheme"
	"github.com/paddock-dev/paddock/internal/testkit"
)

func nodeWith(name string, addrs ...corev1.NodeAddress) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func internalIP(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a}
}
func externalIP(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a}
}

func serviceWithNodePort(listener string, nodePort int32) *corev1.Service {
	return &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{
		{Name: "kafka", Port: 9092, NodePort: 30001}, {Name: listener, Port: 9094, NodePort: nodePort},
	}}}
}

func serviceWithIngress(in ...corev1.LoadBalancerIngress) *corev1.Service {
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "external", Port: 9094, NodePort: 30002}}}}
	svc.Status.LoadBalancer.Ingress = in
	return svc
}

func TestAdvertisedAddressRules(t *testing.T) {
	id := Identity{ID: 2, Pod: "c-broker-2", Namespace: "kafka", IP: "10.1.0.7", Node: "n1"}
	spec := func(typ v1alpha1.ListenerType, template string) ListenerSpec {
		l := ListenerSpec{Name: "external", Port: 9094, Type: typ, Template: template}
		if template != "" {
			l.Host = ExpandTemplate(template, id)
		}
		return l
	}
	n1 := nodeWith("n1", internalIP("192.168.0.1"), externalIP("203.0.113.1"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})
	for _, tc := range []struct {
		rule     string
		listener ListenerSpec
		in       addressInputs
		want     string // host:port, or "" when there is none
		why      string // part of the reason when there is none
	}{
		{"an Internal listener advertises its mode's host and the listener port, with nothing read",
			ListenerSpec{Name: "external", Port: 9094, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.0.7"},
			addressInputs{}, "10.1.0.7:9094", ""},
		{"a NodePort listener advertises the node's ExternalIP and the broker's own nodePort",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{service: serviceWithNodePort("external", 31094), node: n1}, "203.0.113.1:31094", ""},
		{"a node without an ExternalIP is advertised at its InternalIP",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{service: serviceWithNodePort("external", 31094), node: nodeWith("n1", internalIP("192.168.0.1"))},
			"192.168.0.1:31094", ""},
		{"no address before the Node is read",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{service: serviceWithNodePort("external", 31094)}, "", "node n1 not read yet"},
		{"no address on a node that reports neither IP",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{service: serviceWithNodePort("external", 31094), node: nodeWith("n1", corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"})},
			"", "no ExternalIP or InternalIP"},
		{"no address before the Service is read",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{node: n1}, "", "service c-broker-2 not read yet"},
		{"no address while the Service has no nodePort for the listener's port",
			spec(v1alpha1.ListenerNodePort, ""), addressInputs{service: serviceWithNodePort("other", 31094), node: n1}, "", "no nodePort for port external"},
		{"a template without {nodeAddress} replaces the host, the nodePort stays, and no Node is needed",
			spec(v1alpha1.ListenerNodePort, "kafka-{id}.{namespace}.example.com"), addressInputs{service: serviceWithNodePort("external", 31094)},
			"kafka-2.kafka.example.com:31094", ""},
		{"a fixed template is one host for every broker (a port forward of every nodePort)",
			spec(v1alpha1.ListenerNodePort, "127.0.0.1"), addressInputs{service: serviceWithNodePort("external", 31094)}, "127.0.0.1:31094", ""},
		{"{nodeAddress} in a template is the node's address",
			spec(v1alpha1.ListenerNodePort, "{nodeAddress}.nip.io"), addressInputs{service: serviceWithNodePort("external", 31094), node: n1},
			"203.0.113.1.nip.io:31094", ""},
		{"{node} and {pod} come from the pod identity",
			spec(v1alpha1.ListenerInternal, "{pod}.{node}.example.com"), addressInputs{}, "c-broker-2.n1.example.com:9094", ""},
		{"a LoadBalancer listener advertises its own load balancer's ingress IP and the listener port",
			spec(v1alpha1.ListenerLoadBalancer, ""), addressInputs{service: serviceWithIngress(corev1.LoadBalancerIngress{IP: "198.51.100.9"})}, "198.51.100.9:9094", ""},
		{"an ingress without an IP is advertised at its hostname",
			spec(v1alpha1.ListenerLoadBalancer, ""), addressInputs{service: serviceWithIngress(corev1.LoadBalancerIngress{Hostname: "lb-2.example.com"})}, "lb-2.example.com:9094", ""},
		{"no address while the load balancer has no ingress",
			spec(v1alpha1.ListenerLoadBalancer, ""), addressInputs{service: serviceWithIngress()}, "", "no ingress address yet"},
		{"a template on a LoadBalancer listener replaces the ingress host",
			spec(v1alpha1.ListenerLoadBalancer, "kafka-{id}.example.com"), addressInputs{service: serviceWithIngress()}, "kafka-2.example.com:9094", ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			addr, why := resolveAddress(tc.listener, tc.listener.Port, "c-broker-2", "n1", tc.in)
			got := ""
			if why == "" {
				got = net.JoinHostPort(addr.Host, strconv.Itoa(int(addr.Port)))
				if addr.Name != "external" {
					t.Errorf("address named %q", addr.Name)
				}
			}
			if got != tc.want || !strings.Contains(why, tc.why) {
				t.Fatalf("address %q (why %q), want %q (why %q)", got, why, tc.want, tc.why)
			}
		})
	}
}

// The informers: a NodePort broker advertises its node's address and its own Service's
// nodePort as the API has them, follows a change of the node's addresses, and a broker
// incarnation on another node advertises that node with the same nodePort; a LoadBalancer
// broker advertises its own Service's ingress once the load balancer has one.
func TestWatchAddressesFollowsTheServiceAndTheNode(t *testing.T) {
	c := apiServer(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for _, n := range []*corev1.Node{
		nodeWith("watch-n1-"+ns, internalIP("192.168.7.1")),
		nodeWith("watch-n2-"+ns, internalIP("192.168.7.2"), externalIP("203.0.113.72")),
	} {
		status := n.Status
		if err := c.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
		n.Status = status
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), n) })
	}
	svc := func(name string, typ corev1.ServiceType) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.ServiceSpec{
			Type: typ, Selector: map[string]string{"pod": name},
			Ports: []corev1.ServicePort{{Name: "kafka", Port: 9092}, {Name: "external", Port: 9094}},
		}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	own, other := svc("c-broker-0", corev1.ServiceTypeNodePort), svc("c-broker-1", corev1.ServiceTypeNodePort)
	nodePortOf := func(s *corev1.Service) int32 { return s.Spec.Ports[1].NodePort }
	if nodePortOf(own) == 0 || nodePortOf(own) == nodePortOf(other) {
		t.Fatalf("apiserver gave nodePorts %d and %d", nodePortOf(own), nodePortOf(other))
	}

	watch := func(t *testing.T, node string, typ v1alpha1.ListenerType) *Addresses {
		addrs := NewAddresses("c", []ListenerSpec{
			{Name: "kafka", Port: 9092, Type: v1alpha1.ListenerInternal, Mode: v1alpha1.AdvertisePodIP, Host: "10.1.0.5"},
			{Name: "external", Port: 9094, Type: typ},
		}, Identity{ID: 0, Pod: "c-broker-0", Namespace: ns, IP: "10.1.0.5", Node: node})
		s, err := scheme.New()
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		if err := WatchAddresses(wctx, testEnv.Get(t).Config, s, addrs, testr.New(t)); err != nil {
			t.Fatal(err)
		}
		return addrs
	}
	expect := func(t *testing.T, addrs *Addresses, want string) {
		t.Helper()
		testkit.Eventually(t, "external advertised at "+want, func() bool {
			a, ok := addrs.Get("external")
			return ok && net.JoinHostPort(a.Host, strconv.Itoa(int(a.Port))) == want
		})
		if a, ok := addrs.Get("kafka"); !ok || a.Host != "10.1.0.5" || a.Port != 9092 {
			t.Errorf("internal listener advertised at %+v, want the pod address 10.1.0.5:9092", a)
		}
	}
	port := strconv.Itoa(int(nodePortOf(own)))

	t.Run("NodePort: the node's InternalIP, then its ExternalIP once it has one", func(t *testing.T) {
		addrs := watch(t, "watch-n1-"+ns, v1alpha1.ListenerNodePort)
		expect(t, addrs, "192.168.7.1:"+port)
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: "watch-n1-" + ns}, n); err != nil {
			t.Fatal(err)
		}
		n.Status.Addresses = append(n.Status.Addresses, externalIP("203.0.113.71"))
		if err := c.Status().Update(ctx, n); err != nil {
			t.Fatal(err)
		}
		expect(t, addrs, "203.0.113.71:"+port)
	})
	t.Run("NodePort: a broker moved to another node advertises the new node, same nodePort", func(t *testing.T) {
		expect(t, watch(t, "watch-n2-"+ns, v1alpha1.ListenerNodePort), "203.0.113.72:"+port)
	})
	t.Run("LoadBalancer: no address until its own Service's load balancer has an ingress", func(t *testing.T) {
		lbNS := newNamespace(t)
		ownLB := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "c-broker-0", Namespace: lbNS}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "external", Port: 9094}},
		}}
		if err := c.Create(ctx, ownLB); err != nil {
			t.Fatal(err)
		}
		addrs := NewAddresses("c", []ListenerSpec{{Name: "external", Port: 9094, Type: v1alpha1.ListenerLoadBalancer}},
			Identity{ID: 0, Pod: "c-broker-0", Namespace: lbNS, Node: "watch-n1-" + ns})
		s, _ := scheme.New()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		if err := WatchAddresses(wctx, testEnv.Get(t).Config, s, addrs, testr.New(t)); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the missing ingress reported", func() bool {
			m := addrs.Missing()
			return len(m) == 1 && strings.Contains(m[0], "no ingress address yet")
		})
		ownLB.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.20"}}
		if err := c.Status().Update(ctx, ownLB); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the ingress advertised", func() bool {
			a, ok := addrs.Get("external")
			return ok && a.Host == "198.51.100.20" && a.Port == 9094
		})
	})
}
