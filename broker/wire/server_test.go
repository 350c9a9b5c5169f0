package wire

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// The wire server's own contract, with a handler that speaks no Kafka: each answer echoes its
// request's body after the correlation id, so a test sees which request an answer is for.

// requestFrame is a request frame with header v1 (key, version, correlation id, client id)
// and body.
func requestFrame(key, version int16, correlationID int32, clientID string, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, 0)
	f = binary.BigEndian.AppendUint16(f, uint16(key))
	f = binary.BigEndian.AppendUint16(f, uint16(version))
	f = binary.BigEndian.AppendUint32(f, uint32(correlationID))
	f = binary.BigEndian.AppendUint16(f, uint16(len(clientID)))
	f = append(f, clientID...)
	f = append(f, body...)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// echo is the answer frame echoing r's body.
func echo(r *Request) Answer {
	body := bytes.Clone(r.Body)
	return Answer{Frame: AppendFrame(nil, r.CorrelationID, func(b []byte) []byte { return append(b, body...) })}
}

// readAnswer reads one answer frame and returns its correlation id and body.
func readAnswer(t *testing.T, c net.Conn) (int32, string) {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return int32(binary.BigEndian.Uint32(frame)), string(frame[4:])
}

// hooks records what a server reports through ConnState and ConnError.
type hooks struct {
	mu      sync.Mutex
	open    int
	reasons []string
}

func (h *hooks) state(_ net.Conn, s ConnState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s == StateNew {
		h.open++
	} else {
		h.open--
	}
}

func (h *hooks) connError(reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons = append(h.reasons, reason)
}

func (h *hooks) snapshot() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.open, slices.Clone(h.reasons)
}

// serve runs srv on a loopback listener until the test ends and returns its address.
func serve(t *testing.T, srv *Server) string {
	t.Helper()
	ln := testkit.Listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close() // always nil
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("connection still open, want it closed by the server")
		}
	}
}

func TestDeferredAnswersGoOutInRequestOrder(t *testing.T) {
	const n = 40
	release := make([]chan struct{}, n)
	for i := range release {
		release[i] = make(chan struct{})
	}
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		if r.Key == 1 { // deferred: computed once released
			i := r.CorrelationID
			a := echo(r)
			return Answer{Later: func() Answer { <-release[i]; return a }}
		}
		return echo(r)
	})}
	c := dial(t, serve(t, srv))
	var frames []byte
	for i := range int32(n) {
		frames = append(frames, requestFrame(int16(i%2), 0, i, "test", fmt.Appendf(nil, "request %d", i))...)
	}
	if _, err := c.Write(frames); err != nil { // one write: pipelined
		t.Fatal(err)
	}
	// Release the deferred answers in a random order; the writer must still keep request order.
	for _, i := range rand.Perm(n) {
		close(release[i])
	}
	for i := range int32(n) {
		id, body := readAnswer(t, c)
		if id != i || body != fmt.Sprintf("request %d", i) {
			t.Fatalf("answer %d: correlation %d body %q, want request %d's", i, id, body, i)
		}
	}
}

func TestAnAnswerComputedAloneHoldsTheNextRequest(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	var handled []int32
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		mu.Lock()
		handled = append(handled, r.CorrelationID)
		mu.Unlock()
		a := echo(r)
		if r.CorrelationID == 1 {
			return Answer{Later: func() Answer { <-release; return a }, Alone: true}
		}
		return a
	})}
	c := dial(t, serve(t, srv))
	_, _ = c.Write(append(requestFrame(0, 0, 1, "", []byte("join")), requestFrame(0, 0, 2, "", []byte("next"))...))
	time.Sleep(200 * time.Millisecond) // the second request is read meanwhile
	mu.Lock()
	got := slices.Clone(handled)
	mu.Unlock()
	if !slices.Equal(got, []int32{1}) {
		t.Fatalf("handled %v before the alone answer was computed, want only [1]", got)
	}
	close(release)
	for _, want := range []int32{1, 2} {
		if id, _ := readAnswer(t, c); id != want {
			t.Fatalf("answer for %d, want %d", id, want)
		}
	}
}

func TestAHandlerPanicClosesOnlyItsConnection(t *testing.T) {
	for _, tc := range []struct {
		name  string
		later bool
	}{{"in ServeKafka", false}, {"in a deferred answer", true}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hooks{}
			srv := &Server{Log: testr.New(t), ConnError: h.connError, Handler: HandlerFunc(func(r *Request) Answer {
				if string(r.Body) != "panic" {
					return echo(r)
				}
				if tc.later {
					return Answer{Later: func() Answer { panic("injected") }}
				}
				panic("injected")
			})}
			addr := serve(t, srv)
			healthy := dial(t, addr)
			_, _ = healthy.Write(requestFrame(0, 0, 1, "", []byte("hello")))
			readAnswer(t, healthy)

			victim := dial(t, addr)
			_, _ = victim.Write(requestFrame(0, 0, 1, "", []byte("panic")))
			expectClosed(t, victim)

			_, _ = healthy.Write(requestFrame(0, 0, 2, "", []byte("still here")))
			if _, body := readAnswer(t, healthy); body != "still here" {
				t.Fatalf("the other connection answered %q", body)
			}
			if _, reasons := h.snapshot(); !slices.Equal(reasons, []string{"panic"}) {
				t.Fatalf("connection errors %v, want [panic]", reasons)
			}
		})
	}
}

func TestBadFramesAndHeadersCloseTheConnectionWithTheirReason(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frame  []byte
		reason string
	}{
		{"a size prefix above the cap", binary.BigEndian.AppendUint32(nil, 65), "bad_frame"},
		{"a frame too small for a header", []byte{0, 0, 0, 3, 0, 3, 0}, "bad_frame"},
		{"a client id longer than the frame", func() []byte {
			f := requestFrame(0, 0, 1, "", nil)
			binary.BigEndian.PutUint16(f[12:], 0x7fff)
			return f
		}(), "bad_header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &hooks{}
			srv := &Server{Log: testr.New(t), MaxFrameBytes: 64, ConnError: h.connError, Handler: HandlerFunc(echo)}
			c := dial(t, serve(t, srv))
			_, _ = c.Write(tc.frame)
			expectClosed(t, c)
			if _, reasons := h.snapshot(); !slices.Equal(reasons, []string{tc.reason}) {
				t.Fatalf("connection errors %v, want [%s]", reasons, tc.reason)
			}
		})
	}
}

func TestAHandlerErrorClosesTheConnectionAfterTheAnswersBeforeIt(t *testing.T) {
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		if string(r.Body) == "refuse" {
			return Answer{Err: errors.New("refused")}
		}
		a := echo(r)
		return Answer{Later: func() Answer { return a }}
	})}
	c := dial(t, serve(t, srv))
	_, _ = c.Write(append(requestFrame(0, 0, 1, "", []byte("first")), requestFrame(0, 0, 2, "", []byte("refuse"))...))
	if id, _ := readAnswer(t, c); id != 1 {
		t.Fatalf("answer for %d, want the first request's", id)
	}
	expectClosed(t, c)
}

// Shutdown stops accepting, closes Stopping so a waiting handler answers, writes the answers
// owed and only then closes the connection.
func TestShutdownWaitsForTheAnswersOwed(t *testing.T) {
	h, handling := &hooks{}, make(chan struct{})
	srv := &Server{Log: testr.New(t), ConnState: h.state, Handler: HandlerFunc(func(r *Request) Answer {
		close(handling)
		a := echo(r)
		return Answer{Later: func() Answer { <-r.Stopping(); return a }} // a long poll
	})}
	ln := testkit.Listen(t)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	c := dial(t, ln.Addr().String())
	_, _ = c.Write(requestFrame(0, 0, 7, "", []byte("waiting")))
	<-handling // a request not read yet when Shutdown begins is never answered
	if open, _ := h.snapshot(); open != 1 {
		t.Fatalf("%d connections open, want 1", open)
	}

	if err := srv.Shutdown(testkit.Context(t)); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if id, body := readAnswer(t, c); id != 7 || body != "waiting" {
		t.Fatalf("answer %d %q after Shutdown, want the waiting request's", id, body)
	}
	expectClosed(t, c)
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve returned %v, want ErrServerClosed", err)
	}
	if open, _ := h.snapshot(); open != 0 {
		t.Fatalf("%d connections still open after Shutdown", open)
	}
	if err := srv.Serve(ln); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Shutdown returned %v", err)
	}
	_ = srv.Close()
	_ = srv.Close() // safe twice
}

// A Shutdown whose context ends first closes everything hard and returns the context's error.
func TestShutdownPastItsContextClosesHard(t *testing.T) {
	release, handling := make(chan struct{}), make(chan struct{})
	defer close(release)
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		close(handling)
		return Answer{Later: func() Answer {
			select {
			case <-release:
			case <-r.Context().Done(): // ends at the hard close
			}
			return Answer{}
		}}
	})}
	c := dial(t, serve(t, srv))
	_, _ = c.Write(requestFrame(0, 0, 1, "", nil))
	<-handling
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown returned %v, want the context's deadline", err)
	}
	expectClosed(t, c)
}

func TestParseHeader(t *testing.T) {
	id := "client"
	for _, tc := range []struct {
		name     string
		frame    []byte
		want     Header
		wantRest string
		wantErr  error
	}{
		{"a client id", requestFrame(3, 12, 42, "client", []byte("body"))[4:], Header{Key: 3, Version: 12, CorrelationID: 42, ClientID: &id}, "body", nil},
		{"a null client id", []byte{0, 18, 0, 3, 0, 0, 0, 9, 0xff, 0xff, 'x'}, Header{Key: 18, Version: 3, CorrelationID: 9}, "x", nil},
		{"too small", []byte{0, 18, 0, 3}, Header{}, "", ErrFrameTooSmall},
		{"a client id past the end", []byte{0, 18, 0, 3, 0, 0, 0, 9, 0, 5, 'x'}, Header{Key: 18, Version: 3, CorrelationID: 9}, "", ErrMalformedHeader},
		{"a negative client id length", []byte{0, 18, 0, 3, 0, 0, 0, 9, 0xff, 0xfe}, Header{Key: 18, Version: 3, CorrelationID: 9}, "", ErrMalformedHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, rest, err := ParseHeader(tc.frame)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			sameID := (h.ClientID == nil) == (tc.want.ClientID == nil) && (h.ClientID == nil || *h.ClientID == *tc.want.ClientID)
			if h.Key != tc.want.Key || h.Version != tc.want.Version || h.CorrelationID != tc.want.CorrelationID || !sameID || string(rest) != tc.wantRest {
				t.Fatalf("got %+v rest %q, want %+v rest %q", h, rest, tc.want, tc.wantRest)
			}
		})
	}
}

func TestAMutedConnectionHandlesNoRequestBeforeItsTime(t *testing.T) {
	const mute = 300 * time.Millisecond
	var mu sync.Mutex
	handledAt := map[int32]time.Time{}
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		mu.Lock()
		handledAt[r.CorrelationID] = time.Now()
		mu.Unlock()
		a := echo(r)
		if r.CorrelationID == 1 {
			// Muted by an answer computed later, once the reader already waits for the next
			// request: the next one must wait all the same.
			return Answer{Later: func() Answer {
				time.Sleep(50 * time.Millisecond)
				r.Conn.MuteUntil(time.Now().Add(mute))
				return a
			}}
		}
		return a
	})}
	addr := serve(t, srv)
	c := dial(t, addr)
	_, _ = c.Write(requestFrame(0, 0, 1, "", []byte("throttled")))
	if id, _ := readAnswer(t, c); id != 1 {
		t.Fatalf("answer for %d, want 1", id)
	}
	answered := time.Now()
	_, _ = c.Write(requestFrame(0, 0, 2, "", []byte("next")))
	if id, _ := readAnswer(t, c); id != 2 {
		t.Fatalf("answer for %d, want 2", id)
	}
	mu.Lock()
	second := handledAt[2]
	mu.Unlock()
	// The mute began before the first answer was written, so the second request cannot have
	// been handled sooner than mute − (a little) after it was read back.
	if early := answered.Add(mute - 60*time.Millisecond); second.Before(early) {
		t.Errorf("the next request was handled %v after the muting answer, before the %v mute ended", second.Sub(answered), mute)
	}
}
