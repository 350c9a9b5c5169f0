package wire

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// Handler answers the requests a Server reads. The server calls ServeKafka on the
// connection's reader goroutine, one request at a time and in request order, so everything a
// handler does before it returns happens in that order; the answers are written in the same
// order. A handler that panics closes only its connection.
type Handler interface {
	ServeKafka(r *Request) Answer
}

// HandlerFunc adapts a function to a Handler.
type HandlerFunc func(r *Request) Answer

// ServeKafka calls f(r).
func (f HandlerFunc) ServeKafka(r *Request) Answer { return f(r) }

// Request is one request frame as the server read it.
type Request struct {
	// Header is the parsed request header; zero for a Raw frame.
	Header
	// Raw is true for a frame read after the handler called Conn.ExpectRawFrame: a bare
	// size-prefixed token (a SASL token after a v0 SaslHandshake), not a Kafka request. Body
	// is then the whole frame. Its answer, if any, is a bare frame too.
	Raw bool
	// Body is the rest of the frame after the client id: the tagged fields of a flexible (v2)
	// request header, then the request body. It aliases the connection's read buffer, which
	// the next request reuses: it is valid until ServeKafka returns, and an Answer's Later
	// function must not touch it.
	Body []byte
	// Conn is the connection the request arrived on.
	Conn *Conn

	srv *Server
}

// Context ends when the server closes (Close, or Shutdown once every connection is done):
// what a handler that waits (for another process, or for a log) bounds its wait with. It
// does not end when the client goes away; Conn.Context does.
func (r *Request) Context() context.Context { return r.srv.base }

// Stopping is closed once Shutdown or Close begins: a handler that waits for data (a long
// poll) answers at once with what it has, so the connection can be drained.
func (r *Request) Stopping() <-chan struct{} { return r.srv.stopping }

// Answer is a handler's reply to one request: a frame to write (or none), an error that
// closes the connection, or a function that computes the reply after ServeKafka returned.
type Answer struct {
	// Frame is the complete response frame, size prefix included. nil with Pieces nil: the
	// request gets no answer (a Produce with acks=0).
	Frame []byte
	// Pieces is the frame in pieces, written instead of Frame: bytes with one vectored write,
	// and ranges of open files from the file without a copy where the connection allows it
	// (an answer that carries file data: write.go).
	Pieces []Piece
	// Release, when set, is called once the answer has been written or will never be (the
	// connection closed first): what the answer holds — open files, a Budget's bytes — can
	// be let go then.
	Release func()
	// Err, when not nil, closes the connection instead of answering; it is logged as the
	// reason. Answers queued before it are still written.
	Err error
	// Later, when set, computes the answer on a goroutine of its own while the connection
	// reads and handles its next requests (pipeline.go); the writer still sends answers in
	// request order. It must not touch the request's Body, and must end when the request's
	// Context does. The Answer it returns must not itself have Later set.
	Later func() Answer
	// Alone, with Later, holds the connection's next request until Later has returned: the
	// reader still reads it (so a client that goes away is noticed and Conn.Context ends),
	// but handles it only then. For a request whose answer waits on other clients.
	Alone bool
	// Close closes the connection once Frame (or Pieces) is written, and reads no further
	// request: an answer that is the connection's last (a failed authentication).
	Close bool
}

// Piece is one part of an answer written in pieces: Bytes, or (File set) Len bytes of File
// from Offset. A file is sent with sendfile on a TCP connection (no user-space copy) and
// copied through a small buffer on any other (a TLS connection); it is read only
// positionally, so many answers may share one file, and must stay open until the answer's
// Release.
type Piece struct {
	Bytes       []byte
	File        *os.File
	Offset, Len int64
}

// Conn is one client connection as its handler sees it. It is the connection's per-client
// state: where what the connection has proved about its client (a TLS peer, a SASL
// principal) belongs once listeners carry security.
type Conn struct {
	nc net.Conn
	ln net.Listener
	// ctx ends when the connection's reader stops or the server closes; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	// tls is the completed handshake's state on a TLS listener; nil otherwise. Set before
	// the first request is read, never changed after.
	tls *tls.ConnectionState
	// auth and rawNext belong to the handler: read and written only from ServeKafka, which
	// the reader goroutine calls one request at a time.
	auth    any
	rawNext bool
	// muteUntil is when the reader may handle the connection's next request again (unix
	// nanoseconds; 0 or past: now): a throttled client's connection (MuteUntil).
	muteUntil atomic.Int64
}

// MuteUntil holds the connection's next requests until t: the reader reads and handles no
// request before then (they wait in the socket, as Apache mutes a throttled channel), while
// answers already queued are still written. A later call can only extend the hold. Safe for
// concurrent use (an answer computed later may throttle too).
func (c *Conn) MuteUntil(t time.Time) {
	until := t.UnixNano()
	for {
		cur := c.muteUntil.Load()
		if cur >= until || c.muteUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// TLS is the connection's TLS state (peer certificates, version, cipher suite) when it was
// accepted on a TLS listener (Serve with a listener from tls.NewListener); nil otherwise.
// The handshake is complete before the first request is read.
func (c *Conn) TLS() *tls.ConnectionState { return c.tls }

// Auth is what the handler recorded of the connection's authentication with SetAuth (a
// SASL session, the principal it proved); nil until then. The server never reads it.
// Call it only from ServeKafka.
func (c *Conn) Auth() any { return c.auth }

// SetAuth records what the connection proved about its client. Call it only from
// ServeKafka.
func (c *Conn) SetAuth(v any) { c.auth = v }

// ExpectRawFrame makes the connection's next frame a bare token rather than a Kafka request
// (Request.Raw): what follows a v0 SaslHandshake. Call it only from ServeKafka.
func (c *Conn) ExpectRawFrame() { c.rawNext = true }

// Context ends when the connection's reader stops (the client went away, or the server is
// closing it) or the server closes: what a request that waits for other clients (a
// JoinGroup waiting for its rebalance) waits on.
func (c *Conn) Context() context.Context { return c.ctx }

// RemoteAddr is the client's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr is the address the client connected to.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Listener is the listener the connection was accepted on, exactly as it was passed to
// Serve: a handler may pass what it needs per listener (the address it advertises there)
// by wrapping the listener in a type of its own.
func (c *Conn) Listener() net.Listener { return c.ln }
