package devcluster

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// The service proxy plays kube-proxy (in its old userspace mode) for the whole environment —
// every node shares the one private network, so one proxy serves them all. It listens where a
// cluster's Services are reachable and forwards each connection to a ready endpoint of the
// Service port, chosen at connection time from the EndpointSlices:
//
//   - a ClusterIP Service port on <clusterIP>:<port> inside the private network, whose
//     loopback answers for the ClusterIP range (SetupPrivateNetwork);
//   - a nodePort on <node InternalIP>:<nodePort> for every running node (a stopped node's
//     nodePorts go away with it, as its kube-proxy would), and on <host address>:<nodePort>
//     both in the host's network (through the host link) and inside the private network, so
//     the same address works at the host terminal and in .paddock/dev/shell;
//   - the apiserver on <host address>:<host apiserver port>, on both sides too: the
//     kubeconfig that paddock dev writes names that address.
//
// Load balancers are not played: a LoadBalancer Service gets its nodePorts, never an ingress.

// proxyTarget is where a proxy listener forwards: a fixed address, or a Service port by name.
type proxyTarget struct {
	fixed                    string
	namespace, service, port string
}

// listenKey is one address the proxy listens on; host says on which side of the private
// network.
type listenKey struct {
	host bool
	addr string
}

// desiredListeners is every address the proxy should listen on for services, given the
// running nodes' IPs and the host address: the rule above, without the apiserver forward
// (which Start binds once).
func desiredListeners(services []*corev1.Service, nodeIPs []string, hostAddr string) map[listenKey]proxyTarget {
	out := map[listenKey]proxyTarget{}
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			target := proxyTarget{namespace: svc.Namespace, service: svc.Name, port: p.Name}
			if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
				out[listenKey{addr: net.JoinHostPort(ip, strconv.Itoa(int(p.Port)))}] = target
			}
			if p.NodePort == 0 {
				continue
			}
			nodePort := strconv.Itoa(int(p.NodePort))
			for _, ip := range nodeIPs {
				out[listenKey{addr: net.JoinHostPort(ip, nodePort)}] = target
			}
			out[listenKey{addr: net.JoinHostPort(hostAddr, nodePort)}] = target
			out[listenKey{host: true, addr: net.JoinHostPort(hostAddr, nodePort)}] = target
		}
	}
	return out
}

// readyEndpoints are the addresses a connection to portName of a Service may go to: its
// slices' ready endpoints, or, when none is ready, the serving ones that are terminating (as
// kube-proxy falls back to them). Duplicates across slices are listed once, sorted.
func readyEndpoints(endpointSlices []*discoveryv1.EndpointSlice, portName string) []string {
	var ready, terminating []string
	for _, s := range endpointSlices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		var port int32
		for _, p := range s.Ports {
			if p.Port != nil && (p.Name == nil && portName == "" || p.Name != nil && *p.Name == portName) {
				port = *p.Port
			}
		}
		if port == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			c := ep.Conditions
			isReady := c.Ready == nil || *c.Ready
			isServing := c.Serving == nil || *c.Serving
			isTerminating := c.Terminating != nil && *c.Terminating
			for _, a := range ep.Addresses {
				addr := net.JoinHostPort(a, strconv.Itoa(int(port)))
				switch {
				case isReady:
					ready = append(ready, addr)
				case isServing && isTerminating:
					terminating = append(terminating, addr)
				}
			}
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	slices.Sort(ready)
	return slices.Compact(ready)
}

// serviceProxy is the running proxy. Its listener set is reconciled by one goroutine (run);
// connections are served by their own goroutines.
type serviceProxy struct {
	hostAddr string
	nodeIPs  func() []string // InternalIPs of the running nodes
	log      logr.Logger

	factory   informers.SharedInformerFactory
	services  corelisters.ServiceLister
	endpoints discoverylisters.EndpointSliceLister
	dirty     chan struct{} // capacity 1: a pending resync
	next      atomic.Uint64 // rotates the first endpoint tried

	mu        sync.Mutex
	listeners map[listenKey]*proxyListener // guarded by mu
	failed    map[listenKey]string         // guarded by mu: the last bind error, logged once
	closed    bool                         // guarded by mu
}

// proxyListener is one bound address and the connections it accepted.
type proxyListener struct {
	target proxyTarget
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{} // guarded by mu
}

func newServiceProxy(client kubernetes.Interface, hostAddr string, nodeIPs func() []string, log logr.Logger) *serviceProxy {
	factory := informers.NewSharedInformerFactory(client, 0)
	p := &serviceProxy{
		hostAddr:  hostAddr,
		nodeIPs:   nodeIPs,
		log:       log,
		factory:   factory,
		services:  factory.Core().V1().Services().Lister(),
		endpoints: factory.Discovery().V1().EndpointSlices().Lister(),
		dirty:     make(chan struct{}, 1),
		listeners: map[listenKey]*proxyListener{},
		failed:    map[listenKey]string{},
	}
	mark := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { p.resync() },
		UpdateFunc: func(any, any) { p.resync() },
		DeleteFunc: func(any) { p.resync() },
	}
	// Only Service changes move listeners; endpoints are read per connection.
	_, _ = factory.Core().V1().Services().Informer().AddEventHandler(mark)
	factory.Discovery().V1().EndpointSlices().Informer()
	return p
}

// forward binds a fixed forward on both sides of the private network (the apiserver's).
func (p *serviceProxy) forward(addr, to string) error {
	for _, host := range []bool{false, true} {
		if err := p.bind(listenKey{host: host, addr: addr}, proxyTarget{fixed: to}); err != nil {
			return err
		}
	}
	return nil
}

// run starts the informers and keeps the listeners in line with the Services until ctx
// ends, then closes every listener and connection. A bind that failed (a host port in use)
// is retried every few seconds.
func (p *serviceProxy) run(ctx context.Context) {
	p.factory.Start(ctx.Done())
	p.factory.WaitForCacheSync(ctx.Done())
	retry := time.NewTicker(5 * time.Second)
	defer retry.Stop()
	for {
		p.reconcile()
		select {
		case <-ctx.Done():
			p.factory.Shutdown()
			p.close()
			return
		case <-p.dirty:
		case <-retry.C:
		}
	}
}

// resync asks for a reconcile: a Service changed or a node started or stopped.
func (p *serviceProxy) resync() {
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

func (p *serviceProxy) reconcile() {
	services, err := p.services.List(labels.Everything())
	if err != nil {
		p.log.Error(err, "List services")
		return
	}
	want := desiredListeners(services, p.nodeIPs(), p.hostAddr)
	p.mu.Lock()
	var stale []*proxyListener
	for key, l := range p.listeners {
		if l.target.fixed != "" {
			continue
		}
		if t, ok := want[key]; !ok || t != l.target {
			stale = append(stale, l)
			delete(p.listeners, key)
		}
	}
	p.mu.Unlock()
	for _, l := range stale {
		l.close()
	}
	for key, target := range want {
		p.mu.Lock()
		_, bound := p.listeners[key]
		p.mu.Unlock()
		if !bound {
			_ = p.bind(key, target) // logged; retried at the next reconcile
		}
	}
}

// bind listens on key and serves it.
func (p *serviceProxy) bind(key listenKey, target proxyTarget) error {
	var ln net.Listener
	var err error
	if key.host {
		ln, err = HostListen(key.addr)
	} else {
		ln, err = net.Listen("tcp", key.addr)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.failed[key] != err.Error() {
			p.failed[key] = err.Error()
			p.log.Error(err, "Cannot listen for a service; retrying", "address", key.addr, "hostNetwork", key.host,
				"service", target.namespace+"/"+target.service, "port", target.port)
		}
		return err
	}
	if p.closed {
		_ = ln.Close()
		return errors.New("proxy stopped")
	}
	delete(p.failed, key)
	l := &proxyListener{target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	p.listeners[key] = l
	p.log.V(1).Info("Listening for a service", "address", key.addr, "hostNetwork", key.host, "service", target.service, "port", target.port)
	go p.accept(l)
	return nil
}

func (p *serviceProxy) accept(l *proxyListener) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		if !l.track(c) {
			_ = c.Close()
			return
		}
		go func() {
			defer l.untrack(c)
			p.serve(c, l.target)
		}()
	}
}

// serve connects c to one of target's endpoints, trying them in turn, and copies both ways
// until either side is done.
func (p *serviceProxy) serve(c net.Conn, target proxyTarget) {
	defer func() { _ = c.Close() }()
	candidates := []string{target.fixed}
	if target.fixed == "" {
		sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: target.service})
		eps, err := p.endpoints.EndpointSlices(target.namespace).List(sel)
		if err != nil {
			return
		}
		candidates = readyEndpoints(eps, target.port)
		if len(candidates) == 0 {
			return // no ready endpoint: the connection is refused, as kube-proxy rejects it
		}
		start := int(p.next.Add(1) % uint64(len(candidates)))
		candidates = append(candidates[start:], candidates[:start]...)
	}
	var upstream net.Conn
	for _, addr := range candidates {
		var err error
		if upstream, err = net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
			break
		}
	}
	if upstream == nil {
		return
	}
	defer func() { _ = upstream.Close() }()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, c)
	go pipe(c, upstream)
	<-done
	<-done
}

func (l *proxyListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conns == nil {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *proxyListener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// close stops accepting and cuts the connections it accepted (a removed nodePort, a stopped
// node).
func (l *proxyListener) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		_ = c.Close()
	}
	l.conns = nil
}

func (p *serviceProxy) close() {
	p.mu.Lock()
	p.closed = true
	ls := p.listeners
	p.listeners = map[listenKey]*proxyListener{}
	p.mu.Unlock()
	for _, l := range ls {
		l.close()
	}
}

// hostPorts lists the addresses the proxy currently listens on in the host's network, sorted.
func (p *serviceProxy) hostPorts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for key := range p.listeners {
		if key.host {
			out = append(out, key.addr)
		}
	}
	slices.Sort(out)
	return out
}
