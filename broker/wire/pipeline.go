package wire

import (
	"fmt"
	"net"
)

// Pipelining (docs/dataplane.md, "Pipelining"). A connection's reader handles its requests
// one after the other, so everything a handler does before it returns happens in request
// order — Produce appends included, which is what an idempotent producer's sequences need.
// But a handler may hand the part of its work that only waits to Answer.Later: an acks=-1
// Produce whose batches are written and now wait for their group-commit fsync. The reader
// then goes on to the next request while that answer is computed on a goroutine of its own,
// so a client that sends several Produce requests without waiting (kgo and Java producers
// keep up to five in flight) gets them into the same fsync round instead of one round each.
// The writer still sends answers strictly in request order, waiting for each deferred
// answer in turn. At most maxDeferred answers per connection are computed at once; the
// reader waits for a slot, which is the backpressure a pipelining client gets.
//
// Answer.Alone is for a request whose answer waits on other clients (a JoinGroup waiting for
// its rebalance): the connection still reads its next request — so a client that goes away
// is noticed and Conn.Context ends — but handles it only once this answer is computed. Every
// request's effect thus follows the previous one's, as on an Apache broker, which reads
// nothing more from a connection until it has answered its request (the channel is muted
// meanwhile).

// maxDeferred bounds the deferred answers one connection computes at once: above the five
// produce requests kgo, librdkafka and the Java producer keep in flight.
const maxDeferred = 8

// answer is one response in a connection's order: known at once, or computed later.
type answer struct {
	b     []byte        // the encoded frame; nil for a request that gets none
	bufs  net.Buffers   // or the encoded frame in pieces (Answer.Frames)
	err   error         // not nil: close the connection instead of answering
	ready chan struct{} // nil when b and err are final; else closed once they are
	// closeAfter closes the connection once b is written (Answer.Close); set only on an
	// answer known at once.
	closeAfter bool
}

// silent is an answer with nothing to write (a request that gets no answer).
func (a *answer) silent() bool { return a.b == nil && a.bufs == nil }

func (s *Server) pipelineDepth() int {
	if s.PipelineDepth == 0 {
		return maxDeferred
	}
	return s.PipelineDepth
}

// deferAnswer runs a handler's Later function on its own goroutine, once one of the
// connection's slots is free, and returns the answer the writer waits for. With pipelining
// off it runs fn here, before the next request is read.
func (c *conn) deferAnswer(h Header, fn func() Answer) *answer {
	if c.srv.pipelineDepth() < 0 {
		return finalAnswer(h, fn())
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.dead:
		return &answer{err: fmt.Errorf("key %d v%d: connection closed", h.Key, h.Version)}
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
				p := c.panicked(h, r)
				a.b, a.bufs, a.err = nil, nil, p.err
			}
		}()
		f := finalAnswer(h, fn())
		a.b, a.bufs, a.err, a.closeAfter = f.b, f.bufs, f.err, f.closeAfter
	}()
	return a
}

// finalAnswer is what a Later function computed; a Later answer that defers again is a
// handler bug, answered by closing the connection.
func finalAnswer(h Header, ans Answer) *answer {
	if ans.Later != nil {
		return &answer{err: fmt.Errorf("key %d v%d: a deferred answer deferred again", h.Key, h.Version)}
	}
	return &answer{b: ans.Frame, bufs: ans.Frames, err: ans.Err, closeAfter: ans.Close}
}
