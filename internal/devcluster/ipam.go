package devcluster

import (
	"fmt"
	"net/netip"
	"sync"
)

// podIPs hands out one node's pod addresses: 198.18.<node+1>.2 … .254, round-robin so a
// recreated pod gets a new address as it would in a real cluster (.1 is the node's own).
type podIPs struct {
	mu     sync.Mutex
	prefix [3]byte
	next   byte            // guarded by mu
	inUse  map[string]bool // guarded by mu
}

func newPodIPs(nodeIndex int) *podIPs {
	return &podIPs{prefix: [3]byte{198, 18, byte(nodeIndex + 1)}, next: 2, inUse: map[string]bool{}}
}

// nodeIP is the node's InternalIP and the pods' hostIP.
func (p *podIPs) nodeIP() string {
	return netip.AddrFrom4([4]byte{p.prefix[0], p.prefix[1], p.prefix[2], 1}).String()
}

// allocate returns a free address, preferring want (the address a pod already reports, so a
// restarted node agent keeps it) when it is one of this node's and free.
func (p *podIPs) allocate(want string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if a, err := netip.ParseAddr(want); err == nil && a.Is4() {
		b := a.As4()
		if [3]byte{b[0], b[1], b[2]} == p.prefix && b[3] >= 2 && b[3] <= 254 && !p.inUse[want] {
			p.inUse[want] = true
			return want, nil
		}
	}
	for range 253 {
		ip := netip.AddrFrom4([4]byte{p.prefix[0], p.prefix[1], p.prefix[2], p.next}).String()
		p.next++
		if p.next > 254 {
			p.next = 2
		}
		if !p.inUse[ip] {
			p.inUse[ip] = true
			return ip, nil
		}
	}
	return "", fmt.Errorf("no free pod address on this node (%d pods)", len(p.inUse))
}

func (p *podIPs) release(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inUse, ip)
}
