package devcluster

import (
	"bufio"
	"context"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestServiceProxyListensWhereAClusterWould(t *testing.T) {
	svc := func(name string, typ corev1.ServiceType, clusterIP string, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.ServiceSpec{Type: typ, ClusterIP: clusterIP, Ports: ports}}
	}
	target := func(name, port string) proxyTarget { return proxyTarget{namespace: "ns", service: name, port: port} }
	for _, tc := range []struct {
		rule    string
		service *corev1.Service
		want    map[listenKey]proxyTarget
	}{
		{"a ClusterIP Service port is listened on at its ClusterIP inside the private network",
			svc("a", corev1.ServiceTypeClusterIP, "10.96.0.10", corev1.ServicePort{Name: "kafka", Port: 9092}),
			map[listenKey]proxyTarget{{addr: "10.96.0.10:9092"}: target("a", "kafka")}},
		{"a headless Service has nothing to listen on",
			svc("b", corev1.ServiceTypeClusterIP, corev1.ClusterIPNone, corev1.ServicePort{Name: "kafka", Port: 9092}), map[listenKey]proxyTarget{}},
		{"a nodePort is listened on at every running node's IP, and at the host address on both sides",
			svc("c", corev1.ServiceTypeNodePort, "10.96.0.11", corev1.ServicePort{Name: "external", Port: 9094, NodePort: 31094}),
			map[listenKey]proxyTarget{
				{addr: "10.96.0.11:9094"}:  target("c", "external"),
				{addr: "198.18.1.1:31094"}: target("c", "external"), {addr: "198.18.3.1:31094"}: target("c", "external"),
				{addr: "127.0.0.1:31094"}: target("c", "external"), {host: true, addr: "127.0.0.1:31094"}: target("c", "external"),
			}},
		{"UDP ports and ExternalName Services are not proxied",
			svc("d", corev1.ServiceTypeClusterIP, "10.96.0.12", corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
			map[listenKey]proxyTarget{}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got := desiredListeners([]*corev1.Service{tc.service}, []string{"198.18.1.1", "198.18.3.1"}, "127.0.0.1")
			if len(got) != len(tc.want) {
				t.Fatalf("listeners %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Fatalf("listeners %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestServiceProxyForwardsToReadyEndpoints(t *testing.T) {
	slice := func(port string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Endpoints: eps,
			Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port), Port: ptr.To[int32](9094)}, {Name: ptr.To("other"), Port: ptr.To[int32](1)}}}
	}
	ep := func(ip string, ready, serving, terminating bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)}}
	}
	for _, tc := range []struct {
		rule   string
		slices []*discoveryv1.EndpointSlice
		want   []string
	}{
		{"ready endpoints at the port of the Service port's name",
			[]*discoveryv1.EndpointSlice{slice("external", ep("198.18.1.2", true, true, false), ep("198.18.2.2", false, false, false))},
			[]string{"198.18.1.2:9094"}},
		{"an endpoint listed by two slices is tried once",
			[]*discoveryv1.EndpointSlice{slice("external", ep("198.18.1.2", true, true, false)), slice("external", ep("198.18.1.2", true, true, false))},
			[]string{"198.18.1.2:9094"}},
		{"with none ready, the serving terminating ones, as kube-proxy falls back",
			[]*discoveryv1.EndpointSlice{slice("external", ep("198.18.1.2", false, true, true), ep("198.18.2.2", false, false, true))},
			[]string{"198.18.1.2:9094"}},
		{"a slice without the port has nothing for it",
			[]*discoveryv1.EndpointSlice{slice("elsewhere", ep("198.18.1.2", true, true, false))}, nil},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			if got := readyEndpoints(tc.slices, "external"); !slices.Equal(got, tc.want) {
				t.Fatalf("endpoints %v, want %v", got, tc.want)
			}
		})
	}
}

// The host link reaches the host's network, which the private network cannot: a listener
// made through it is unreachable from here and reachable through HostDial, and HostCommand
// runs in the host's network namespace.
func TestHostLinkReachesTheHostNetwork(t *testing.T) {
	addr := net.JoinHostPort(TestHostAddress(), "16444")
	ln, err := HostListen(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatalf("%s answered inside the private network", addr)
	}
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		_, _ = c.Write([]byte("hello from the host side\n"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := HostDial(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "hello from the host side\n" {
		t.Fatalf("read %q, %v", line, err)
	}

	ours, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	out, err := HostCommand(ctx, os.Environ(), "readlink", "/proc/self/ns/net")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if theirs := strings.TrimSpace(string(out)); theirs == "" || theirs == ours {
		t.Fatalf("host command ran in network namespace %q, ours is %q", theirs, ours)
	}
	if _, err := HostCommand(ctx, os.Environ(), "false"); err == nil {
		t.Fatal("a failing host command reported success")
	}
}
