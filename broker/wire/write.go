package wire

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
)

// The writer side of a connection. Answers are queued by the reader in request order and
// written by a writer goroutine that the first queued answer starts and that ends when the
// queue is empty, so an idle connection parks no writer. The queue is bounded twice: in
// answers (responseQueue) and in the bytes they hold in memory (Server.MaxQueuedAnswerBytes);
// the reader reads no further request while either is reached — the backpressure a
// pipelining client that reads slowly gets. File data (Piece.File) is sent with sendfile
// where the connection is a plain TCP socket, and copied through a small pooled buffer
// otherwise (TLS), so it is never held in memory either way (docs/bounds.md, "Answers").

// answer is one response in a connection's order: known at once, or computed later.
type answer struct {
	b       []byte        // the encoded frame; nil for a request that gets none
	pieces  []Piece       // or the encoded frame in pieces (Answer.Pieces)
	err     error         // not nil: close the connection instead of answering
	release func()        // Answer.Release; called once, by done
	ready   chan struct{} // nil when the fields above are final; else closed once they are
	size    int64         // bytes held in memory, counted against the queue bound (known at once only)
	// closeAfter closes the connection once the answer is written (Answer.Close).
	closeAfter bool
}

// silent is an answer with nothing to write (a request that gets no answer).
func (a *answer) silent() bool { return a.b == nil && a.pieces == nil }

// heapBytes is how many bytes of memory the answer's frame holds (file pieces hold none).
func (a *answer) heapBytes() int64 {
	n := int64(len(a.b))
	for _, p := range a.pieces {
		n += int64(len(p.Bytes))
	}
	return n
}

// letGo releases what the answer holds (Answer.Release) once it is written or will never be:
// now, or for a deferred answer not yet computed, once it is. Called once per answer.
func (a *answer) letGo() {
	if a.ready != nil {
		select {
		case <-a.ready:
		default:
			go func() { <-a.ready; a.letGo() }()
			return
		}
	}
	if a.release != nil {
		a.release()
		a.release = nil
	}
}

func (s *Server) maxQueuedAnswerBytes() int64 {
	if s.MaxQueuedAnswerBytes == 0 {
		return DefaultMaxQueuedAnswerBytes
	}
	return int64(s.MaxQueuedAnswerBytes)
}

// enqueue hands a to the writer, starting one if none runs; false (a dropped) when the writer
// has stopped for good.
func (c *conn) enqueue(a *answer) bool {
	if a.ready == nil {
		a.size = a.heapBytes()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		a.letGo()
		return false
	}
	c.queue = append(c.queue, a)
	c.queued += a.size
	if a.ready == nil && a.closeAfter {
		c.lastQueued = true // the reader stops after it (serve)
	}
	if !c.writing {
		c.writing = true
		c.srv.wg.Add(1)
		go c.writeLoop()
	}
	return true
}

// waitForRoom holds the reader while the queue is full (in answers or in bytes); false when
// the writer stopped or the server closed meanwhile.
func (c *conn) waitForRoom() bool {
	limit := c.srv.maxQueuedAnswerBytes()
	for {
		c.mu.Lock()
		full := len(c.queue) >= responseQueue || (limit > 0 && c.queued > limit)
		dead := c.dead
		var room chan struct{}
		if full && !dead {
			if c.room == nil {
				c.room = make(chan struct{})
			}
			room = c.room
		}
		c.mu.Unlock()
		switch {
		case dead:
			return false
		case !full:
			return true
		}
		select {
		case <-room:
		case <-c.srv.hardClose:
			return false
		}
	}
}

// outstanding reports whether the connection owes its client an answer (queued, being
// computed or being written): such a connection is not idle.
func (c *conn) outstanding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0 || c.writing
}

// stopReading is the reader's last step: it closes the connection unless a writer still runs
// (which then flushes what is queued and closes it).
func (c *conn) stopReading() {
	c.mu.Lock()
	c.readerDone = true
	last := !c.writing
	c.mu.Unlock()
	if last {
		c.finish()
	}
}

// finish closes the connection and forgets it; called once, by the last of reader and writer.
func (c *conn) finish() {
	closeGently(c.nc)
	c.srv.untrackConn(c)
}

// drainWait bounds how long closeGently reads what a client sent and will not be answered.
const drainWait = 10 * time.Millisecond

// closeGently closes nc so that the client still reads every answer written: its send side
// first (the client sees the end after the last answer), then the requests it sent that were
// not read (pipelined behind a shutdown or a refused request) are read and dropped — closing a
// socket with unread input resets it, and a reset makes the client's kernel discard the
// answers it had not read yet. A connection the client already closed drains at once.
func closeGently(nc net.Conn) {
	if cw, ok := nc.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
		if nc.SetReadDeadline(time.Now().Add(drainWait)) == nil {
			buf := make([]byte, 4096)
			for {
				if _, err := nc.Read(buf); err != nil {
					break
				}
			}
		}
	}
	_ = nc.Close() // the reader is done and nothing is left to write
}

// writeLoop writes the queued answers in order, waiting for each deferred one in turn, and
// ends when the queue is empty (the next queued answer starts a new one), a write fails, or
// an answer is an error.
func (c *conn) writeLoop() {
	defer c.srv.wg.Done()
	for {
		c.mu.Lock()
		if len(c.queue) == 0 || c.dead {
			c.writing = false
			c.queue = nil
			last := c.readerDone
			c.mu.Unlock()
			if last {
				c.finish()
			}
			return
		}
		a := c.queue[0]
		c.queue[0] = nil
		c.queue = c.queue[1:]
		c.mu.Unlock()

		err := c.writeAnswer(a)
		a.letGo()
		c.mu.Lock()
		c.queued -= a.size
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
		closeNow := err == nil && a.closeAfter && !c.lastQueued
		c.mu.Unlock()
		switch {
		case err != nil:
			c.stopWriting(err)
		case closeNow:
			// A deferred answer that is the connection's last: the reader may be reading
			// further requests, which the close ends. One known at once was the reader's
			// last: nothing follows it, and the connection closes gently once it is written.
			c.stopWriting(errLastAnswer)
		}
	}
}

// errLastAnswer stops the writer after an answer with Answer.Close.
var errLastAnswer = errors.New("closed after its last answer")

// writeAnswer waits for a deferred answer, then writes it; an error stops the writer (an
// error answer, a failed write, the server closing).
func (c *conn) writeAnswer(a *answer) error {
	if a.ready != nil {
		select {
		case <-a.ready:
		case <-c.srv.hardClose:
			return ErrServerClosed
		}
	}
	if a.err != nil {
		return a.err
	}
	if a.silent() {
		return nil
	}
	if err := c.nc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
		return err
	}
	if a.pieces != nil {
		return writePieces(c.nc, a.pieces)
	}
	_, err := c.nc.Write(a.b)
	return err
}

// stopWriting ends the writer early: nothing more is queued, what is queued is dropped, the
// connection's context ends and the reader is woken from its read by the close.
func (c *conn) stopWriting(err error) {
	if err != ErrServerClosed && err != errLastAnswer && !c.srv.inShutdown.Load() {
		c.logger().Info("Closing connection", "reason", err.Error())
	}
	c.mu.Lock()
	c.dead = true
	for _, a := range c.queue {
		a.letGo()
	}
	c.queue, c.queued = nil, 0
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
	c.mu.Unlock()
	c.client.cancel()
	_ = c.nc.Close() // unblocks a reader waiting in Read; it then stops
}

// writePieces writes an answer's pieces in order: runs of bytes with one vectored write
// (writev on a TCP connection), file ranges with sendFile.
func writePieces(w net.Conn, pieces []Piece) error {
	var bufs net.Buffers
	for i := range pieces {
		p := &pieces[i]
		if p.File == nil {
			bufs = append(bufs, p.Bytes)
			continue
		}
		if len(bufs) > 0 {
			if _, err := bufs.WriteTo(w); err != nil {
				return err
			}
			bufs = nil
		}
		if err := sendFile(w, p.File, p.Offset, p.Len); err != nil {
			return err
		}
	}
	if len(bufs) > 0 {
		_, err := bufs.WriteTo(w)
		return err
	}
	return nil
}

// sendFile writes n bytes of f from off to w: with sendfile(2) when w is a socket the
// kernel can send a file to (no user-space copy), else through a pooled buffer (a TLS
// connection must encrypt the bytes itself). net.TCPConn's own ReadFrom would send from the
// file's shared offset (an io.LimitedReader of the *os.File is all it takes), which answers
// sharing one segment file cannot use; sendfile with an explicit offset leaves it alone.
func sendFile(w net.Conn, f *os.File, off, n int64) error {
	if sc, ok := w.(syscall.Conn); ok {
		sent, err, handled := sendFileSyscall(sc, f, off, n)
		if handled {
			return err
		}
		off, n = off+sent, n-sent
	}
	return copyFile(w, f, off, n)
}

// copyBuffers are copyFile's buffers: one per answer being written through a copy at once.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// copyFile writes n bytes of f from off to w through a pooled buffer.
func copyFile(w io.Writer, f *os.File, off, n int64) error {
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	got, err := io.CopyBuffer(writerOnly{w}, io.NewSectionReader(f, off, n), *buf)
	if err == nil && got < n {
		err = io.ErrUnexpectedEOF // the file is shorter than the answer says
	}
	return err
}

// writerOnly hides w's ReadFrom, so io.CopyBuffer uses the buffer it is given.
type writerOnly struct{ io.Writer }
