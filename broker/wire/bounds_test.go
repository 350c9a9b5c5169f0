package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// The bounds of docs/bounds.md as the wire server keeps them: requests, answers, connections.

// trickle yields its bytes, then blocks-free EOF: a client that claimed a large frame and
// sent little of it.
func claimFrame(claimed int, sent []byte) io.Reader {
	head := binary.BigEndian.AppendUint32(nil, uint32(claimed))
	return io.MultiReader(bytes.NewReader(head), bytes.NewReader(sent))
}

// TestAFrameClaimingTheCapAllocatesOnlyWhatArrives: a size prefix at the cap with a few bytes
// behind it used to allocate the whole claimed body before a byte of it arrived.
func TestAFrameClaimingTheCapAllocatesOnlyWhatArrives(t *testing.T) {
	const claimed = 30 << 20
	sent := requestFrame(3, 0, 1, "x", make([]byte, 1000))[4:]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(claimFrame(claimed, sent), nil, 32<<20)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadFrame = %v, want a truncated frame", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a frame claiming %d bytes with %d sent allocated %d bytes", claimed, len(sent), allocated)
	if allocated > 1<<20 {
		t.Fatalf("allocated %d bytes for %d bytes that arrived, want it to follow what arrives", allocated, len(sent))
	}
}

// TestAnOversizedFrameClosesItsConnectionWithALogLine: a size prefix above
// socket.request.max.bytes closes the connection before anything is allocated, and is
// counted as a bad frame.
func TestAnOversizedFrameClosesItsConnectionWithALogLine(t *testing.T) {
	h := &hooks{}
	srv := &Server{Log: testr.New(t), MaxFrameBytes: 1 << 20, ConnError: h.connError, Handler: HandlerFunc(echo)}
	c := dial(t, serve(t, srv))
	_, _ = c.Write(binary.BigEndian.AppendUint32(nil, 1<<20+1))
	expectClosed(t, c)
	if _, reasons := h.snapshot(); len(reasons) != 1 || reasons[0] != "bad_frame" {
		t.Fatalf("reasons %v, want [bad_frame]", reasons)
	}
}

// TestRequestsWaitUnreadWhileTheRequestBudgetIsSpent: a request that does not fit in
// queued.max.request.bytes is not read (nor handled) until the requests holding it are done.
func TestRequestsWaitUnreadWhileTheRequestBudgetIsSpent(t *testing.T) {
	budget := NewBudget(1 << 20)
	inFirst, releaseFirst := make(chan struct{}), make(chan struct{})
	var handled atomic.Int32
	srv := &Server{Log: testr.New(t), RequestBudget: budget, Handler: HandlerFunc(func(r *Request) Answer {
		handled.Add(1)
		if r.CorrelationID == 1 {
			close(inFirst)
			<-releaseFirst
		}
		return echo(r)
	})}
	addr := serve(t, srv)
	release := sync.OnceFunc(func() { close(releaseFirst) })
	t.Cleanup(release) // before the server's Close (cleanups run last first): a failure ends, not hangs
	first, second := dial(t, addr), dial(t, addr)
	_, _ = first.Write(requestFrame(0, 0, 1, "", make([]byte, 600<<10)))
	<-inFirst
	_, _ = second.Write(requestFrame(0, 0, 2, "", make([]byte, 600<<10)))
	testkit.EventuallyDetail(t, "the second request waits for the budget", func() (bool, string) {
		return budgetWaiters(budget) == 1, fmt.Sprintf("%d requests handled, %d waiting", handled.Load(), budgetWaiters(budget))
	})
	if n := handled.Load(); n != 1 || budget.InUse() > budget.Limit() {
		t.Fatalf("%d requests handled with %d of %d bytes in use, want only the first", n, budget.InUse(), budget.Limit())
	}
	release()
	if id, _ := readAnswer(t, first); id != 1 {
		t.Fatalf("first connection answered %d", id)
	}
	if id, _ := readAnswer(t, second); id != 2 {
		t.Fatalf("second connection answered %d", id)
	}
	testkit.Eventually(t, "the budget is given back", func() bool { return budget.InUse() == 0 })
}

func budgetWaiters(b *Budget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// TestARequestLargerThanTheBudgetStillGoesThroughAlone: a take above the whole budget waits
// until nothing else is held and then proceeds, so no request is refused for its size.
func TestARequestLargerThanTheBudgetStillGoesThroughAlone(t *testing.T) {
	b := NewBudget(100)
	if !b.TryTake(60) {
		t.Fatal("60 of 100 free bytes refused")
	}
	got := make(chan int64, 1)
	go func() { n, _ := b.Take(500, nil); got <- n }()
	testkit.Eventually(t, "the large take waits", func() bool { return budgetWaiters(b) == 1 })
	if b.TryTake(10) {
		t.Fatal("a small take jumped the line ahead of the waiting one")
	}
	b.Give(60)
	if n := <-got; n != 100 || b.InUse() != 100 {
		t.Fatalf("the large take got %d with %d in use, want the whole budget", n, b.InUse())
	}
}

// TestASlowReaderHoldsAtMostTheQueueBoundInAnswers: a client that pipelines requests and
// reads nothing used to get up to 64 answers queued whatever their size; the queue is bounded in
// bytes, so the connection reads no further request once the bound is queued.
func TestASlowReaderHoldsAtMostTheQueueBoundInAnswers(t *testing.T) {
	const answerBytes = 4 << 20
	var handled atomic.Int32
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		handled.Add(1)
		return Answer{Frame: AppendFrame(nil, r.CorrelationID, func(b []byte) []byte { return append(b, make([]byte, answerBytes)...) })}
	})}
	c := dial(t, serve(t, srv))
	_ = c.SetDeadline(time.Now().Add(3 * time.Minute)) // 160 MiB to read, under -race on a loaded machine
	// More requests than the bound, fewer than the 64 answers a queue held before.
	const requests = 40
	var frames []byte
	for i := range int32(requests) {
		frames = append(frames, requestFrame(0, 0, i, "", nil)...)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	n := settled(t, handled.Load)
	// What the kernel's socket buffers took is written, not queued: a few answers' worth.
	bound := DefaultMaxQueuedAnswerBytes/answerBytes + 1 + 16<<20/answerBytes
	t.Logf("%d requests handled before the connection stopped reading (queue bound %d MiB, answers %d MiB)", n, DefaultMaxQueuedAnswerBytes>>20, answerBytes>>20)
	if n > int32(bound) {
		t.Fatalf("%d answers of %d MiB computed for a client that reads nothing, want at most %d", n, answerBytes>>20, bound)
	}
	for i := range int32(requests) {
		if id, _ := readAnswer(t, c); id != i {
			t.Fatalf("answer %d has correlation %d", i, id)
		}
	}
}

// settled polls get until it stops changing for a while and returns it (the point where a
// server that waits for its client has done all it will do).
func settled(t *testing.T, get func() int32) int32 {
	t.Helper()
	last, since := get(), time.Now()
	for time.Since(since) < 500*time.Millisecond {
		time.Sleep(20 * time.Millisecond)
		if n := get(); n != last {
			last, since = n, time.Now()
		}
	}
	return last
}

// TestFileAnswersAreSentFromTheFile: an answer's file pieces reach the client byte for byte —
// with sendfile on TCP and through a copy on a connection that is not a socket (TLS) — even
// when many answers share one file at different offsets (the file's own offset is not used).
func TestFileAnswersAreSentFromTheFile(t *testing.T) {
	data, f := segmentFile(t, 3<<20)
	var released atomic.Int32
	handler := HandlerFunc(func(r *Request) Answer {
		off := int64(r.CorrelationID) * 100_003 % (1 << 20)
		n := int64(2<<20 - r.CorrelationID*1000)
		head := AppendFrame(nil, r.CorrelationID, func(b []byte) []byte { return b })
		binary.BigEndian.PutUint32(head, uint32(4+n+3))
		return Answer{Pieces: []Piece{{Bytes: head}, {File: f, Offset: off, Len: n}, {Bytes: []byte("end")}}, Release: func() { released.Add(1) }}
	})
	for _, plain := range []bool{true, false} {
		t.Run(fmt.Sprintf("socket=%v", plain), func(t *testing.T) {
			released.Store(0)
			srv := &Server{Log: testr.New(t), Handler: handler}
			ln := testkit.Listen(t)
			l := ln
			if !plain {
				l = notSocketListener{ln}
			}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { _ = srv.Close() })
			var wg sync.WaitGroup
			for k := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := dial(t, ln.Addr().String())
					var frames []byte
					for i := range int32(5) {
						frames = append(frames, requestFrame(0, 0, int32(k*5)+i, "", nil)...)
					}
					_, _ = c.Write(frames)
					for i := range int32(5) {
						id := int32(k*5) + i
						gotID, body := readAnswer(t, c)
						off := int64(id) * 100_003 % (1 << 20)
						want := append(bytes.Clone(data[off:off+int64(2<<20-id*1000)]), "end"...)
						if gotID != id || body != string(want) {
							t.Errorf("answer %d: correlation %d, %d bytes, want %d bytes of the file from %d", id, gotID, len(body), len(want), off)
						}
					}
				}()
			}
			wg.Wait()
			testkit.Eventually(t, "every answer released once written", func() bool { return released.Load() == 20 })
		})
	}
}

// notSocketListener hands out connections that hide their socket, as a TLS connection does.
// segmentFile is an open file of size patterned bytes (closed when the test ends), and its
// contents.
func segmentFile(t *testing.T, size int) ([]byte, *os.File) {
	t.Helper()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 31)
	}
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return data, f
}

type notSocketListener struct{ net.Listener }

func (l notSocketListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return notSocket{c}, nil
}

type notSocket struct{ net.Conn }

// TestAnIdleConnectionIsClosedAfterConnectionsMaxIdle: a connection that sends nothing for
// connections.max.idle.ms is closed; one whose answer is still being computed is not idle.
func TestAnIdleConnectionIsClosedAfterConnectionsMaxIdle(t *testing.T) {
	h := &hooks{}
	release := make(chan struct{})
	srv := &Server{Log: testr.New(t), IdleTimeout: 200 * time.Millisecond, ConnError: h.connError, Handler: HandlerFunc(func(r *Request) Answer {
		a := echo(r)
		if r.CorrelationID == 1 {
			return Answer{Later: func() Answer { <-release; return a }, Alone: true}
		}
		return a
	})}
	addr := serve(t, srv)
	idle := dial(t, addr)
	start := time.Now()
	expectClosed(t, idle)
	t.Logf("idle connection closed after %s", time.Since(start))

	waiting := dial(t, addr)
	_, _ = waiting.Write(requestFrame(0, 0, 1, "", []byte("join")))
	// The answer takes several idle timeouts; the connection must still get it.
	go func() { time.Sleep(time.Second); close(release) }()
	if id, body := readAnswer(t, waiting); id != 1 || body != "join" {
		t.Fatalf("answer %d %q, want the join's", id, body)
	}
	expectClosed(t, waiting) // and once answered it is idle again
	if _, reasons := h.snapshot(); len(reasons) != 2 || reasons[0] != "idle" || reasons[1] != "idle" {
		t.Fatalf("reasons %v, want two idle closes", reasons)
	}
}

// TestConnectionsPastTheCapsAreRefused: past max.connections.per.ip (or its override for an
// address) a new connection from that address is closed at once; past max.connections any new
// one is; a connection from this host itself (the liveness probe) is always served.
func TestConnectionsPastTheCapsAreRefused(t *testing.T) {
	from := func(ip string) func(t *testing.T, addr string) net.Conn {
		return func(t *testing.T, addr string) net.Conn {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			_ = c.SetDeadline(time.Now().Add(30 * time.Second))
			return c
		}
	}
	works := func(t *testing.T, c net.Conn) {
		t.Helper()
		_, _ = c.Write(requestFrame(0, 0, 9, "", []byte("hi")))
		if id, _ := readAnswer(t, c); id != 9 {
			t.Fatalf("answer %d", id)
		}
	}
	h := &hooks{}
	srv := &Server{Log: testr.New(t), ConnError: h.connError, Handler: HandlerFunc(echo),
		MaxConnections: 4, MaxConnectionsPerIP: 2,
		MaxConnectionsPerIPOverrides: map[netip.Addr]int{netip.MustParseAddr("127.0.0.3"): 1}}
	addr := serve(t, srv) // on 127.0.0.1
	a1, a2 := from("127.0.0.2")(t, addr), from("127.0.0.2")(t, addr)
	works(t, a1)
	works(t, a2)
	a3 := from("127.0.0.2")(t, addr)
	expectClosed(t, a3)
	b1 := from("127.0.0.3")(t, addr)
	works(t, b1)
	expectClosed(t, from("127.0.0.3")(t, addr))
	c1 := from("127.0.0.4")(t, addr)
	works(t, c1) // four served now
	expectClosed(t, from("127.0.0.5")(t, addr))
	self := from("127.0.0.1")(t, addr)
	works(t, self) // from this host: the probe, served past the cap
	_, reasons := h.snapshot()
	want := []string{"max_connections_per_ip", "max_connections_per_ip", "max_connections"}
	if fmt.Sprint(reasons) != fmt.Sprint(want) {
		t.Fatalf("reasons %v, want %v", reasons, want)
	}
	_ = a1.Close()
	_ = self.Close()
	testkit.Eventually(t, "a closed connection frees its address's slot", func() bool {
		c := from("127.0.0.2")(t, addr)
		_, _ = c.Write(requestFrame(0, 0, 9, "", nil))
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		_, err := io.ReadFull(c, make([]byte, 4))
		return err == nil
	})
}

// TestAnIdleConnectionHoldsOnlyItsReader: once its answer is written, an idle connection is
// its reader goroutine parked in a read and a small struct — no writer goroutine (one runs
// only while answers are queued) and no read buffer kept between requests. A writer per
// connection would leave twice the goroutines; a kept read buffer, 16 KiB or more of heap
// per connection (BenchmarkIdleConnections measures the resulting RSS).
func TestAnIdleConnectionHoldsOnlyItsReader(t *testing.T) {
	const conns = 200
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(echo)}
	addr := serve(t, srv)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC() // a second collection empties the pools' victim caches too
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	goroutines, heapBefore := runtime.NumGoroutine(), heap()
	for i := range int32(conns) {
		c := dial(t, addr)
		_, _ = c.Write(requestFrame(0, 0, i, "", make([]byte, 1000)))
		if id, _ := readAnswer(t, c); id != i {
			t.Fatalf("answer %d to request %d", id, i)
		}
	}
	testkit.EventuallyDetail(t, "every answered connection parks only its reader", func() (bool, string) {
		n := runtime.NumGoroutine() - goroutines
		return n <= conns, fmt.Sprintf("%d goroutines for %d idle connections", n, conns)
	})
	perConn := (int64(heap()) - int64(heapBefore)) / conns
	t.Logf("an idle connection holds %d B of heap (both ends of it, in this process)", perConn)
	if perConn > 8<<10 {
		t.Fatalf("an idle connection holds %d B of heap, want no read buffer kept (well under 8 KiB)", perConn)
	}
}
