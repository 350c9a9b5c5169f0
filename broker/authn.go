package broker

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/wire"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
)

// Authentication (docs/security.md, "Authentication"): what each connection proves about its
// client, kept on the connection (wire.Conn.Auth) as a *session, and the gate every request
// passes before it is decoded.
//
//   - A listener without authentication: every client is User:ANONYMOUS.
//   - A mutual-TLS listener: the client certificate (verified against the clients CA in the
//     handshake) names the principal, Apache's default mapping (pki.Principal); it must be a
//     tls KafkaUser's, the brokers' own or a super user, checked on every request, so a
//     deleted KafkaUser's connection is closed at its next request.
//   - A SASL listener: until the connection authenticated, only ApiVersions, SaslHandshake
//     and SaslAuthenticate are served and anything else closes it, as Apache does; after a
//     SaslHandshake only SaslAuthenticate (or, after a v0 handshake, a raw token frame).
//     Once authenticated, every request checks that the user still has a credential
//     (revocation) and that the session has not expired (KIP-368: only a re-authentication
//     may follow an expired session).

// anonymous is the principal of a client no listener authenticated.
const anonymous = "User:ANONYMOUS"

// failedAuthDelay is connection.failed.authentication.delay.ms: a failed authentication is
// answered this long after it failed, then the connection closes.
const failedAuthDelay = 100 * time.Millisecond

// authFailedMessage is the one message of every failed authentication: an unknown user and a
// wrong password read alike.
const authFailedMessage = "Authentication failed: Invalid username or password"

// Keys served before authentication.
const (
	saslHandshakeKey    = 17
	saslAuthenticateKey = 36
)

// session is one connection's authentication state. Only the connection's reader goroutine
// (ServeKafka) reads or writes it.
type session struct {
	listener listenerSource
	// principal is who the connection proved it is ("" while a SASL connection has not
	// authenticated).
	principal string
	// user and mechanism are the SASL user name (its credentials' key) and mechanism name.
	user, mechanism string
	// expires ends the session (KIP-368 on SASL; the certificate's expiry on mutual TLS); zero
	// never.
	expires time.Time
	// clusterCAOnly is true on mutual TLS when the client certificate chains to the cluster
	// CA only: then only the brokers' own principal is admitted.
	clusterCAOnly bool
	// byBrokerCertificate is true on a SASL listener over TLS when the client presented a
	// broker's certificate (the cluster CA's, the brokers' principal): another broker,
	// admitted without SASL as the brokers' own identity (a broker holds no password), until
	// the certificate expires.
	byBrokerCertificate bool
	// handshake is set by a SaslHandshake and cleared when its authentication ends:
	// the mechanism chosen and the handshake's version (0: raw token frames follow).
	handshake *handshake
}

// handshake is a SASL exchange in progress.
type handshake struct {
	mechanism string
	version   int16
	// exchange is the SCRAM server once the first token arrived; nil for PLAIN.
	exchange *scram.Server
	// reauth is true when the connection had authenticated before: the principal must not
	// change.
	reauth bool
}

func (s *session) authenticated() bool { return s.principal != "" }

// mechanisms is what a listener's authentication offers to SaslHandshake.
func mechanisms(auth v1alpha1.ListenerAuthenticationType) []string {
	switch auth {
	case v1alpha1.AuthenticationScramSHA512:
		return []string{scram.SHA512.Name}
	case v1alpha1.AuthenticationScramSHA256:
		return []string{scram.SHA256.Name}
	case v1alpha1.AuthenticationPlain:
		return []string{"PLAIN"}
	}
	return nil
}

// gate is the authentication check of request r before it is decoded: the connection's
// session (made at its first request) and, when r must not be served, the answer closing the
// connection instead.
func (h *Handler) gate(r *wire.Request, ls listenerSource) (*session, *wire.Answer) {
	sess, _ := r.Conn.Auth().(*session)
	if sess == nil {
		sess = h.newSession(r.Conn, ls)
		r.Conn.SetAuth(sess)
	}
	refuse := func(why string) (*session, *wire.Answer) {
		h.Metrics.connError("authentication")
		return sess, &wire.Answer{Err: fmt.Errorf("request key %d v%d correlation %d refused: %s", r.Key, r.Version, r.CorrelationID, why)}
	}
	switch {
	case ls.auth == "":
		return sess, nil
	case ls.auth == v1alpha1.AuthenticationTLS:
		if why := h.tlsPrincipalRevoked(sess); why != "" {
			return refuse(why)
		}
		return sess, nil
	case sess.byBrokerCertificate:
		if !h.now().Before(sess.expires) {
			return refuse("the broker certificate expired")
		}
		return sess, nil
	case r.Raw:
		return sess, nil // a token after a v0 SaslHandshake: handled by serveRawToken
	case sess.handshake != nil && r.Key != saslAuthenticateKey:
		return refuse("ILLEGAL_SASL_STATE: a SaslHandshake must be followed by SaslAuthenticate")
	case !sess.authenticated():
		if r.Key != apiVersionsKey && r.Key != saslHandshakeKey && r.Key != saslAuthenticateKey {
			return refuse("not authenticated: only ApiVersions, SaslHandshake and SaslAuthenticate are served before")
		}
		return sess, nil
	case r.Key == saslHandshakeKey || r.Key == saslAuthenticateKey:
		return sess, nil // a re-authentication (KIP-368)
	case !sess.expires.IsZero() && !h.now().Before(sess.expires):
		return refuse("the SASL session expired (connections.max.reauth.ms) and the client did not re-authenticate")
	}
	if why := h.saslPrincipalRevoked(sess); why != "" {
		return refuse(why)
	}
	return sess, nil
}

// newSession is a connection's session at its first request: anonymous without
// authentication, the certificate's principal on a mutual-TLS listener, not yet
// authenticated on a SASL one.
func (h *Handler) newSession(c *wire.Conn, ls listenerSource) *session {
	s := &session{listener: ls}
	switch ls.auth {
	case "":
		s.principal = anonymous
	case v1alpha1.AuthenticationTLS:
		if st := c.TLS(); st != nil && len(st.PeerCertificates) > 0 {
			leaf := st.PeerCertificates[0]
			s.principal, s.expires = pki.Principal(leaf), leaf.NotAfter
			// A certificate the clients CA did not sign chained to the cluster CA: only the
			// brokers' own identity may come that way (a user-supplied cluster CA may sign
			// other certificates).
			s.clusterCAOnly = !verifiedBy(st, h.security().ClientCAs)
		}
	default:
		// A SASL listener over TLS asks for a client certificate without requiring one
		// (tlsConfig): only another broker's, verified here against the cluster CA, counts.
		if st := c.TLS(); st != nil && len(st.PeerCertificates) > 0 {
			leaf := st.PeerCertificates[0]
			if pki.Principal(leaf) == h.brokerPrincipal() && verifiedBy(st, h.security().ClusterCAs) && h.now().Before(leaf.NotAfter) {
				s.principal, s.expires, s.byBrokerCertificate = h.brokerPrincipal(), leaf.NotAfter, true
			}
		}
	}
	return s
}

// verifiedBy reports whether the connection's client certificate chains to pool.
func verifiedBy(st *tls.ConnectionState, pool *x509.CertPool) bool {
	if pool == nil {
		return false
	}
	inter := x509.NewCertPool()
	for _, c := range st.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// tlsPrincipalRevoked says why a mutual-TLS connection may not go on, or "".
func (h *Handler) tlsPrincipalRevoked(s *session) string {
	switch {
	case s.principal == "":
		return "no client certificate"
	case !h.now().Before(s.expires):
		return "the client certificate expired"
	case s.clusterCAOnly && s.principal != h.brokerPrincipal():
		return "a certificate of the cluster CA that is no broker's"
	case h.knownPrincipal(s.principal, v1alpha1.UserTLS):
		return ""
	}
	return "the certificate's principal is no tls KafkaUser of this cluster (deleted, or never made)"
}

// saslPrincipalRevoked says why an authenticated SASL connection may not go on, or "": its
// user no longer has a credential for the mechanism it authenticated with (PLAIN: any).
func (h *Handler) saslPrincipalRevoked(s *session) string {
	sec := h.security()
	stored, ok := sec.Credentials[s.user]
	if ok && s.mechanism != "PLAIN" {
		_, ok = stored[s.mechanism]
	}
	if !ok || len(stored) == 0 {
		return "the user's credentials were removed (KafkaUser deleted)"
	}
	return ""
}

// knownPrincipal reports whether principal may hold a connection authenticated as a user of
// type auth: the cluster's KafkaUser of that type, the brokers' own identity, or a super user.
func (h *Handler) knownPrincipal(principal string, auth v1alpha1.UserAuthenticationType) bool {
	if u, ok := h.security().Users[principal]; ok && u.Authentication == auth {
		return true
	}
	if principal == h.brokerPrincipal() {
		return true
	}
	for _, su := range h.View.Snapshot().SuperUsers {
		if su == principal {
			return true
		}
	}
	return false
}

// brokerPrincipal is the principal of this cluster's broker certificates.
func (h *Handler) brokerPrincipal() string {
	return "User:CN=" + v1alpha1.BrokerPrincipalCommonName(h.Cluster) + ",O=" + v1alpha1.PrincipalOrganization
}

// noSecurity is the security state of a Handler without Security: one value, so the
// Authorizer cache (authz.go) keys on it.
var noSecurity = &cluster.SecuritySnapshot{}

func (h *Handler) security() *cluster.SecuritySnapshot {
	if h.Security == nil {
		return noSecurity
	}
	return h.Security.Security()
}

func (h *Handler) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}

// errAuthFailed is every failed authentication: bad credentials, an unknown user, a
// malformed token, or too many failures from the source.
var errAuthFailed = errors.New("authentication failed")

// saslStep takes the client's next token of the exchange sess.handshake started and returns
// the server's reply; done once the client authenticated (sess then carries the principal).
// Any error is errAuthFailed, and the exchange is over.
func (h *Handler) saslStep(sess *session, remote net.Addr, token []byte) (reply []byte, done bool, err error) {
	hs := sess.handshake
	source := sourceOf(remote)
	if hs.exchange == nil && !h.limiter().allow(source, h.now()) {
		h.authOutcome(hs.mechanism, "throttled")
		return nil, false, errAuthFailed
	}
	var user string
	switch hs.mechanism {
	case "PLAIN":
		user, done, err = h.plain(token)
	default:
		if hs.exchange == nil {
			mech, _ := scram.MechanismNamed(hs.mechanism)
			sec := h.security()
			hs.exchange = scram.NewServer(mech, func(u string) (scram.Credential, bool) { return sec.Credential(u, mech) }, rand.Reader)
		}
		reply, done, err = hs.exchange.Step(token)
		user = hs.exchange.User()
	}
	if err == nil && done && hs.reauth && "User:"+user != sess.principal {
		err = errors.New("a re-authentication may not change the principal")
	}
	if err != nil {
		h.limiter().fail(source, h.now())
		h.authOutcome(hs.mechanism, "failure")
		h.Log.Info("Authentication failed", "remote", remote.String(), "mechanism", hs.mechanism, "listener", sess.listener.name, "reason", failureReason(err))
		sess.handshake = nil
		return nil, false, errAuthFailed
	}
	if done {
		sess.principal, sess.user, sess.mechanism, sess.handshake = "User:"+user, user, hs.mechanism, nil
		sess.expires = time.Time{}
		if life := h.View.Snapshot().Config.MaxReauth; life > 0 {
			sess.expires = h.now().Add(life)
		}
		h.authOutcome(hs.mechanism, "success")
	}
	return reply, done, nil
}

// plain checks a PLAIN token against the user's salted credentials.
func (h *Handler) plain(token []byte) (string, bool, error) {
	user, password, err := scram.ParsePlain(token)
	if err != nil {
		return "", false, err
	}
	for _, mech := range []scram.Mechanism{scram.SHA512, scram.SHA256} {
		if cred, ok := h.security().Credential(user, mech); ok {
			if mech.Verify(cred, password) {
				return user, true, nil
			}
			return "", false, scram.ErrInvalidCredentials
		}
	}
	return "", false, scram.ErrInvalidCredentials
}

// failureReason is what a log line may say of a failed authentication: the kind of failure,
// never what the client sent.
func failureReason(err error) string {
	switch {
	case errors.Is(err, scram.ErrInvalidCredentials):
		return "invalid credentials"
	case errors.Is(err, scram.ErrUnsupported):
		return "unsupported SCRAM feature"
	case errors.Is(err, scram.ErrMalformed):
		return "malformed token"
	}
	return err.Error()
}

// sessionLifetime is SaslAuthenticate v1's session_lifetime_ms: the time left, 0 for none.
func (h *Handler) sessionLifetime(sess *session) int64 {
	if sess.expires.IsZero() {
		return 0
	}
	return max(sess.expires.Sub(h.now()).Milliseconds(), 1)
}

func (h *Handler) authOutcome(mechanism, result string) {
	if h.Metrics != nil {
		h.Metrics.authentications.WithLabelValues(mechanism, result).Inc()
	}
}

func sourceOf(a net.Addr) string {
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}

func (h *Handler) limiter() *authLimiter {
	h.init()
	return h.authLimit
}

// Failed authentications per source (docs/security.md, "Authentication"): past
// authFailureBurst failures within authFailureWindow, a source's next attempts fail without
// their credentials being checked until the window frees.
const (
	authFailureBurst  = 10
	authFailureWindow = time.Minute
	// authLimitSources bounds the sources remembered; past it the oldest record is forgotten.
	authLimitSources = 10000
)

// authLimiter counts failed authentications per source address.
type authLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time // guarded by mu; each at most authFailureBurst, oldest first
}

func newAuthLimiter() *authLimiter { return &authLimiter{failures: map[string][]time.Time{}} }

// allow reports whether source may try to authenticate at now.
func (l *authLimiter) allow(source string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recentLocked(source, now)) < authFailureBurst
}

// fail records a failed authentication of source at now.
func (l *authLimiter) fail(source string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.recentLocked(source, now)
	if len(recent) >= authFailureBurst {
		recent = recent[1:]
	}
	if _, known := l.failures[source]; !known && len(l.failures) >= authLimitSources {
		l.forgetOldestLocked()
	}
	l.failures[source] = append(recent, now)
}

func (l *authLimiter) recentLocked(source string, now time.Time) []time.Time {
	ts := l.failures[source]
	i := 0
	for i < len(ts) && now.Sub(ts[i]) >= authFailureWindow {
		i++
	}
	if i == len(ts) {
		delete(l.failures, source)
		return nil
	}
	l.failures[source] = ts[i:]
	return ts[i:]
}

func (l *authLimiter) forgetOldestLocked() {
	var oldest string
	var at time.Time
	for s, ts := range l.failures {
		if last := ts[len(ts)-1]; oldest == "" || last.Before(at) {
			oldest, at = s, last
		}
	}
	delete(l.failures, oldest)
}

// authMetrics is the authentication counter of m, with a zero series for every mechanism
// the broker serves and every result, so the series exist before the first authentication
// (an alert on the failure rate has something to read from the start).
func authMetrics() *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "paddock_broker_authentications_total",
		Help: "SASL authentications, by mechanism and result (success, failure, throttled: refused unchecked after too many failures from the source).",
	}, []string{"mechanism", "result"})
	for _, mechanism := range []string{scram.SHA256.Name, scram.SHA512.Name, "PLAIN"} {
		for _, result := range []string{"success", "failure", "throttled"} {
			c.WithLabelValues(mechanism, result)
		}
	}
	return c
}

// errNoCertificate fails a TLS handshake while the operator has not issued this broker's
// certificate yet (the broker is not ready meanwhile).
var errNoCertificate = errors.New("no certificate for this broker yet")

// tlsConfig is what a TLS listener serves: this broker's current certificate at every
// handshake (a renewed one is presented from the next handshake on, no restart and no
// connection dropped), TLS 1.2 or newer, and on a mutual-TLS listener a client certificate
// verified against the clients CA bundle as it is now — and the cluster CA's, whose only
// certificates are the brokers' own (their identity, a super user). A SASL listener over TLS
// asks for (does not require) a client certificate: another broker's admits it without SASL.
func (b *Broker) tlsConfig(l cluster.ListenerSpec) *tls.Config {
	current := func() *cluster.SecuritySnapshot {
		if b.Security == nil {
			return &cluster.SecuritySnapshot{}
		}
		return b.Security.Security()
	}
	base := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := current().Certificate; c != nil {
				return c, nil
			}
			return nil, errNoCertificate
		},
	}
	if l.Authentication == "" {
		return base
	}
	if l.Authentication != v1alpha1.AuthenticationTLS {
		// SASL over TLS: a client certificate is asked for, never required nor verified by
		// the handshake; a broker's (the cluster CA's) admits another broker without SASL
		// (newSession), any other is ignored and the client authenticates with SASL.
		base.ClientAuth = tls.RequestClientCert
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cas := current().MutualTLSCAs
		if cas == nil {
			return nil, errors.New("no clients CA yet")
		}
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = cas
		return cfg, nil
	}
	return base
}

// missingCertificates names each TLS listener this broker has no certificate for yet; the
// broker is not ready while there is one.
func (b *Broker) missingCertificates() []string {
	var out []string
	for _, l := range b.Config.Listeners {
		if l.TLS && (b.Security == nil || b.Security.Security().Certificate == nil) {
			out = append(out, l.Name+": no certificate yet (Secret "+v1alpha1.BrokerCertSecretName(b.Config.Cluster, b.Config.Identity.ID)+")")
		}
	}
	return out
}

// probeTLS is the idle probe's TLS for the listeners bound at tlsPorts: the broker's own
// certificate as its client certificate (mutual-TLS listeners trust the cluster CA for the
// brokers' own identity), the server not verified — the probe talks to itself on loopback
// and sends nothing but ApiVersions.
func (b *Broker) probeTLS(tlsPorts map[int]bool) func(port int) *tls.Config {
	return func(port int) *tls.Config {
		if !tlsPorts[port] {
			return nil
		}
		return &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // the broker probing its own loopback listener
			MinVersion:         tls.VersionTLS12,
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if b.Security != nil {
					if c := b.Security.Security().Certificate; c != nil {
						return c, nil
					}
				}
				return &tls.Certificate{}, nil
			},
		}
	}
}
