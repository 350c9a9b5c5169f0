package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
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

// handshakeTimeout bounds a TLS handshake, so a client that connects and says nothing holds
// its goroutines no longer than that.
const handshakeTimeout = 10 * time.Second

// retainFrameBytes is the largest request buffer a connection keeps for reuse.
const retainFrameBytes = 1 << 20

// responseQueue is how many answers may wait for the writer per connection. The reader
// blocks when it is full, which is the backpressure a pipelining client gets.
const responseQueue = 64

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
	// MaxFrameBytes caps a request frame; 0 means DefaultMaxFrameBytes.
	MaxFrameBytes int
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
	// prefix out of bounds), "bad_header" (a header that does not parse), "panic". A handler
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
	wg        sync.WaitGroup            // one count per connection goroutine and deferred answer
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.hardClose = make(chan struct{})
		s.stopping = make(chan struct{})
		s.base, s.cancelBase = context.WithCancel(context.Background())
		s.listeners = map[net.Listener]struct{}{}
		s.conns = map[*conn]struct{}{}
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
		if !s.trackConn(c) {
			c.client.cancel()
			_ = nc.Close() // accepted after shutdown began: never served
			return ErrServerClosed
		}
		go c.serve()
	}
}

func (s *Server) newConn(nc net.Conn, ln net.Listener) *conn {
	ctx, cancel := context.WithCancel(s.base)
	return &conn{
		srv:    s,
		nc:     nc,
		client: &Conn{nc: nc, ln: ln, ctx: ctx, cancel: cancel},
		out:    make(chan *answer, responseQueue),
		dead:   make(chan struct{}),
		slots:  make(chan struct{}, max(s.pipelineDepth(), 1)),
		log:    s.Log.WithValues("remote", nc.RemoteAddr().String(), "local", nc.LocalAddr().String()),
	}
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
	s.connState(c.nc, StateNew)
	return true
}

func (s *Server) untrackConn(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	s.connState(c.nc, StateClosed)
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

// conn is one client connection: a reader goroutine that reads and handles requests in
// order and a writer goroutine that writes their answers in the same order (some computed
// by deferred handlers meanwhile: pipeline.go).
type conn struct {
	srv    *Server
	nc     net.Conn
	client *Conn // what the handler sees of the connection
	log    logr.Logger

	// out carries the answers from reader to writer, in request order. Only the reader
	// sends and closes.
	out chan *answer
	// dead is closed by the writer when it stops early (write failed), so the reader never
	// blocks on out again.
	dead chan struct{}
	// slots bounds the deferred answers being computed (maxDeferred).
	slots chan struct{}
	// alone is the ready channel of the last answer computed alone (Answer.Alone) and not
	// yet known to be done: the reader handles no request before it is closed. Only the
	// reader uses it.
	alone chan struct{}
}

// serve runs the reader on this goroutine and the writer on another; both end when the
// connection does.
func (c *conn) serve() {
	go c.writeLoop()
	defer c.srv.wg.Done()
	defer close(c.out)
	defer c.client.cancel() // a request waiting for other clients stops waiting for a gone one

	maxBytes := c.srv.MaxFrameBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	if !c.handshake() {
		return
	}
	r := bufio.NewReaderSize(c.nc, 32<<10)
	var buf []byte
	for {
		var err error
		minBytes := MinFrameBytes
		if c.client.rawNext {
			minBytes = 0
		}
		buf, err = readFrame(r, buf, minBytes, maxBytes)
		if err != nil {
			c.readFailed(err)
			return
		}
		if !c.waitAlone() {
			return
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
		if a.ready == nil && a.closeAfter {
			return // the writer writes it, then closes the connection
		}
	}
}

// handshake completes the TLS handshake of a connection accepted on a TLS listener, within
// handshakeTimeout, and records its state; false (the connection is closed) when it fails.
// A plain connection has nothing to do.
func (c *conn) handshake() bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(c.client.ctx, handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		c.srv.connError("tls_handshake")
		if !c.srv.inShutdown.Load() {
			c.log.Info("Closing connection", "reason", "tls handshake: "+err.Error())
		}
		return false
	}
	state := tc.ConnectionState()
	c.client.tls = &state
	return true
}

// waitAlone holds the next request until the answer computed alone before it is done; false
// when the connection or the server closed meanwhile.
func (c *conn) waitAlone() bool {
	if c.alone == nil {
		return true
	}
	select {
	case <-c.alone:
		c.alone = nil
		return true
	case <-c.dead:
		return false
	case <-c.srv.hardClose:
		return false
	}
}

func (c *conn) readFailed(err error) {
	switch {
	case c.srv.inShutdown.Load():
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.log.V(1).Info("Client closed connection")
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameTooSmall):
		c.srv.connError("bad_frame")
		c.log.Info("Closing connection", "reason", err.Error())
	default:
		c.srv.connError("read")
		c.log.Info("Closing connection", "reason", err.Error())
	}
}

// handle parses one frame's header and hands the request to the Handler. It returns the
// answer: a frame (none when the request gets none), one computed later (pipeline.go), or an
// error that closes the connection. A handler panic is recovered here and closes only this
// connection.
func (c *conn) handle(frame []byte) (a *answer) {
	if c.client.rawNext {
		c.client.rawNext = false
		return c.serve1(Header{}, &Request{Raw: true, Body: frame, Conn: c.client, srv: c.srv})
	}
	h, body, err := ParseHeader(frame)
	if err != nil {
		c.srv.connError("bad_header")
		return &answer{err: fmt.Errorf("request key %d v%d correlation %d: %w", h.Key, h.Version, h.CorrelationID, err)}
	}
	return c.serve1(h, &Request{Header: h, Body: body, Conn: c.client, srv: c.srv})
}

// serve1 hands one request to the Handler and turns its Answer into the writer's.
func (c *conn) serve1(h Header, req *Request) (a *answer) {
	defer func() {
		if r := recover(); r != nil {
			a = c.panicked(h, r)
		}
	}()
	ans := c.srv.Handler.ServeKafka(req)
	if ans.Later == nil {
		return &answer{b: ans.Frame, bufs: ans.Frames, err: ans.Err, closeAfter: ans.Close}
	}
	deferred := c.deferAnswer(h, ans.Later)
	if ans.Alone && deferred.ready != nil {
		c.alone = deferred.ready
	}
	return deferred
}

// panicked is the answer of a handler that panicked with r: the connection closes.
func (c *conn) panicked(h Header, r any) *answer {
	c.srv.connError("panic")
	c.log.Error(fmt.Errorf("%v", r), "Handler panicked", "key", h.Key, "version", h.Version, "stack", string(debug.Stack()))
	return &answer{err: fmt.Errorf("key %d v%d: handler panicked: %v", h.Key, h.Version, r)}
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
		if err := c.write(a); err != nil {
			if !c.srv.inShutdown.Load() {
				c.log.Info("Closing connection", "reason", "write: "+err.Error())
			}
			c.stopWriting()
			return
		}
		if a.closeAfter {
			c.stopWriting()
			return
		}
	}
}

// write writes one answer within writeTimeout.
func (c *conn) write(a *answer) error {
	if err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	if a.bufs != nil {
		_, err := a.bufs.WriteTo(c.nc) // writev on a TCP connection
		return err
	}
	_, err := c.nc.Write(a.b)
	return err
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
