package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("wire: server closed")

// writeTimeout bounds one response write, so a client that stops reading cannot pin a
// connection's goroutines forever.
const writeTimeout = 30 * time.Second

// responseQueue is how many answers may wait for the writer per connection. The reader
// blocks when it is full, which is the backpressure a pipelining client gets.
const responseQueue = 64

// DefaultMaxQueuedAnswerBytes is Server.MaxQueuedAnswerBytes's default: room for a couple of
// full Fetch answers written from memory, and any number of zero-copy ones.
const DefaultMaxQueuedAnswerBytes = 32 << 20

// DefaultIdleTimeout is Apache's connections.max.idle.ms: 10 minutes.
const DefaultIdleTimeout = 10 * time.Minute

// ConnState is a connection's state change, as ConnState hooks see it.
type ConnState int

const (
	// StateNew: the connection was accepted and is about to be served.
	StateNew ConnState = iota
	// StateClosed: the connection is closed and forgotten.
	StateClosed
)

// Server is the Kafka connection server: it accepts connections, reads size-prefixed request
// frames on each, hands every request to Handler and writes the answers in request order.
// Set the exported fields before the first Serve and do not change them afterwards. Serve,
// Shutdown and Close follow net/http's contracts.
type Server struct {
	// Handler answers every request. Required.
	Handler Handler
	// MaxFrameBytes caps a request frame (Apache's socket.request.max.bytes); 0 means
	// DefaultMaxFrameBytes. A larger size prefix closes the connection, with a log line.
	MaxFrameBytes int
	// RequestBudget bounds the bytes of requests being read and handled, over every
	// connection (Apache's queued.max.request.bytes): a connection whose next request does not
	// fit waits, unread, until others are done. nil: unbounded.
	RequestBudget *Budget
	// RequestCost, when set, is how much of RequestBudget a request takes, from its header and
	// frame size: the frame and what decoding and handling it may allocate. nil: the frame size.
	// An error (wrapping ErrFrameTooLarge) refuses the frame as too large for its kind: the
	// connection closes, as for a frame above MaxFrameBytes.
	RequestCost func(h Header, frameBytes int) (int64, error)
	// MaxQueuedAnswerBytes bounds the bytes of a connection's answers waiting to be written
	// (their bytes in memory; file data sent from the file does not count): the connection
	// reads no further request while more are queued. 0 means DefaultMaxQueuedAnswerBytes; a
	// negative value leaves only the count bound (responseQueue).
	MaxQueuedAnswerBytes int
	// MaxConnections caps the connections served at once (Apache's max.connections); 0 is no
	// cap. MaxConnectionsPerIP caps those from one client address (max.connections.per.ip),
	// and MaxConnectionsPerIPOverrides sets it per address (max.connections.per.ip.overrides).
	// A connection past a cap is closed at once and logged; one from this host itself (its
	// remote address is its local address: the liveness probe) is never refused.
	MaxConnections               int
	MaxConnectionsPerIP          int
	MaxConnectionsPerIPOverrides map[netip.Addr]int
	// IdleTimeout closes a connection that has sent no request for that long while it has no
	// answer outstanding (Apache's connections.max.idle.ms); 0 never does.
	IdleTimeout time.Duration
	// PipelineDepth bounds the deferred answers one connection computes at once
	// (pipeline.go): 0 means maxDeferred; a negative value turns pipelining off, so every
	// answer is computed before the next request is read, as Apache does.
	PipelineDepth int
	// Log receives connection-level events (closed connections and why).
	Log logr.Logger
	// ConnState, when set, is called when a connection is accepted (StateNew) and when it is
	// closed and forgotten (StateClosed). It must not block.
	ConnState func(net.Conn, ConnState)
	// ConnError, when set, is called with a reason each time the server closes a connection
	// because of what it read or a handler panic: "read" (a read failed), "bad_frame" (a size
	// prefix out of bounds), "bad_header" (a header that does not parse), "panic", "idle"
	// (IdleTimeout), "max_connections", "max_connections_per_ip" (refused at accept). A handler
	// closing a connection with Answer.Err counts its own reasons. It must not block.
	ConnError func(reason string)

	inShutdown atomic.Bool
	// stopping is closed when Shutdown or Close begins (Request.Stopping). Made by init.
	stopping     chan struct{}
	stoppingOnce sync.Once
	closeOnce    sync.Once
	hardClose    chan struct{} // closed by Close; made by init
	// base is the parent of every connection's context (Request.Context): Close cancels it,
	// and Shutdown once every connection is done. Made by init.
	base       context.Context
	cancelBase context.CancelFunc

	initOnce  sync.Once
	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*conn]struct{}        // guarded by mu
	perIP     map[netip.Addr]int        // connections per client address; guarded by mu
	wg        sync.WaitGroup            // one count per connection goroutine and deferred answer
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.hardClose = make(chan struct{})
		s.stopping = make(chan struct{})
		s.base, s.cancelBase = context.WithCancel(context.Background())
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
		s.perIP = map[netip.Addr]int{}
	})
}

func (s *Server) connError(reason string) {
	if s.ConnError != nil {
		s.ConnError(reason)
	}
}

func (s *Server) connState(nc net.Conn, state ConnState) {
	if s.ConnState != nil {
		s.ConnState(nc, state)
	}
}

// Serve accepts connections on ln and serves each on its own goroutines until Shutdown or
// Close. It always returns a non-nil error; after Shutdown or Close, ErrServerClosed. Serve
// may be called for several listeners at once; each connection's Conn.Listener is the ln it
// was accepted on.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	if !s.trackListener(ln) {
		return ErrServerClosed
	}
	defer s.untrackListener(ln)

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.inShutdown.Load() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
			}
			// Anything else (EMFILE, ECONNABORTED, ...) is transient for a server: back off
			// and keep accepting, as net/http does, rather than take the broker down.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.Log.Error(err, "Accept failed; retrying", "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-s.hardClose:
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		c := s.newConn(nc, ln)
		switch refused := s.trackConn(c); {
		case errors.Is(refused, ErrServerClosed):
			c.client.cancel()
			_ = nc.Close() // accepted after shutdown began: never served
			return ErrServerClosed
		case refused != nil:
			c.client.cancel()
			_ = nc.Close() // past a connection cap: refused, as Apache refuses it
			c.logger().Info("Refused connection", "reason", refused.Error())
			continue
		}
		go c.serve()
	}
}

func (s *Server) newConn(nc net.Conn, ln net.Listener) *conn {
	ctx, cancel := context.WithCancel(s.base)
	return &conn{srv: s, nc: nc, ip: remoteIP(nc), client: &Conn{nc: nc, ln: ln, ctx: ctx, cancel: cancel}}
}

// Addrs lists the addresses of the listeners being served now, in no particular order.
func (s *Server) Addrs() []net.Addr {
	s.init()
	s.mu.Lock()
	defer s.mu.Unlock()
	addrs := make([]net.Addr, 0, len(s.listeners))
	for ln := range s.listeners {
		addrs = append(addrs, ln.Addr())
	}
	return addrs
}

func (s *Server) trackListener(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) untrackListener(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.listeners, ln)
}

// trackConn registers c and counts its reader goroutine: ErrServerClosed once shutdown began
// (the shutdown sweep holds mu, so no connection slips past it), errTooManyConnections when c
// is past a connection cap.
func (s *Server) trackConn(c *conn) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return ErrServerClosed
	}
	if err := s.overCapLocked(c); err != nil {
		return err
	}
	s.conns[c] = struct{}{}
	s.perIP[c.ip]++
	s.wg.Add(1)
	s.connState(c.nc, StateNew)
	return nil
}

func (s *Server) untrackConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.perIP[c.ip]--; s.perIP[c.ip] <= 0 {
		delete(s.perIP, c.ip)
	}
	s.connState(c.nc, StateClosed)
}

// errTooManyConnections: a connection past MaxConnections or its address's cap.
var errTooManyConnections = errors.New("too many connections")

// overCapLocked is why c may not be served (errTooManyConnections), or nil. Apache refuses a
// connection past max.connections.per.ip the same way; past max.connections its acceptor
// waits for a free slot instead, which here would also keep out the liveness probe (and the
// broker would be restarted for being busy): docs/bounds.md, "Connections".
func (s *Server) overCapLocked(c *conn) error {
	if c.fromSelf() {
		return nil
	}
	if s.MaxConnections > 0 && len(s.conns) >= s.MaxConnections {
		s.connError("max_connections")
		return fmt.Errorf("%w: %d served, max.connections %d", errTooManyConnections, len(s.conns), s.MaxConnections)
	}
	limit, ok := s.MaxConnectionsPerIPOverrides[c.ip]
	if !ok {
		limit = s.MaxConnectionsPerIP
	}
	if (ok || limit > 0) && s.perIP[c.ip] >= limit {
		s.connError("max_connections_per_ip")
		return fmt.Errorf("%w: %d from %s, max.connections.per.ip %d", errTooManyConnections, s.perIP[c.ip], c.ip, limit)
	}
	return nil
}

// remoteIP is the client address of nc (the zero Addr when it has none, as a net.Pipe).
func remoteIP(nc net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

// Shutdown stops accepting, lets every connection finish the request it is handling and
// flush the answers it owes, then closes it. It returns when all connections are closed, or
// with ctx's error after closing them hard (as Close) when ctx ends first. Kafka clients
// reconnect to another broker on their own.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.inShutdown.Store(true)
	s.stoppingOnce.Do(func() { close(s.stopping) })
	s.closeListenersLocked()
	for c := range s.conns {
		// Wakes the reader from its read; it sees inShutdown and stops reading requests. An
		// error means the connection is already closed, which is the goal.
		_ = c.nc.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		s.cancelBase() // no request is left to answer
		return nil
	case <-ctx.Done():
		_ = s.Close() // always nil
		return ctx.Err()
	}
}

// Close closes every listener and connection at once, without flushing, and waits for the
// connection goroutines and deferred answers to end. It is safe to call more than once and
// after Shutdown.
func (s *Server) Close() error {
	s.init()
	s.mu.Lock()
	s.inShutdown.Store(true)
	s.stoppingOnce.Do(func() { close(s.stopping) })
	s.closeOnce.Do(func() {
		close(s.hardClose)
		s.cancelBase()
	})
	s.closeListenersLocked()
	for c := range s.conns {
		_ = c.nc.Close() // closing hard is the point; there is nothing to report
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

func (s *Server) closeListenersLocked() {
	for ln := range s.listeners {
		_ = ln.Close() // Serve returns ErrServerClosed whatever Close says
		delete(s.listeners, ln)
	}
}

// handshakeTimeout bounds a TLS handshake, so a client that connects and says nothing holds
// its goroutines no longer than that.
const handshakeTimeout = 10 * time.Second
