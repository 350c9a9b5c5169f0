package wire

import (
	"fmt"
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
	if c.slots == nil {
		c.slots = make(chan struct{}, max(c.srv.pipelineDepth(), 1))
	}
	select {
	case c.slots <- struct{}{}:
	case <-c.client.ctx.Done():
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
				a.b, a.pieces, a.err, a.release = nil, nil, p.err, nil
			}
		}()
		f := finalAnswer(h, fn())
		a.b, a.pieces, a.err, a.release, a.closeAfter = f.b, f.pieces, f.err, f.release, f.closeAfter
	}()
	return a
}

// finalAnswer is what a Later function computed; a Later answer that defers again is a
// handler bug, answered by closing the connection.
func finalAnswer(h Header, ans Answer) *answer {
	if ans.Later != nil {
		if ans.Release != nil {
			ans.Release()
		}
		return &answer{err: fmt.Errorf("key %d v%d: a deferred answer deferred again", h.Key, h.Version)}
	}
	return &answer{b: ans.Frame, pieces: ans.Pieces, err: ans.Err, release: ans.Release, closeAfter: ans.Close}
}
