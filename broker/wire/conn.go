package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// conn is one client connection: a reader goroutine that reads and handles requests in
// order, and a writer goroutine that writes their answers in the same order (some computed by
// deferred handlers meanwhile: pipeline.go) and that runs only while answers are queued
// (write.go). An idle connection is its reader, parked in a read, and this struct: no read
// buffer (frames come from pooled buffers), no writer, no channels (docs/bounds.md,
// "Connections").
type conn struct {
	srv    *Server
	nc     net.Conn
	ip     netip.Addr // the client's address, for the per-address cap
	client *Conn      // what the handler sees of the connection

	// head holds a frame's size prefix and its first MinFrameBytes bytes while the reader
	// reads them. Only the reader uses it.
	head [4 + MinFrameBytes]byte
	// br, while not nil, buffers what the client sent beyond the frame being read (pipelined
	// requests, read in one system call); it goes back to its pool once empty, so a
	// connection waiting for its next request holds none. Only the reader uses it.
	br *bufio.Reader
	// slots bounds the deferred answers being computed (maxDeferred); made at the first one.
	// Only the reader makes it.
	slots chan struct{}
	// alone is the ready channel of the last answer computed alone (Answer.Alone) and not
	// yet known to be done: the reader handles no request before it is closed. Only the
	// reader uses it.
	alone chan struct{}

	mu sync.Mutex
	// queue holds the answers for the writer, in request order; queued is the bytes they
	// hold in memory (answer.size), counted until each is written. Guarded by mu.
	queue  []*answer
	queued int64
	// writing: a writer goroutine runs. readerDone: the reader returned. dead: the writer
	// stopped early (a write failed): nothing more is queued. The last of reader and writer
	// to stop closes the connection (finish). Guarded by mu.
	writing, readerDone, dead bool
	// room, when not nil, is closed by the writer when queued drops: the reader waits on it
	// while the queue is full. Guarded by mu.
	room chan struct{}
	// lastQueued: the reader queued an answer known at once with Answer.Close, and reads no
	// further request. Guarded by mu.
	lastQueued bool
}

// logger is the connection's logger, made when there is something to log: an idle
// connection keeps no logger of its own.
func (c *conn) logger() logr.Logger {
	return c.srv.Log.WithValues("remote", c.nc.RemoteAddr().String(), "local", c.nc.LocalAddr().String())
}

// fromSelf reports whether the client is this host itself (remote and local address the
// same: the liveness probe, a port-forward into the pod), which the connection caps let in.
func (c *conn) fromSelf() bool {
	local, err := netip.ParseAddrPort(c.nc.LocalAddr().String())
	return err == nil && c.ip.IsValid() && local.Addr().Unmap() == c.ip
}

// serve is the connection's reader: it reads each request (within the request budget), hands
// it to the Handler and queues the answer, until the client goes away, a request closes the
// connection, or the server shuts down.
func (c *conn) serve() {
	defer c.srv.wg.Done()
	defer c.stopReading()
	defer c.client.cancel() // a request waiting for other clients stops waiting for a gone one

	if !c.handshake() {
		return
	}
	for {
		if !c.waitForRoom() {
			return
		}
		f, err := c.readFrame()
		if err != nil {
			c.readFailed(err)
			return
		}
		// A muted connection's request waits here, read but not handled: the mute may
		// have come from an answer computed later, while the reader waited for this one.
		if !c.waitAlone() || !c.waitMuted() {
			f.free()
			return
		}
		a := c.handle(f)
		f.free()
		switch {
		case a.ready == nil && a.err != nil:
			a.letGo()
			c.logger().Info("Closing connection", "reason", a.err.Error())
			return
		case a.ready == nil && a.silent():
			a.letGo()
			continue
		}
		if !c.enqueue(a) {
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
			c.logger().Info("Closing connection", "reason", "tls handshake: "+err.Error())
		}
		return false
	}
	state := tc.ConnectionState()
	c.client.tls = &state
	return true
}

// frame is a request frame as read: buf, from a pool (framePool), and the request budget
// it took. raw: a bare token frame read after Conn.ExpectRawFrame, not a Kafka request.
type frame struct {
	srv   *Server
	buf   []byte
	pool  *sync.Pool // nil when buf is not pooled
	taken int64
	raw   bool
}

// free gives the frame's buffer back to its pool and its bytes back to the budget: the
// request's Body is not used after ServeKafka returns.
func (f *frame) free() {
	if f.pool != nil {
		b := f.buf[:0]
		f.pool.Put(&b)
	}
	f.srv.RequestBudget.Give(f.taken)
	f.buf, f.pool, f.taken = nil, nil, 0
}

// Pooled frame buffers: a request up to a class's size reads into a buffer of that class,
// which goes back once the request is handled, so no connection keeps a buffer between
// requests. Larger frames are read incrementally (readBody) into their own.
var (
	frameClasses = [...]int{16 << 10, 256 << 10, 1 << 20}
	framePools   [len(frameClasses)]sync.Pool
)

func frameBuffer(n int) ([]byte, *sync.Pool) {
	for i, size := range frameClasses {
		if n <= size {
			if b, ok := framePools[i].Get().(*[]byte); ok {
				return (*b)[:0], &framePools[i]
			}
			return make([]byte, 0, size), &framePools[i]
		}
	}
	return nil, nil
}

// errIdle ends a connection that sent nothing for IdleTimeout with nothing outstanding.
var errIdle = errors.New("idle for longer than connections.max.idle.ms")

// readFrame reads the next request frame: its size prefix (checked against the cap) and
// header start, then — once the request's cost is taken from the request budget, waiting
// unread while it is spent — the rest of it, incrementally.
func (c *conn) readFrame() (*frame, error) {
	f, err := c.readFrameBuffered()
	if c.br != nil && (err != nil || c.br.Buffered() == 0) {
		c.br.Reset(nil)
		readers.Put(c.br)
		c.br = nil
	}
	return f, err
}

// readers are the connections' read-ahead buffers, lent for as long as requests are queued
// in them.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

func (c *conn) readFrameBuffered() (*frame, error) {
	if c.br == nil {
		if err := c.readHead(); err != nil { // waiting for the next request: no buffer held
			return nil, err
		}
		c.br = readers.Get().(*bufio.Reader)
		c.br.Reset(c.nc)
	} else if _, err := io.ReadFull(c.br, c.head[:4]); err != nil {
		return nil, truncated(err)
	}
	maxBytes := c.srv.MaxFrameBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFrameBytes
	}
	if c.client.rawNext {
		return c.readRawFrame(maxBytes)
	}
	n, err := checkFrameSize([4]byte(c.head[:4]), MinFrameBytes, maxBytes)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(c.br, c.head[4:]); err != nil {
		return nil, truncated(err)
	}
	h := Header{
		Key:           int16(binary.BigEndian.Uint16(c.head[4:])),
		Version:       int16(binary.BigEndian.Uint16(c.head[6:])),
		CorrelationID: int32(binary.BigEndian.Uint32(c.head[8:])),
	}
	cost := int64(n)
	if c.srv.RequestCost != nil {
		if cost, err = c.srv.RequestCost(h, n); err != nil {
			return nil, err
		}
	}
	f := &frame{srv: c.srv}
	var ok bool
	if f.taken, ok = c.srv.RequestBudget.Take(cost, c.srv.stopping); !ok {
		return nil, ErrServerClosed
	}
	f.buf, f.pool = frameBuffer(n)
	f.buf = append(f.buf, c.head[4:]...)
	if f.buf, err = readBody(c.br, f.buf, n); err != nil {
		f.free()
		return nil, err
	}
	return f, nil
}

// readRawFrame reads the rest of a raw token frame (Conn.ExpectRawFrame), whose size prefix
// is in head: it has no request header, may be shorter than one, and costs its size.
func (c *conn) readRawFrame(maxBytes int) (*frame, error) {
	c.client.rawNext = false
	n, err := checkFrameSize([4]byte(c.head[:4]), 0, maxBytes)
	if err != nil {
		return nil, err
	}
	f := &frame{srv: c.srv, raw: true}
	var ok bool
	if f.taken, ok = c.srv.RequestBudget.Take(int64(n), c.srv.stopping); !ok {
		return nil, ErrServerClosed
	}
	f.buf, f.pool = frameBuffer(n)
	if f.buf, err = readBody(c.br, f.buf, n); err != nil {
		f.free()
		return nil, err
	}
	return f, nil
}

// readHead reads a frame's size prefix, which is where a connection waits between requests:
// with IdleTimeout set, a wait that long with no answer outstanding is errIdle; with answers
// outstanding (a JoinGroup computed alone, a slow client's queue) it waits on.
func (c *conn) readHead() error {
	got := 0
	for {
		if idle := c.srv.IdleTimeout; idle > 0 {
			if err := c.nc.SetReadDeadline(time.Now().Add(idle)); err != nil {
				return err
			}
			if c.srv.inShutdown.Load() { // Shutdown's deadline may have been overwritten
				return ErrServerClosed
			}
		}
		n, err := io.ReadFull(c.nc, c.head[got:4])
		got += n
		switch {
		case err == nil:
			return nil
		case got > 0 || c.srv.IdleTimeout <= 0 || !errors.Is(err, os.ErrDeadlineExceeded) || c.srv.inShutdown.Load():
			if got > 0 {
				return truncated(err)
			}
			return err
		case !c.outstanding():
			return errIdle
		}
	}
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("truncated frame: %w", err)
}

// waitMuted holds the reader while the connection is muted (Conn.MuteUntil); false when
// the connection or the server closed meanwhile.
func (c *conn) waitMuted() bool {
	for {
		wait := time.Until(time.Unix(0, c.client.muteUntil.Load()))
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.client.ctx.Done():
			t.Stop()
			return false
		case <-c.srv.hardClose:
			t.Stop()
			return false
		}
	}
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
	case <-c.client.ctx.Done():
		return false
	case <-c.srv.hardClose:
		return false
	}
}

func (c *conn) readFailed(err error) {
	switch {
	case c.srv.inShutdown.Load():
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		c.logger().V(1).Info("Client closed connection")
	case errors.Is(err, errIdle):
		c.srv.connError("idle")
		c.logger().V(1).Info("Closing connection", "reason", err.Error())
	case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameTooSmall):
		c.srv.connError("bad_frame")
		c.logger().Info("Closing connection", "reason", err.Error())
	default:
		c.srv.connError("read")
		c.logger().Info("Closing connection", "reason", err.Error())
	}
}

// handle parses one frame's header and hands the request to the Handler. It returns the
// answer: a frame (none when the request gets none), one computed later (pipeline.go), or an
// error that closes the connection. A handler panic is recovered here and closes only this
// connection.
func (c *conn) handle(f *frame) (a *answer) {
	if f.raw {
		return c.serve1(Header{}, &Request{Raw: true, Body: f.buf, Conn: c.client, srv: c.srv})
	}
	h, body, err := ParseHeader(f.buf)
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
		return finalAnswer(h, ans)
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
	c.logger().Error(fmt.Errorf("%v", r), "Handler panicked", "key", h.Key, "version", h.Version, "stack", string(debug.Stack()))
	return &answer{err: fmt.Errorf("key %d v%d: handler panicked: %v", h.Key, h.Version, r)}
}
