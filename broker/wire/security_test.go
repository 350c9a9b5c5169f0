package wire

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/paddock-dev/paddock/internal/testkit"
)

// selfSigned is a throwaway server certificate for 127.0.0.1.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}, pool
}

func TestATLSListenerHandshakesBeforeTheFirstRequestAndShowsTheState(t *testing.T) {
	seen := make(chan *tls.ConnectionState, 1)
	c := tlsServe(t, &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		seen <- r.Conn.TLS()
		return echo(r)
	})})
	if _, err := c.Write(requestFrame(3, 1, 7, "c", []byte("hello"))); err != nil {
		t.Fatal(err)
	}
	if id, body := readAnswer(t, c); id != 7 || body != "hello" {
		t.Fatalf("answer %d %q", id, body)
	}
	if st := <-seen; st == nil || !st.HandshakeComplete || st.Version < tls.VersionTLS12 {
		t.Fatalf("TLS state %+v", st)
	}
}

func TestAClientThatFailsTheHandshakeIsClosedAndCounted(t *testing.T) {
	cert, _ := selfSigned(t)
	h := &hooks{}
	srv := &Server{Log: testr.New(t), ConnError: h.connError, Handler: HandlerFunc(func(r *Request) Answer {
		t.Error("a request was handled without a handshake")
		return echo(r)
	})}
	ln := tls.NewListener(testkit.Listen(t), &tls.Config{Certificates: []tls.Certificate{cert}})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c := dial(t, ln.Addr().String())
	// A plaintext Kafka request on a TLS port is not a ClientHello.
	if _, err := c.Write(requestFrame(18, 0, 1, "c", nil)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	testkit.Eventually(t, "the handshake failure is counted", func() bool { _, r := h.snapshot(); return len(r) == 1 && r[0] == "tls_handshake" })
}

func TestARawFrameFollowsExpectRawFrameAndCanBeShort(t *testing.T) {
	c := rawTokenConn(t, nil, func(tok []byte) []byte { return append([]byte("got:"), tok...) })
	if _, err := c.Write([]byte{0, 0, 0, 2, 'h', 'i'}); err != nil { // two bytes: shorter than any header
		t.Fatal(err)
	}
	if tok := readRawAnswer(t, c); string(tok) != "got:hi" {
		t.Fatalf("raw answer %q", tok)
	}
	// The frame after the raw one is a request again.
	if _, err := c.Write(requestFrame(3, 1, 9, "c", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	if id, _ := readAnswer(t, c); id != 9 {
		t.Fatalf("answer %d", id)
	}
}

func TestAnAnswerThatClosesIsWrittenAndNothingAfterItIsHandled(t *testing.T) {
	handled := make(chan int32, 4)
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		handled <- r.CorrelationID
		a := echo(r)
		a.Close = r.CorrelationID == 1
		return a
	})}
	c := dial(t, serve(t, srv))
	frames := append(requestFrame(3, 1, 1, "c", []byte("last")), requestFrame(3, 1, 2, "c", []byte("never"))...)
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	if id, body := readAnswer(t, c); id != 1 || body != "last" {
		t.Fatalf("answer %d %q", id, body)
	}
	expectClosed(t, c)
	if got := <-handled; got != 1 {
		t.Fatalf("handled %d first", got)
	}
	select {
	case id := <-handled:
		t.Fatalf("request %d was handled after the closing answer", id)
	default:
	}
}

// tlsServe serves srv on a TLS listener with a throwaway certificate and dials it.
func tlsServe(t *testing.T, srv *Server) *tls.Conn {
	t.Helper()
	cert, pool := selfSigned(t)
	ln := tls.NewListener(testkit.Listen(t), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// TestFileAnswersReachATLSClient: over a real TLS listener (no sendfile: the bytes are
// encrypted in user space) an answer's file piece reaches the client byte for byte.
func TestFileAnswersReachATLSClient(t *testing.T) {
	data, f := segmentFile(t, 1<<20)
	const off, n = 12345, 700_000
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		head := AppendFrame(nil, r.CorrelationID, func(b []byte) []byte { return b })
		binary.BigEndian.PutUint32(head, uint32(4+n))
		return Answer{Pieces: []Piece{{Bytes: head}, {File: f, Offset: off, Len: n}}}
	})}
	c := tlsServe(t, srv)
	if _, err := c.Write(requestFrame(1, 4, 3, "c", nil)); err != nil {
		t.Fatal(err)
	}
	if id, body := readAnswer(t, c); id != 3 || body != string(data[off:off+n]) {
		t.Fatalf("answer %d: %d bytes, want %d bytes of the file from %d", id, len(body), n, off)
	}
}

// TestADeferredAnswerThatClosesClosesTheConnection: Answer.Close on an answer computed later
// (a failed authentication answered after the handler returned) is written, then the
// connection closes, over TLS too.
func TestADeferredAnswerThatClosesClosesTheConnection(t *testing.T) {
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		a := echo(r) // now: Later must not touch r.Body
		return Answer{Later: func() Answer { a.Close = true; return a }}
	})}
	c := tlsServe(t, srv)
	if _, err := c.Write(requestFrame(3, 1, 5, "c", []byte("bye"))); err != nil {
		t.Fatal(err)
	}
	if id, body := readAnswer(t, c); id != 5 || body != "bye" {
		t.Fatalf("answer %d %q", id, body)
	}
	expectClosed(t, c)
}

// TestARawFrameTakesFromTheRequestBudgetAndGivesItBack: a raw SASL token frame is read
// within the request budget like any request, and its bytes are given back once handled.
func TestARawFrameTakesFromTheRequestBudgetAndGivesItBack(t *testing.T) {
	budget := NewBudget(1 << 20)
	inUse := make(chan int64, 1)
	c := rawTokenConn(t, budget, func(tok []byte) []byte { inUse <- budget.InUse(); return bytes.Clone(tok) })
	tok := bytes.Repeat([]byte{'t'}, 3000)
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)); err != nil {
		t.Fatal(err)
	}
	if got := readRawAnswer(t, c); !bytes.Equal(got, tok) {
		t.Fatalf("raw answer of %d bytes, want the %d-byte token", len(got), len(tok))
	}
	if held := <-inUse; held != int64(len(tok)) {
		t.Fatalf("the raw frame held %d bytes of the request budget while handled, want %d", held, len(tok))
	}
	testkit.Eventually(t, "the raw frame's budget given back", func() bool { return budget.InUse() == 0 })
}

// readRawAnswer reads one bare size-prefixed frame (the answer to a raw token).
func readRawAnswer(t *testing.T, c net.Conn) []byte {
	t.Helper()
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// rawTokenConn is a connection to a server (with the request budget, nil for none) that
// expects a raw token frame after each request, answered with answer(token) as a bare frame;
// its first request (a v0 SaslHandshake) is already answered.
func rawTokenConn(t *testing.T, budget *Budget, answer func(tok []byte) []byte) net.Conn {
	t.Helper()
	srv := &Server{Log: testr.New(t), RequestBudget: budget, Handler: HandlerFunc(func(r *Request) Answer {
		if r.Raw {
			tok := answer(r.Body)
			return Answer{Frame: append(binary.BigEndian.AppendUint32(nil, uint32(len(tok))), tok...)}
		}
		r.Conn.ExpectRawFrame()
		return echo(r)
	})}
	c := dial(t, serve(t, srv))
	if _, err := c.Write(requestFrame(17, 0, 1, "c", []byte("PLAIN"))); err != nil {
		t.Fatal(err)
	}
	readAnswer(t, c)
	return c
}
