package broker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("broker: server closed")

// writeTimeout bounds one response write, so a client that stops reading cannot pin a
// connection's goroutines forever.
const writeTimeout = 30 * time.Second

// retainFrameBytes is the largest request buffer a connection keeps for reuse.
const retainFrameBytes = 1 << 20

// responseQueue is how many encoded responses may wait for the writer per connection. The
// reader blocks when it is full, which is the backpressure a pipelining client gets.
const responseQueue = 64

// Server is the Kafka wire server. Set the exported fields before the first Serve and do not
// change them afterwards. Serve, Shutdown and Close follow net/http's contracts.
type Server struct {
	// View is the cluster state the handlers answer from. Required.
	View View
	// Self is this broker's id.
	Self int32
	// MaxFrameBytes caps a request frame; 0 means DefaultMaxFrameBytes.
	MaxFrameBytes int
	// Log receives connection-level events (closed connections and why).
	Log logr.Logger
	// Metrics, when not nil, counts requests, errors and open connections.
	Metrics *Metrics
	// Liveness, when not nil, is ticked by every completed request.
	Liveness *Liveness
	// Admin, when not nil, is the admin APIs' write access to the cluster's KafkaTopics
	// (CreateTopics, DeleteTopics, CreatePartitions, the AlterConfigs APIs, Metadata
	// auto-creation). Without it those requests are answered with an error.
	Admin *Admin
	// Partitions, when not nil, holds the partition logs this broker leads (partitions.go):
	// Produce, Fetch, ListOffsets and OffsetForLeaderEpoch reach their logs through it.
	// Without it every partition answers NOT_LEADER_OR_FOLLOWER.
	Partitions *Partitions
	// ProducerIDs, when not nil, allocates InitProducerId's producer ids on the shared volume.
	ProducerIDs *ProducerIDSource
	// SelfFenced, when set, reports that this broker has not renewed its heartbeat Lease for
	// a whole session timeout: it has probably been declared dead, so Produce stops
	// acknowledging appends (NOT_LEADER_OR_FOLLOWER). The storage fence stays the guarantee.
	SelfFenced func() bool
	// Groups, when not nil, is the group coordinator (group_coordinator.go) the group APIs
	// reach; without it, or before it runs, they answer COORDINATOR_NOT_AVAILABLE.
	Groups *Groups
	// PipelineDepth bounds the deferred answers one connection computes at once
	// (pipeline.go): 0 means maxDeferred; a negative value turns pipelining off, so every
	// answer is computed before the next request is read, as Apache does.
	PipelineDepth int

	inShutdown atomic.Bool
	// stopping is closed when Shutdown or Close begins, so handlers that wait (a long-polling
	// Fetch) answer at once with what they have. Made by init.
	stopping     chan struct{}
	stoppingOnce sync.Once
	closeOnce    sync.Once
	hardClose    chan struct{} // closed by Close; made by init
	// base is the parent of every request's context: Close cancels it, so a handler waiting
	// on the API server or the view returns at once. Made by init.
	base       context.Context
	cancelBase context.CancelFunc
	// autoCreate deduplicates Metadata auto-creations in flight. Made by init.
	autoCreate *autoCreator

	initOnce  sync.Once
	mu        sync.Mutex
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*conn]struct{}        // guarded by mu
	wg        sync.WaitGroup            // one count per connection goroutine
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.hardClose = make(chan struct{})
		s.stopping = make(chan struct{})
		s.base, s.cancelBase = context.WithCancel(context.Background())
		s.autoCreate = newAutoCreator()
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
	})
}

// advertisedListener is a net.Listener that carries the listener's name and where clients
// are told to reach this broker on it.
type advertisedListener struct {
	net.Listener
	source listenerSource
}

// listenerSource names a listener and reads this broker's current address on it; ok=false
// while the broker has none yet (an external listener whose node or load balancer address is
// not known): answers on that listener then leave this broker out.
type listenerSource struct {
	name    string
	current func() (v1alpha1.ListenerAddress, bool)
}

// Advertise wraps ln, the listener called name, so that answers to requests accepted on it
// name this broker at host:port and every other broker at the address its registry row gives
// for name. Without it, Serve advertises ln's local address under the empty name.
func Advertise(ln net.Listener, name, host string, port int32) net.Listener {
	addr := v1alpha1.ListenerAddress{Name: name, Host: host, Port: port}
	return &advertisedListener{Listener: ln, source: listenerSource{name: name, current: func() (v1alpha1.ListenerAddress, bool) { return addr, true }}}
}

// AdvertiseFrom is Advertise for an address that changes: addrs is read at every request,
// so an answer always carries this broker's address as it is now, and none while it has
// none.
func AdvertiseFrom(ln net.Listener, name string, addrs *Addresses) net.Listener {
	return &advertisedListener{Listener: ln, source: listenerSource{name: name, current: func() (v1alpha1.ListenerAddress, bool) { return addrs.Get(name) }}}
}

// Serve accepts connections on ln and serves each on its own goroutines until Shutdown or
// Close. It always returns a non-nil error; after Shutdown or Close, ErrServerClosed. Serve
// may be called for several listeners at once.
func (s *Server) Serve(ln net.Listener) error {
	s.init()
	listener := sourceOf(ln)
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
		ctx, cancel := context.WithCancel(s.base)
		c := &conn{
			ctx:      ctx,
			cancel:   cancel,
			srv:      s,
			nc:       nc,
			listener: listener,
			out:      make(chan *answer, responseQueue),
			dead:     make(chan struct{}),
			slots:    make(chan struct{}, max(s.pipelineDepth(), 1)),
			log:      s.Log.WithValues("remote", nc.RemoteAddr().String(), "local", nc.LocalAddr().String()),
		}
		if !s.trackConn(c) {
			cancel()
			_ = nc.Close() // accepted after shutdown began: never served
			return ErrServerClosed
		}
		go c.serve()
	}
}

func sourceOf(ln net.Listener) listenerSource {
	if a, ok := ln.(*advertisedListener); ok {
		return a.source
	}
	addr := v1alpha1.ListenerAddress{Host: ln.Addr().String(), Port: -1}
	if host, portStr, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		port, _ := strconv.Atoi(portStr)
		addr = v1alpha1.ListenerAddress{Host: host, Port: int32(port)}
	}
	return listenerSource{current: func() (v1alpha1.ListenerAddress, bool) { return addr, true }}
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

// trackConn registers c and counts its two goroutines; false once shutdown began (the
// shutdown sweep holds mu, so no connection slips past it).
func (s *Server) trackConn(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inShutdown.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(2)
	s.Metrics.connOpened()
	return true
}

func (s *Server) untrackConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.Metrics.connClosed()
}

// Shutdown stops accepting, lets every connection finish the request it is handling and
// flush the responses it owes, then closes it (an admin request waiting for the view waits
// at most its own bounded timeout). It returns when all connections are closed and the
// background auto-creations have ended, or with ctx's error after closing them hard (as
// Close) when ctx ends first. Kafka clients reconnect to another broker on their own.
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
		// No request is left to answer: end the background auto-creations too.
		s.cancelBase()
		s.autoCreate.wait()
		return nil
	case <-ctx.Done():
		_ = s.Close() // always nil
		return ctx.Err()
	}
}

// Close closes every listener and connection at once, without flushing, and waits for the
// connection goroutines to end. It is safe to call more than once and after Shutdown.
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
	s.autoCreate.wait()
	return nil
}

func (s *Server) closeListenersLocked() {
	for ln := range s.listeners {
		_ = ln.Close() // Serve returns ErrServerClosed whatever Close says
		delete(s.listeners, ln)
	}
}

// conn is one client connection: a reader goroutine that decodes and handles requests in
// order and a writer goroutine that writes their responses in the same order (some computed
// by deferred handlers meanwhile: pipeline.go).
type conn struct {
	srv *Server
	nc  net.Conn
	// listener is the listener the connection was accepted on and where it advertises this
	// broker.
	listener listenerSource
	log      logr.Logger

	// out carries the answers from reader to writer, in request order. Only the reader
	// sends and closes.
	out chan *answer
	// dead is closed by the writer when it stops early (write failed), so the reader never
	// blocks on out again.
	dead chan struct{}
	// slots bounds the deferred answers being computed (maxDeferred).
	slots chan struct{}
	// ctx ends when the reader stops (or the server closes): requests' connCtx. Made by
	// Serve; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	// alone is the ready channel of the last answer computed alone (answerLaterAlone) and
	// not yet known to be done: the reader handles no request before it is closed. Only the
	// reader uses it.
	alone chan struct{}
}

// serve runs the reader on this goroutine and the writer on another; both end when the
// connection does.
func (c *conn) serve() {
	go c.writeLoop()
	defer c.srv.wg.Done()
	defer close(c.out)
	defer c.cancel() // a request waiting for other clients stops waiting for a gone one

	maxBytes := c.srv.MaxFrameBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	r := bufio.NewReaderSize(c.nc, 32<<10)
	var buf []byte
	for {
		var err error
		buf, err = readFrame(r, buf, maxBytes)
		if err != nil {
			c.readFailed(err)
			return
		}
		if c.alone != nil {
			select {
			case <-c.alone:
				c.alone = nil
			case <-c.dead:
				return
			case <-c.srv.hardClose:
				return
			}
		}
		a := c.handle(buf)
		if cap(buf) > retainFrameBytes {
			buf = nil // one huge request must not pin its buffer for the connection's life
		}
		if a.ready == nil && a.err != nil {
			c.log.Info("Closing connection", "reason", a.err.Error())
			return
		}
		if a.ready == nil && a.silent() {
			continue
		}
		select {
		case c.out <- a:
		case <-c.dead:
			return
		case <-c.srv.hardClose:
			return
		}
	}
}

func (c *conn) readFailed(err error) {
	switch {
	case c.srv.inShutdown.Load():
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.V(1).Info("Client closed connection")
	case errors.Is(err, errFrameTooLarge), errors.Is(err, errFrameTooSmall):
		c.srv.Metrics.connError("bad_frame")
		c.log.Info("Closing connection", "reason", err.Error())
	default:
		c.srv.Metrics.connError("read")
		c.log.Info("Closing connection", "reason", err.Error())
	}
}

// handle decodes and answers one frame. It returns the answer: the encoded response (none
// when the request gets none), one a deferred handler computes later (pipeline.go), or an
// error that closes the connection. A handler panic is recovered here and closes only this
// connection.
func (c *conn) handle(frame []byte) (a *answer) {
	h, req, err := decodeRequest(frame)
	if err != nil {
		if resp, ok := apiVersionsFallback(h, err); ok {
			c.srv.Metrics.request(h.Key, h.Version)
			return &answer{b: appendResponse(nil, h.CorrelationID, resp)}
		}
		c.srv.Metrics.connError(errorReason(err))
		return &answer{err: fmt.Errorf("request key %d v%d correlation %d: %w", h.Key, h.Version, h.CorrelationID, err)}
	}
	defer func() {
		if r := recover(); r != nil {
			c.srv.Metrics.connError("panic")
			c.log.Error(fmt.Errorf("%v", r), "Handler panicked", "key", h.Key, "version", h.Version, "stack", string(debug.Stack()))
			a = &answer{err: fmt.Errorf("%s v%d handler panicked: %v", kmsg.NameForKey(h.Key), h.Version, r)}
		}
	}()
	rc := c.srv.newRequestContext(c.listener)
	rc.connCtx, rc.remote = c.ctx, c.nc.RemoteAddr()
	if h.ClientID != nil {
		rc.clientID = *h.ClientID
	}
	resp, err := c.srv.dispatch(rc, h, req)
	if err != nil {
		c.srv.Metrics.connError("handler")
		return &answer{err: err}
	}
	if h.ClientID == nil || *h.ClientID != probeClientID {
		c.srv.Metrics.request(h.Key, h.Version)
	}
	switch {
	case rc.later != nil:
		a := c.deferAnswer(h, rc.later)
		if rc.alone && a.ready != nil {
			c.alone = a.ready
		}
		return a
	case resp == nil:
		return &answer{} // the request gets no answer (Produce with acks=0)
	}
	return encodeAnswer(h.CorrelationID, resp)
}

// newRequestContext is the context of one request arriving on listener: a snapshot of the
// view taken now, which the whole answer is computed from.
func (s *Server) newRequestContext(listener listenerSource) *requestContext {
	s.init()
	addr, reachable := listener.current()
	addr.Name = listener.name
	return &requestContext{ctx: s.base, connCtx: s.base, srv: s, view: s.View.Snapshot(), self: s.Self, listener: addr, selfReachable: reachable}
}

// dispatch is the one path every request takes, a client's or the liveness probe's: it runs
// the key's handler and ticks the liveness clock, since a completed request proves the
// request path works.
func (s *Server) dispatch(rc *requestContext, h requestHeader, req kmsg.Request) (kmsg.Response, error) {
	resp, err := apis[h.Key].handle(rc, req)
	if err != nil {
		return nil, fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
	}
	s.Liveness.Tick()
	return resp, nil
}

func errorReason(err error) string {
	switch {
	case errors.Is(err, errUnknownKey):
		return "unknown_key"
	case errors.Is(err, errVersionRange):
		return "unsupported_version"
	case errors.Is(err, errMalformedHeader), errors.Is(err, errFrameTooSmall):
		return "bad_header"
	default:
		return "bad_body"
	}
}

// writeLoop writes answers in the order the reader queued them, waiting for each deferred
// one in turn, then closes the connection once the reader is done (out closed), a write
// fails, or a deferred answer is an error.
func (c *conn) writeLoop() {
	defer c.srv.wg.Done()
	defer c.srv.untrackConn(c)
	defer func() { _ = c.nc.Close() }() // the reader is done, or a write failed
	for a := range c.out {
		if a.ready != nil {
			select {
			case <-a.ready:
			case <-c.srv.hardClose:
				c.stopWriting()
				return
			}
		}
		if a.err != nil {
			c.log.Info("Closing connection", "reason", a.err.Error())
			c.stopWriting()
			return
		}
		if a.silent() {
			continue
		}
		err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if err == nil && a.bufs != nil {
			_, err = a.bufs.WriteTo(c.nc) // writev on a TCP connection
		} else if err == nil {
			_, err = c.nc.Write(a.b)
		}
		if err != nil {
			if !c.srv.inShutdown.Load() {
				c.log.Info("Closing connection", "reason", "write: "+err.Error())
			}
			c.stopWriting()
			return
		}
	}
}

// stopWriting ends the writer early: the reader must never block on out again, and is woken
// from its read by the close. Answers still queued are dropped; deferred ones finish on
// their own goroutines.
func (c *conn) stopWriting() {
	close(c.dead)
	_ = c.nc.Close() // unblocks a reader waiting in Read; it then sees dead and stops
	for range c.out {
	}
}
