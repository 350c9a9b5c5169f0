package wire

import (
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
	cert, pool := selfSigned(t)
	seen := make(chan *tls.ConnectionState, 1)
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		seen <- r.Conn.TLS()
		return echo(r)
	})}
	ln := tls.NewListener(testkit.Listen(t), &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
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
	srv := &Server{Log: testr.New(t), Handler: HandlerFunc(func(r *Request) Answer {
		if r.Raw {
			tok := append([]byte("got:"), r.Body...)
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
	if _, err := c.Write([]byte{0, 0, 0, 2, 'h', 'i'}); err != nil { // two bytes: shorter than any header
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatal(err)
	}
	tok := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, tok); err != nil || string(tok) != "got:hi" {
		t.Fatalf("raw answer %q %v", tok, err)
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
