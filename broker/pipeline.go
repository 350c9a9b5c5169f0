package broker

import (
	"fmt"
	"net"
	"runtime/debug"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Pipelining (docs/dataplane.md, "Pipelining"). A connection's reader handles its requests
// one after the other, so everything a handler does before it returns happens in request
// order — Produce appends included, which is what an idempotent producer's sequences need.
// But a handler may hand the part of its work that only waits to answerLater: an acks=-1
// Produce whose batches are written and now wait for their group-commit fsync. The reader
// then goes on to the next request while that answer is computed on a goroutine of its own,
// so a client that sends several Produce requests without waiting (kgo and Java producers
// keep up to five in flight) gets them into the same fsync round instead of one round each.
// The writer still sends answers strictly in request order, waiting for each deferred
// answer in turn. At most maxDeferred answers per connection are computed at once; the
// reader waits for a slot, which is the backpressure a pipelining client gets.

// maxDeferred bounds the deferred answers one connection computes at once: above the five
// produce requests kgo, librdkafka and the Java producer keep in flight.
const maxDeferred = 8

// answer is one response in a connection's order: known at once, or computed later.
type answer struct {
	b     []byte        // the encoded response; nil for a request that gets none
	bufs  net.Buffers   // or the encoded response in pieces (encodeAnswer: a Fetch answer)
	err   error         // not nil: close the connection instead of answering
	ready chan struct{} // nil when b and err are final; else closed once they are
}

// silent is an answer with nothing to write (a request that gets no answer).
func (a *answer) silent() bool { return a.b == nil && a.bufs == nil }

// answerLater makes fn compute the request's answer after the handler returns, while the
// connection goes on to its next requests (answers still go out in request order). The
// handler returns (nil, nil) after calling it. fn must not touch the request's bytes (kmsg
// request fields of type []byte alias the connection's frame buffer, which the next request
// reuses) and must end when rc.ctx does.
func (rc *requestContext) answerLater(fn func() (kmsg.Response, error)) {
	rc.later = fn
}

// answerLaterAlone is answerLater for a request whose answer waits on other clients (a
// JoinGroup waiting for its rebalance, a SyncGroup waiting for the leader's assignment): the
// connection still reads its next request — so a client that goes away is noticed and
// rc.connCtx ends — but handles it only once this answer is computed. Every request's effect
// thus follows the previous one's, as on an Apache broker, which reads nothing more from a
// connection until it has answered its request (the channel is muted meanwhile). fn must
// end when rc.connCtx does.
func (rc *requestContext) answerLaterAlone(fn func() (kmsg.Response, error)) {
	rc.later, rc.alone = fn, true
}

func (s *Server) pipelineDepth() int {
	if s.PipelineDepth == 0 {
		return maxDeferred
	}
	return s.PipelineDepth
}

// deferAnswer runs a handler's answerLater function on its own goroutine, once one of the
// connection's slots is free, and returns the answer the writer waits for. With pipelining
// off it runs fn here, before the next request is read.
func (c *conn) deferAnswer(h requestHeader, fn func() (kmsg.Response, error)) *answer {
	if c.srv.pipelineDepth() < 0 {
		resp, err := fn()
		switch {
		case err != nil:
			c.srv.Metrics.connError("handler")
			return &answer{err: fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)}
		case resp == nil:
			return &answer{}
		}
		return encodeAnswer(h.CorrelationID, resp)
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.dead:
		return &answer{err: fmt.Errorf("%s v%d: connection closed", kmsg.NameForKey(h.Key), h.Version)}
	case <-c.srv.hardClose:
		return &answer{err: ErrServerClosed}
	}
	a := &answer{ready: make(chan struct{})}
	c.srv.wg.Add(1)
	go func() {
		defer c.srv.wg.Done()
		defer func() { <-c.slots }()
		defer close(a.ready)
		defer func() {
			if r := recover(); r != nil {
				c.srv.Metrics.connError("panic")
				c.log.Error(fmt.Errorf("%v", r), "Handler panicked", "key", h.Key, "version", h.Version, "stack", string(debug.Stack()))
				a.b, a.err = nil, fmt.Errorf("%s v%d handler panicked: %v", kmsg.NameForKey(h.Key), h.Version, r)
			}
		}()
		resp, err := fn()
		switch {
		case err != nil:
			c.srv.Metrics.connError("handler")
			a.err = fmt.Errorf("%s v%d: %w", kmsg.NameForKey(h.Key), h.Version, err)
		case resp != nil:
			e := encodeAnswer(h.CorrelationID, resp)
			a.b, a.bufs = e.b, e.bufs
		}
	}()
	return a
}
