package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Where a broker tells clients to reach it, per listener (docs/wire.md, "Addresses"):
//
//   - Internal: the pod's DNS name (PodDNS) or IP (PodIP) and the listener port;
//   - NodePort: the address of the node the broker runs on — its ExternalIP, else its
//     InternalIP — and the nodePort of the listener's port on the broker's own Service
//     <cluster>-broker-<id>, which follows the pod wherever it is scheduled;
//   - LoadBalancer: the first ingress address (IP, else hostname) of that Service's load
//     balancer and the listener port;
//   - with an advertisedHostTemplate, the template's host instead (its {nodeAddress} is the
//     node's address as above), and the port the type gives.
//
// The Service and the Node come from informers (WatchAddresses), never from a request. Until
// they say — no nodePort, no ingress, a node without addresses, or not read yet — the broker
// has no address on that listener: it leaves itself out of that listener's answers, does not
// announce the listener on its Lease (so no other broker names it there either), and /readyz
// fails, naming the listener.

// addressInputs is what the external addresses are computed from. Nil means not read yet.
type addressInputs struct {
	service *corev1.Service // the broker's own Service
	node    *corev1.Node    // the node it runs on
}

// resolveAddress is the rule above for one listener bound on port (the configured port, or
// the one bound for port 0): the address, or why there is none.
func resolveAddress(l ListenerSpec, port int32, serviceName, nodeName string, in addressInputs) (v1alpha1.ListenerAddress, string) {
	addr := v1alpha1.ListenerAddress{Name: l.Name, Host: l.Host, Port: port}
	if l.NeedsNodeAddress() {
		host, why := nodeAddress(in.node, nodeName)
		if why != "" {
			return v1alpha1.ListenerAddress{}, why
		}
		if l.Template == "" {
			addr.Host = host
		} else {
			addr.Host = strings.ReplaceAll(l.Host, v1alpha1.PlaceholderNodeAddress, host)
		}
	}
	switch l.Type {
	case v1alpha1.ListenerNodePort:
		p, why := nodePort(in.service, serviceName, l.Name)
		if why != "" {
			return v1alpha1.ListenerAddress{}, why
		}
		addr.Port = p
	case v1alpha1.ListenerLoadBalancer:
		if addr.Host == "" {
			host, why := ingressHost(in.service, serviceName)
			if why != "" {
				return v1alpha1.ListenerAddress{}, why
			}
			addr.Host = host
		}
	}
	return addr, ""
}

// nodeAddress is the node's ExternalIP, else its InternalIP.
func nodeAddress(node *corev1.Node, name string) (string, string) {
	if node == nil {
		return "", fmt.Sprintf("node %s not read yet", name)
	}
	for _, t := range []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP} {
		for _, a := range node.Status.Addresses {
			if a.Type == t && a.Address != "" {
				return a.Address, ""
			}
		}
	}
	return "", fmt.Sprintf("node %s has no ExternalIP or InternalIP", name)
}

// nodePort is the nodePort of the Service port named listener.
func nodePort(svc *corev1.Service, name, listener string) (int32, string) {
	if svc == nil {
		return 0, fmt.Sprintf("service %s not read yet", name)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == listener && p.NodePort != 0 {
			return p.NodePort, ""
		}
	}
	return 0, fmt.Sprintf("service %s has no nodePort for port %s", name, listener)
}

// ingressHost is the first ingress address of the Service's load balancer.
func ingressHost(svc *corev1.Service, name string) (string, string) {
	if svc == nil {
		return "", fmt.Sprintf("service %s not read yet", name)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IP != "" {
			return in.IP, ""
		}
		if in.Hostname != "" {
			return in.Hostname, ""
		}
	}
	return "", fmt.Sprintf("the load balancer of service %s has no ingress address yet", name)
}

// Addresses is where this broker is reachable on each of its listeners now. Writers (the
// broker binding its listeners, the address informers) hold mu and publish a new immutable
// set; readers — every request, every heartbeat, /readyz — load it without a lock.
type Addresses struct {
	listeners   []ListenerSpec
	namespace   string
	serviceName string
	nodeName    string

	mu     sync.Mutex
	ports  []int32       // guarded by mu: the port each listener is bound on (configured until bound)
	inputs addressInputs // guarded by mu

	cur atomic.Pointer[addressSet]
}

// addressSet is one published reading, in listener order.
type addressSet struct {
	addrs   []v1alpha1.ListenerAddress // known ones only
	missing []string                   // "<listener>: <why>" for the others
}

// NewAddresses computes the addresses of broker id of cluster on listeners from the flags and
// the pod identity; the external ones stay unknown until WatchAddresses reads the Service and
// the Node.
func NewAddresses(cluster string, listeners []ListenerSpec, id Identity) *Addresses {
	a := &Addresses{
		listeners:   slices.Clone(listeners),
		namespace:   id.Namespace,
		serviceName: v1alpha1.BrokerServiceName(cluster, id.ID),
		nodeName:    id.Node,
	}
	for _, l := range listeners {
		a.ports = append(a.ports, l.Port)
	}
	a.publishLocked()
	return a
}

// Get is the address on listener name; false while there is none.
func (a *Addresses) Get(name string) (v1alpha1.ListenerAddress, bool) {
	for _, addr := range a.cur.Load().addrs {
		if addr.Name == name {
			return addr, true
		}
	}
	return v1alpha1.ListenerAddress{}, false
}

// Known lists the listeners that have an address, in configuration order: what the Lease
// announces.
func (a *Addresses) Known() []v1alpha1.ListenerAddress { return a.cur.Load().addrs }

// Missing says, per listener without an address, why ("external: node n1 not read yet").
func (a *Addresses) Missing() []string { return a.cur.Load().missing }

// NeedsWatch reports whether any listener's address depends on the Service or the Node.
func (a *Addresses) NeedsWatch() bool {
	return slices.ContainsFunc(a.listeners, func(l ListenerSpec) bool { return !l.Static() })
}

// needsNode reports whether any listener's address depends on the Node.
func (a *Addresses) needsNode() bool {
	return slices.ContainsFunc(a.listeners, ListenerSpec.NeedsNodeAddress)
}

// Bound records the port listener i (in configuration order) was bound on, for listeners
// configured with port 0.
func (a *Addresses) Bound(i int, port int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ports[i] = port
	a.publishLocked()
}

// Observe replaces what the external addresses are computed from: the broker's own Service
// and the Node it runs on, nil when not read (yet). WatchAddresses calls it at every change.
func (a *Addresses) Observe(service *corev1.Service, node *corev1.Node) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.inputs = addressInputs{service: service, node: node}
	a.publishLocked()
}

func (a *Addresses) publishLocked() {
	s := &addressSet{}
	for i, l := range a.listeners {
		addr, why := resolveAddress(l, a.ports[i], a.serviceName, a.nodeName, a.inputs)
		if why != "" {
			s.missing = append(s.missing, l.Name+": "+why)
			continue
		}
		s.addrs = append(s.addrs, addr)
	}
	a.cur.Store(s)
}

// WatchAddresses runs informers on the broker's own Service and, when a listener needs it,
// its Node, and feeds every change to addrs until ctx ends. It returns once the informers
// are set up; the first reading arrives when they sync. Reading the Node needs the
// cluster-scoped grant the operator makes for clusters with such a listener (a ClusterRole
// binding; a namespaced Role cannot grant Nodes).
func WatchAddresses(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, addrs *Addresses, log logr.Logger) error {
	byObject, err := addrs.watched()
	if err != nil {
		return err
	}
	informers, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{addrs.namespace: {}},
		ByObject:          byObject,
	})
	if err != nil {
		return fmt.Errorf("create address informers: %w", err)
	}
	dirty := make(chan struct{}, 1)
	if err := markDirtyOnEvents(ctx, informers, slices.Collect(maps.Keys(byObject)), dirty); err != nil {
		return err
	}
	go func() {
		if err := informers.Start(ctx); err != nil {
			log.Error(err, "Address informers stopped")
		}
	}()
	go addrs.follow(ctx, informers, dirty, log)
	return nil
}

// watched is what the address informers watch, each object by a field selector on its name:
// the broker's own Service and, when a listener advertises its node's address, its Node.
func (a *Addresses) watched() (map[client.Object]cache.ByObject, error) {
	byObject := map[client.Object]cache.ByObject{
		&corev1.Service{}: {Field: fields.OneTermEqualSelector("metadata.name", a.serviceName)},
	}
	if a.needsNode() {
		if a.nodeName == "" {
			return nil, fmt.Errorf("a listener advertises its node's address, and NODE_NAME is not set")
		}
		byObject[&corev1.Node{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", a.nodeName)}
	}
	return byObject, nil
}

// follow hands a what informers read — once they have synced, then at every change — until
// ctx ends, and logs each change of the advertised addresses.
func (a *Addresses) follow(ctx context.Context, informers cache.Cache, dirty <-chan struct{}, log logr.Logger) {
	if !informers.WaitForCacheSync(ctx) {
		return
	}
	var last []string
	for {
		service, node := getCached(ctx, informers, a.namespace, a.serviceName, &corev1.Service{}), (*corev1.Node)(nil)
		if a.needsNode() {
			node = getCached(ctx, informers, "", a.nodeName, &corev1.Node{})
		}
		a.Observe(service, node)
		if now := describeAddresses(a); !slices.Equal(now, last) {
			log.Info("Advertised addresses", "listeners", now)
			last = now
		}
		select {
		case <-ctx.Done():
			return
		case <-dirty:
		}
	}
}

// markDirtyOnEvents makes every add, update and delete informers see of objs' kinds mark
// dirty: one goroutine then re-reads the cache, so what it builds has a single writer.
func markDirtyOnEvents(ctx context.Context, informers cache.Cache, objs []client.Object, dirty chan struct{}) error {
	mark := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { markDirty(dirty) },
		UpdateFunc: func(any, any) { markDirty(dirty) },
		DeleteFunc: func(any) { markDirty(dirty) },
	}
	for _, obj := range objs {
		inf, err := informers.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(mark); err != nil {
			return fmt.Errorf("event handler for %T: %w", obj, err)
		}
	}
	return nil
}

// markDirty asks for a rebuild on dirty (capacity 1) without blocking: one pending is enough.
func markDirty(dirty chan struct{}) {
	select {
	case dirty <- struct{}{}:
	default:
	}
}

// getCached reads namespace/name from the informer cache; nil when it is not there.
func getCached[T client.Object](ctx context.Context, c cache.Cache, namespace, name string, obj T) T {
	var none T
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return none
	}
	return obj
}

// describeAddresses is the current reading as log lines: "name=host:port" or the reason.
func describeAddresses(a *Addresses) []string {
	s := a.cur.Load()
	out := []string{}
	if len(s.addrs) > 0 {
		out = append(out, v1alpha1.FormatListeners(s.addrs))
	}
	return append(out, s.missing...)
}
