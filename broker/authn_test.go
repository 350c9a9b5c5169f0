package broker

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
	clocktesting "k8s.io/utils/clock/testing"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// The listeners' security end to end: a real Broker (Run, its listeners, its TLS configs)
// over an in-memory view and security state, driven by franz-go's kgo with its own TLS and
// SASL implementations.

// pkiFixture is a cluster CA and a clients CA, as the operator makes them.
type pkiFixture struct {
	clusterCA, clientsCA *pki.CA
}

func newPKI(t *testing.T) *pkiFixture {
	t.Helper()
	f := &pkiFixture{}
	var err error
	for _, ca := range []**pki.CA{&f.clusterCA, &f.clientsCA} {
		if *ca, err = pki.NewCA("test CA", "paddock.dev", time.Now(), 24*time.Hour, rand.Reader); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// brokerCert is a broker certificate for 127.0.0.1 from the cluster CA.
func (f *pkiFixture) brokerCert(t *testing.T) *tls.Certificate {
	t.Helper()
	return issue(t, f.clusterCA, pki.Leaf{Subject: pkix.Name{CommonName: "c-broker", Organization: []string{"paddock.dev"}},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true}, time.Hour)
}

// clientCert is a client certificate CN=name from ca.
func clientCert(t *testing.T, ca *pki.CA, name string, validity time.Duration) *tls.Certificate {
	t.Helper()
	return issue(t, ca, pki.Leaf{Subject: pkix.Name{CommonName: name}, Client: true}, validity)
}

func issue(t *testing.T, ca *pki.CA, leaf pki.Leaf, validity time.Duration) *tls.Certificate {
	t.Helper()
	certPEM, keyPEM, err := ca.Issue(leaf, time.Now(), validity, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return &pair
}

func pool(cas ...*pki.CA) *x509.CertPool {
	p := x509.NewCertPool()
	for _, ca := range cas {
		p.AddCert(ca.Cert)
	}
	return p
}

// credentials are the salted credentials of user with password, both mechanisms.
func credentials(t *testing.T, password string) scram.Stored {
	t.Helper()
	out := scram.Stored{}
	for _, m := range scram.Mechanisms {
		salt := make([]byte, 16)
		_, _ = rand.Read(salt)
		c, err := m.Salt(password, salt, scram.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		out[m.Name] = c
	}
	return out
}

// securedBroker is a running Broker with the given listeners, one topic "t" it leads, and
// security state the test sets.
type securedBroker struct {
	b     *Broker
	sec   *cluster.MemorySecurity
	view  *cluster.MemoryView
	addrs map[string]string // listener name → address
	state cluster.SecuritySnapshot
	mu    sync.Mutex
}

func startSecuredBroker(t *testing.T, state cluster.SecuritySnapshot, listeners ...cluster.ListenerSpec) *securedBroker {
	t.Helper()
	for i := range listeners {
		listeners[i].Host, listeners[i].Type = "127.0.0.1", v1alpha1.ListenerInternal
	}
	cfg := Config{
		Cluster: "c", Listeners: listeners, HealthPort: testkit.FreePort(t), BindAddress: "127.0.0.1",
		DataDir: t.TempDir(), DrainTimeout: time.Second,
		Identity: cluster.Identity{ID: 0, Pod: "c-broker-0", UID: "u0", Namespace: "kafka"},
	}
	view := cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID,
		Topics: []cluster.Topic{{Name: "t", ID: [16]byte{7}, Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}}})
	sb := &securedBroker{sec: &cluster.MemorySecurity{}, view: view, addrs: map[string]string{}, state: state}
	sb.sec.Set(state)
	sb.b = NewBroker(cfg, view, testr.New(t))
	sb.b.Security = sb.sec
	listening := make(chan struct{})
	sb.b.OnListening = func(kafka []net.Addr, _ net.Addr) {
		for i, a := range kafka {
			sb.addrs[listeners[i].Name] = a.String()
		}
		close(listening)
	}
	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- sb.b.Run(ctx, make(chan os.Signal)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-result; !errors.Is(err, context.Canceled) {
			t.Errorf("broker stopped with %v, want the context's cancellation", err)
		}
	})
	select {
	case <-listening:
	case err := <-result:
		t.Fatalf("broker stopped at start: %v", err)
	}
	// Each listener advertises where it was bound.
	rows := []v1alpha1.BrokerRow{{ID: 0, State: v1alpha1.BrokerServing, Health: v1alpha1.BrokerAlive}}
	for name, a := range sb.addrs {
		_, port, _ := net.SplitHostPort(a)
		rows[0].Listeners = append(rows[0].Listeners, v1alpha1.ListenerAddress{Name: name, Host: "127.0.0.1", Port: int32(atoiOrZero(port))})
	}
	view.Set(cluster.Snapshot{ClusterID: testClusterID, Brokers: rows,
		Topics: []cluster.Topic{{Name: "t", ID: [16]byte{7}, Partitions: []cluster.Partition{{Index: 0, Leader: 0, LeaderEpoch: 1}}}}})
	testkit.Eventually(t, "the partition taken over", sb.b.CaughtUp)
	return sb
}

func atoiOrZero(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// update changes the security state as an informer event would.
func (sb *securedBroker) update(change func(*cluster.SecuritySnapshot)) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	change(&sb.state)
	sb.sec.Set(sb.state)
}

// client is a kgo client of listener name with opts.
func (sb *securedBroker) client(t *testing.T, name string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sb.addrs[name]), kgo.DefaultProduceTopic("t"),
		kgo.RequestRetries(0), kgo.RetryTimeout(2 * time.Second), kgo.RecordDeliveryTimeout(10 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produceAndRead asks for Metadata (what fails at once when the connection cannot
// authenticate), then produces one record and fetches it back from offset 0.
func produceAndRead(t *testing.T, cl *kgo.Client, value string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(value)}).FirstErr(); err != nil {
		return err
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "t"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset < 1 {
		return fmt.Errorf("after the produce: error %d, end offset %d", p.ErrorCode, p.Offset)
	}
	return nil
}

func secureState(f *pkiFixture, users map[string]scram.Stored) cluster.SecuritySnapshot {
	return cluster.SecuritySnapshot{ClusterCAs: pool(f.clusterCA), ClientCAs: pool(f.clientsCA), MutualTLSCAs: pool(f.clientsCA, f.clusterCA),
		Credentials: users, Users: map[string]cluster.User{}}
}

func TestTLSListenerServesWithTheIssuedCertificateAndReloadsIt(t *testing.T) {
	f := newPKI(t)
	state := secureState(f, nil)
	state.Certificate = f.brokerCert(t)
	sb := startSecuredBroker(t, state, cluster.ListenerSpec{Name: "tls", TLS: true})
	trusting := &tls.Config{RootCAs: pool(f.clusterCA), MinVersion: tls.VersionTLS12}

	cl := sb.client(t, "tls", kgo.DialTLSConfig(trusting))
	if err := produceAndRead(t, cl, "over tls"); err != nil {
		t.Fatalf("produce over TLS: %v", err)
	}
	t.Run("a client that does not trust the cluster CA cannot connect", func(t *testing.T) {
		other := newPKI(t)
		bad := sb.client(t, "tls", kgo.DialTLSConfig(&tls.Config{RootCAs: pool(other.clusterCA)}))
		if err := produceAndRead(t, bad, "never"); err == nil {
			t.Fatal("produced through a broker the client cannot verify")
		}
	})
	t.Run("TLS 1.1 is refused", func(t *testing.T) {
		_, err := tls.Dial("tcp", sb.addrs["tls"], &tls.Config{RootCAs: pool(f.clusterCA), MaxVersion: tls.VersionTLS11})
		if err == nil {
			t.Fatal("a TLS 1.1 handshake succeeded")
		}
	})
	t.Run("a renewed certificate is served to new connections; open ones go on", func(t *testing.T) {
		renewed := f.brokerCert(t)
		sb.update(func(s *cluster.SecuritySnapshot) { s.Certificate = renewed })
		c, err := tls.Dial("tcp", sb.addrs["tls"], trusting)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		if got := c.ConnectionState().PeerCertificates[0]; !got.Equal(renewed.Leaf) {
			t.Fatal("the new connection got the old certificate")
		}
		if err := produceAndRead(t, cl, "after renewal"); err != nil {
			t.Fatalf("the open client failed after the renewal: %v", err)
		}
	})
}

func TestABrokerWithoutItsCertificateIsNotReadyAndRefusesHandshakes(t *testing.T) {
	f := newPKI(t)
	sb := startSecuredBroker(t, secureState(f, nil), cluster.ListenerSpec{Name: "tls", TLS: true})
	if r := sb.b.healthReport(); r.Ready || len(r.NoCertificate) != 1 {
		t.Fatalf("ready %v, no certificate %v", r.Ready, r.NoCertificate)
	}
	if _, err := tls.Dial("tcp", sb.addrs["tls"], &tls.Config{RootCAs: pool(f.clusterCA)}); err == nil {
		t.Fatal("handshake without a certificate")
	}
	sb.update(func(s *cluster.SecuritySnapshot) { s.Certificate = f.brokerCert(t) })
	if r := sb.b.healthReport(); len(r.NoCertificate) != 0 {
		t.Fatalf("still no certificate: %v", r.NoCertificate)
	}
}

func TestSCRAMAndPlainAuthenticateKafkaUsersOnly(t *testing.T) {
	f := newPKI(t)
	state := secureState(f, map[string]scram.Stored{"alice": credentials(t, "s3cret")})
	state.Certificate = f.brokerCert(t)
	sb := startSecuredBroker(t, state,
		cluster.ListenerSpec{Name: "s512", TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512},
		cluster.ListenerSpec{Name: "s256", TLS: true, Authentication: v1alpha1.AuthenticationScramSHA256},
		cluster.ListenerSpec{Name: "plain", TLS: true, Authentication: v1alpha1.AuthenticationPlain},
		cluster.ListenerSpec{Name: "cleartext-scram", Authentication: v1alpha1.AuthenticationScramSHA512})
	dialTLS := kgo.DialTLSConfig(&tls.Config{RootCAs: pool(f.clusterCA)})
	mech := map[string]func(user, pass string) sasl.Mechanism{
		"s512":            func(u, p string) sasl.Mechanism { return kscram.Auth{User: u, Pass: p}.AsSha512Mechanism() },
		"s256":            func(u, p string) sasl.Mechanism { return kscram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
		"plain":           func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
		"cleartext-scram": func(u, p string) sasl.Mechanism { return kscram.Auth{User: u, Pass: p}.AsSha512Mechanism() },
	}
	for listener, m := range mech {
		opts := []kgo.Opt{}
		if listener != "cleartext-scram" {
			opts = append(opts, dialTLS)
		}
		t.Run(listener+": the right password", func(t *testing.T) {
			cl := sb.client(t, listener, append(opts, kgo.SASL(m("alice", "s3cret")))...)
			if err := produceAndRead(t, cl, listener); err != nil {
				t.Fatal(err)
			}
		})
		for name, creds := range map[string][2]string{"a wrong password": {"alice", "guess"}, "an unknown user": {"mallory", "s3cret"}} {
			t.Run(listener+": "+name, func(t *testing.T) {
				cl := sb.client(t, listener, append(opts, kgo.SASL(m(creds[0], creds[1])))...)
				err := produceAndRead(t, cl, "never")
				if !errors.Is(err, kerr.SaslAuthenticationFailed) {
					t.Fatalf("err %v, want SASL_AUTHENTICATION_FAILED", err)
				}
			})
		}
	}
	t.Run("the other mechanism is refused with the offered list", func(t *testing.T) {
		cl := sb.client(t, "s512", dialTLS, kgo.SASL(mech["s256"]("alice", "s3cret")))
		if err := produceAndRead(t, cl, "never"); !errors.Is(err, kerr.UnsupportedSaslMechanism) {
			t.Fatalf("err %v, want UNSUPPORTED_SASL_MECHANISM", err)
		}
	})
	t.Run("a client without SASL gets ApiVersions and nothing else", func(t *testing.T) {
		c := dialKafka(t, sb.addrs["cleartext-scram"])
		roundTrip(t, c, kmsg.NewPtrApiVersionsRequest())
		if _, err := tryRoundTrip(c, kmsg.NewPtrMetadataRequest(), 8); err == nil {
			t.Fatal("Metadata answered before authentication")
		}
		expectClosed(t, c)
	})
}

// A broker holds no password, so on a SASL listener over TLS another broker's certificate
// (the cluster CA's, the brokers' principal) admits it without SASL — how a transaction
// coordinator reaches a leader to write markers on a cluster whose listeners all use SCRAM.
// Nothing else a certificate says counts there.
func TestABrokersCertificateAdmitsItOnASASLListenerOverTLS(t *testing.T) {
	f := newPKI(t)
	state := secureState(f, map[string]scram.Stored{"alice": credentials(t, "s3cret")})
	state.Certificate = f.brokerCert(t)
	sb := startSecuredBroker(t, state, cluster.ListenerSpec{Name: "s512", TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512})
	withCert := func(c *tls.Certificate) kgo.Opt {
		return kgo.DialTLSConfig(&tls.Config{RootCAs: pool(f.clusterCA), Certificates: []tls.Certificate{*c}})
	}
	t.Run("a broker's certificate, no SASL", func(t *testing.T) {
		if err := produceAndRead(t, sb.client(t, "s512", withCert(f.brokerCert(t))), "from a broker"); err != nil {
			t.Fatal(err)
		}
	})
	for name, cert := range map[string]*tls.Certificate{
		"the brokers' name from the clients CA": issue(t, f.clientsCA, pki.Leaf{Subject: pkix.Name{CommonName: "c-broker", Organization: []string{"paddock.dev"}}, Client: true}, time.Hour),
		"the brokers' name from another CA":     issue(t, newPKI(t).clusterCA, pki.Leaf{Subject: pkix.Name{CommonName: "c-broker", Organization: []string{"paddock.dev"}}, Client: true}, time.Hour),
		"another name from the cluster CA":      issue(t, f.clusterCA, pki.Leaf{Subject: pkix.Name{CommonName: "alice"}, Client: true}, time.Hour),
	} {
		t.Run(name+", no SASL: refused", func(t *testing.T) {
			if err := produceAndRead(t, sb.client(t, "s512", withCert(cert)), "never"); err == nil {
				t.Fatal("a connection without SASL was served")
			}
		})
	}
	t.Run("a user's certificate does not stand in the way of its SASL", func(t *testing.T) {
		cl := sb.client(t, "s512", withCert(clientCert(t, f.clientsCA, "alice", time.Hour)),
			kgo.SASL(kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
		if err := produceAndRead(t, cl, "alice with a certificate"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestMutualTLSAdmitsTLSUsersOfTheClientsCA(t *testing.T) {
	f := newPKI(t)
	state := secureState(f, nil)
	state.Certificate = f.brokerCert(t)
	state.Users = map[string]cluster.User{"User:CN=alice": {Name: "alice", Principal: "User:CN=alice", Authentication: v1alpha1.UserTLS}}
	sb := startSecuredBroker(t, state, cluster.ListenerSpec{Name: "mtls", TLS: true, Authentication: v1alpha1.AuthenticationTLS})
	with := func(cert *tls.Certificate) kgo.Opt {
		cfg := &tls.Config{RootCAs: pool(f.clusterCA)}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{*cert}
		}
		return kgo.DialTLSConfig(cfg)
	}
	if err := produceAndRead(t, sb.client(t, "mtls", with(clientCert(t, f.clientsCA, "alice", time.Hour))), "mtls"); err != nil {
		t.Fatalf("alice: %v", err)
	}
	other := newPKI(t)
	for name, cert := range map[string]*tls.Certificate{
		"no certificate":                  nil,
		"a certificate of a foreign CA":   clientCert(t, other.clientsCA, "alice", time.Hour),
		"an expired certificate":          clientCert(t, f.clientsCA, "alice", -time.Minute),
		"a certificate for no KafkaUser":  clientCert(t, f.clientsCA, "mallory", time.Hour),
		"a certificate of the cluster CA": clientCert(t, f.clusterCA, "alice", time.Hour),
	} {
		t.Run(name+" is refused", func(t *testing.T) {
			if err := produceAndRead(t, sb.client(t, "mtls", with(cert)), "never"); err == nil {
				t.Fatal("produced")
			}
		})
	}
}

func TestADeletedUsersOpenConnectionIsClosedAtItsNextRequest(t *testing.T) {
	f := newPKI(t)
	state := secureState(f, map[string]scram.Stored{"alice": credentials(t, "s3cret")})
	state.Certificate = f.brokerCert(t)
	state.Users = map[string]cluster.User{"User:CN=bob": {Name: "bob", Principal: "User:CN=bob", Authentication: v1alpha1.UserTLS}}
	sb := startSecuredBroker(t, state,
		cluster.ListenerSpec{Name: "scram", TLS: true, Authentication: v1alpha1.AuthenticationScramSHA512},
		cluster.ListenerSpec{Name: "mtls", TLS: true, Authentication: v1alpha1.AuthenticationTLS})
	alice := sb.client(t, "scram", kgo.DialTLSConfig(&tls.Config{RootCAs: pool(f.clusterCA)}),
		kgo.SASL(kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism()))
	bob := sb.client(t, "mtls", kgo.DialTLSConfig(&tls.Config{RootCAs: pool(f.clusterCA), Certificates: []tls.Certificate{*clientCert(t, f.clientsCA, "bob", time.Hour)}}))
	for _, cl := range []*kgo.Client{alice, bob} {
		if err := produceAndRead(t, cl, "before"); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	sb.update(func(s *cluster.SecuritySnapshot) {
		s.Credentials = map[string]scram.Stored{}
		s.Users = map[string]cluster.User{}
	})
	for name, cl := range map[string]*kgo.Client{"scram": alice, "mtls": bob} {
		if err := produceAndRead(t, cl, "after"); err == nil {
			t.Fatalf("%s: produced after the user was deleted", name)
		}
		t.Logf("%s: refused %s after the deletion reached the broker", name, time.Since(deleted).Round(time.Microsecond))
	}
}

// saslClient drives SaslHandshake and SaslAuthenticate by hand over a raw connection.
func authenticateByHand(t *testing.T, c net.Conn, handshakeVersion int16, m sasl.Mechanism) (*kmsg.SASLAuthenticateResponse, error) {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = handshakeVersion, m.Name()
	if resp := roundTrip(t, c, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		return nil, kerr.ErrorForCode(resp.ErrorCode)
	}
	sess, token, err := m.Authenticate(context.Background(), "broker")
	if err != nil {
		t.Fatal(err)
	}
	for i := int32(0); ; i++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, token
		r, err := tryRoundTrip(c, req, 100+i)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			return resp, kerr.ErrorForCode(resp.ErrorCode)
		}
		done, next, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return resp, nil
		}
		token = next
	}
}

// handlerFixture serves one SASL listener from a Handler on a fake clock.
func handlerFixture(t *testing.T, auth v1alpha1.ListenerAuthenticationType, config map[string]string, log ...logr.Logger) (string, *clocktesting.FakeClock, *cluster.MemorySecurity) {
	t.Helper()
	if len(log) == 0 {
		log = []logr.Logger{testr.New(t)}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	sec := &cluster.MemorySecurity{}
	sec.Set(cluster.SecuritySnapshot{Credentials: map[string]scram.Stored{"alice": credentials(t, "s3cret")}})
	view := cluster.NewMemoryView(cluster.Snapshot{ClusterID: testClusterID, ConfigMap: config})
	h := &Handler{View: view, Log: log[0], Security: sec, Clock: clk, Cluster: "c"}
	srv := newTestServer(t, h)
	ln := testkit.Listen(t)
	go func() {
		_ = srv.Serve(advertiseListener(ln, cluster.ListenerSpec{Name: "sasl", Authentication: auth}, cluster.NewAddresses("c", nil, cluster.Identity{})))
	}()
	return ln.Addr().String(), clk, sec
}

func TestASessionPastConnectionsMaxReauthMsMustReauthenticate(t *testing.T) {
	addr, clk, _ := handlerFixture(t, v1alpha1.AuthenticationScramSHA256, map[string]string{"connections.max.reauth.ms": "60000"})
	c := dialKafka(t, addr)
	resp, err := authenticateByHand(t, c, 1, kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism())
	if err != nil {
		t.Fatal(err)
	}
	if resp.SessionLifetimeMillis != 60000 {
		t.Fatalf("session lifetime %d ms, want 60000", resp.SessionLifetimeMillis)
	}
	roundTrip(t, c, kmsg.NewPtrMetadataRequest())
	clk.Step(59 * time.Second)
	if _, err := authenticateByHand(t, c, 1, kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism()); err != nil {
		t.Fatalf("re-authentication: %v", err)
	}
	clk.Step(59 * time.Second) // past the first session's end, inside the second's
	roundTrip(t, c, kmsg.NewPtrMetadataRequest())
	clk.Step(2 * time.Second)
	if _, err := tryRoundTrip(c, kmsg.NewPtrMetadataRequest(), 9); err == nil {
		t.Fatal("answered after the session expired")
	}
	expectClosed(t, c)
}

func TestAReauthenticationMayNotChangeThePrincipal(t *testing.T) {
	addr, _, sec := handlerFixture(t, v1alpha1.AuthenticationScramSHA256, nil)
	sec.Set(cluster.SecuritySnapshot{Credentials: map[string]scram.Stored{"alice": credentials(t, "s3cret"), "bob": credentials(t, "b0b")}})
	c := dialKafka(t, addr)
	if _, err := authenticateByHand(t, c, 1, kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha256Mechanism()); err != nil {
		t.Fatal(err)
	}
	if _, err := authenticateByHand(t, c, 1, kscram.Auth{User: "bob", Pass: "b0b"}.AsSha256Mechanism()); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("err %v, want SASL_AUTHENTICATION_FAILED", err)
	}
	expectClosed(t, c)
}

func TestTooManyFailuresFromASourceAreRefusedUncheckedUntilTheWindowFrees(t *testing.T) {
	addr, clk, _ := handlerFixture(t, v1alpha1.AuthenticationScramSHA512, nil)
	try := func(pass string) error {
		c := dialKafka(t, addr)
		defer func() { _ = c.Close() }()
		_, err := authenticateByHand(t, c, 1, kscram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism())
		return err
	}
	for i := range authFailureBurst {
		if err := try("guess"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	if err := try("s3cret"); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("the right password was checked after %d failures: %v", authFailureBurst, err)
	}
	clk.Step(authFailureWindow)
	if err := try("s3cret"); err != nil {
		t.Fatalf("still refused once the window freed: %v", err)
	}
}

func TestAV0HandshakeCarriesTheTokensAsRawFrames(t *testing.T) {
	addr, _, _ := handlerFixture(t, v1alpha1.AuthenticationScramSHA512, nil)
	c := dialKafka(t, addr)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 0, scram.SHA512.Name
	if resp := roundTrip(t, c, hs).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	sess, token, _ := kscram.Auth{User: "alice", Pass: "s3cret"}.AsSha512Mechanism().Authenticate(context.Background(), "b")
	for {
		frame := append([]byte{0, 0, 0, 0}, token...)
		frame[0], frame[1], frame[2], frame[3] = byte(len(token)>>24), byte(len(token)>>16), byte(len(token)>>8), byte(len(token))
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		var size [4]byte
		if _, err := c.Read(size[:]); err != nil {
			t.Fatal(err)
		}
		reply := make([]byte, int(size[0])<<24|int(size[1])<<16|int(size[2])<<8|int(size[3]))
		if _, err := c.Read(reply); err != nil {
			t.Fatal(err)
		}
		done, next, err := sess.Challenge(reply)
		if err != nil {
			t.Fatal(err)
		}
		if done {
			break
		}
		token = next
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 7
	if resp := roundTrip(t, c, md).(*kmsg.MetadataResponse); resp.ClusterID == nil || *resp.ClusterID != testClusterID {
		t.Fatal("no Metadata after a v0 exchange")
	}
}

func TestAuthenticationFailuresLogNoCredential(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, prefix+" "+args)
	}, funcr.Options{})
	addr, _, _ := handlerFixture(t, v1alpha1.AuthenticationPlain, nil, log)
	for _, m := range []sasl.Mechanism{
		plain.Auth{User: "alice", Pass: "hunter2-secret"}.AsMechanism(),
		plain.Auth{User: "hunter2-typed-as-user", Pass: "x"}.AsMechanism(),
	} {
		c := dialKafka(t, addr)
		if _, err := authenticateByHand(t, c, 1, m); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("err %v", err)
		}
		expectClosed(t, c)
	}
	mu.Lock()
	defer mu.Unlock()
	failures := 0
	for _, l := range lines {
		if strings.Contains(l, "hunter2") || strings.Contains(l, "alice") {
			t.Errorf("a log line carries a credential or a user name: %s", l)
		}
		if strings.Contains(l, "Authentication failed") {
			failures++
		}
	}
	if failures != 2 {
		t.Fatalf("%d failures logged, want 2: %q", failures, lines)
	}
}
