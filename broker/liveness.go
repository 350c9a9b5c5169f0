package broker

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// WedgedAfter is how old the liveness tick may get before the broker calls itself unhealthy.
const WedgedAfter = 5 * time.Second

// probeClientID is the client id of the broker's own liveness probe; its requests are not
// counted as clients' in the metrics.
const probeClientID = "paddock-liveness-probe"

// Liveness is the request path's heartbeat: when a request last completed — a client's, or
// the broker's own probe (RunIdleTicks). It is measured on a monotonic clock, so a step of the
// wall clock (NTP, a VM resumed) never makes a live broker look wedged, nor a wedged one live.
// A nil *Liveness ignores ticks.
type Liveness struct {
	last    atomic.Int64 // elapsed() at the last tick, in nanoseconds
	elapsed func() time.Duration
}

// NewLiveness returns a Liveness ticked now. elapsed reads a monotonic clock (the time since
// some fixed origin); nil uses the process's own monotonic clock.
func NewLiveness(elapsed func() time.Duration) *Liveness {
	if elapsed == nil {
		origin := time.Now() // carries a monotonic reading, which time.Since uses
		elapsed = func() time.Duration { return time.Since(origin) }
	}
	l := &Liveness{elapsed: elapsed}
	l.Tick()
	return l
}

// Tick records that the request path just completed work.
func (l *Liveness) Tick() {
	if l != nil {
		l.last.Store(int64(l.elapsed()))
	}
}

// Age is the time since the last tick.
func (l *Liveness) Age() time.Duration { return l.elapsed() - time.Duration(l.last.Load()) }

// Healthy is false once the last tick is WedgedAfter old.
func (l *Liveness) Healthy() bool { return l.Age() < WedgedAfter }

// RunIdleTicks keeps the liveness tick honest for an idle broker: every period it connects to
// one of srv's own listeners and sends an ApiVersions request, exactly as a client would, so
// the answer passes through the accept loop, a connection's reader and writer goroutines,
// decode and dispatch — and dispatch ticks the liveness clock. A busy broker is kept ticking
// by its clients' requests as well. When any part of that path is wedged, no probe is
// answered, nothing ticks, and after WedgedAfter the broker reports itself unhealthy. It
// returns when ctx ends.
//
// probeTLS, when not nil, gives the client TLS configuration to probe the listener bound at
// a port with (nil: plaintext): a TLS listener is probed over TLS.
func RunIdleTicks(ctx context.Context, srv *wire.Server, period time.Duration, log logr.Logger, probeTLS func(port int) *tls.Config) {
	frame := appendRequestFrameFrom(nil, probeClientID, kmsg.NewPtrApiVersionsRequest(), 0)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			addr, ok := probeAddr(srv)
			if !ok {
				continue // not serving yet, or shut down
			}
			var cfg *tls.Config
			if probeTLS != nil {
				cfg = probeTLS(addr.Port)
			}
			if err := probe(ctx, addr.String(), cfg, frame); err != nil && ctx.Err() == nil {
				log.V(1).Info("Liveness probe got no answer", "addr", addr, "reason", err.Error())
			}
		}
	}
}

// probeAddr is a dialable address of one of srv's listeners: the bound address, or loopback
// when it is bound to every interface.
func probeAddr(srv *wire.Server) (*net.TCPAddr, bool) {
	addrs := srv.Addrs()
	if len(addrs) == 0 {
		return nil, false
	}
	a, ok := addrs[0].(*net.TCPAddr)
	if !ok {
		return nil, false
	}
	ip := a.IP
	switch {
	case ip == nil || ip.IsUnspecified() && ip.To4() != nil:
		ip = net.IPv4(127, 0, 0, 1)
	case ip.IsUnspecified():
		ip = net.IPv6loopback
	}
	return &net.TCPAddr{IP: ip, Port: a.Port}, true
}

// probe sends frame to addr and reads the answer, giving up after WedgedAfter.
func probe(ctx context.Context, addr string, tlsCfg *tls.Config, frame []byte) error {
	d := net.Dialer{Timeout: WedgedAfter}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	if tlsCfg != nil {
		c = tls.Client(c, tlsCfg)
	}
	defer func() { _ = c.Close() }() // a probe connection carries nothing to flush
	if err := c.SetDeadline(time.Now().Add(WedgedAfter)); err != nil {
		return fmt.Errorf("set deadline: %w", err)
	}
	if _, err := c.Write(frame); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	return nil
}
