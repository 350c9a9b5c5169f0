package brokertest

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
)

// Secured serves every broker's listener over TLS — a certificate for 127.0.0.1 from a CA
// of the harness' own — and, when Authentication is set, authenticates clients as the one
// SCRAM user User with Password (both mechanisms' credentials are stored, as the operator
// writes them). Cluster.ClientTLS is a client configuration that trusts the CA.
type Secured struct {
	// Authentication is scram-sha-512, scram-sha-256 or plain; empty: TLS without
	// authentication.
	Authentication v1alpha1.ListenerAuthenticationType
	User, Password string
}

// securedState makes the CA, a broker certificate and the security snapshot every broker
// of a Secured cluster serves with, and the client configuration that trusts the CA.
func (c *Cluster) securedState() (cluster.SecuritySnapshot, *tls.Config) {
	c.t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("brokertest CA", v1alpha1.PrincipalOrganization, now, 24*time.Hour, rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Subject: pkix.Name{CommonName: v1alpha1.BrokerPrincipalCommonName("c"), Organization: []string{v1alpha1.PrincipalOrganization}},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true, Client: true}, now, 24*time.Hour, rand.Reader)
	if err != nil {
		c.t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		c.t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	state := cluster.SecuritySnapshot{Certificate: &pair, ClusterCAs: roots, Credentials: map[string]scram.Stored{}, Users: map[string]cluster.User{}}
	if s := c.opts.Secured; s.Authentication != "" {
		stored := scram.Stored{}
		for _, m := range scram.Mechanisms {
			salt := make([]byte, 16)
			if _, err := rand.Read(salt); err != nil {
				c.t.Fatal(err)
			}
			cred, err := m.Salt(s.Password, salt, scram.MinIterations)
			if err != nil {
				c.t.Fatal(err)
			}
			stored[m.Name] = cred
		}
		state.Credentials[s.User] = stored
	}
	return state, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}
