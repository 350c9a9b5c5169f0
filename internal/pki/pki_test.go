package pki

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

var policy = CAPolicy{CommonName: "ca", Organization: "paddock.dev", Validity: 100 * day, RenewBefore: 20 * day}

func newCA(t *testing.T, now time.Time) *CA {
	t.Helper()
	ca, err := NewCA("test ca", "paddock.dev", now, 100*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestAnIssuedServerCertificateVerifiesForItsNamesOnly(t *testing.T) {
	ca := newCA(t, t0)
	certPEM, keyPEM, err := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "c-broker"}, DNSNames: []string{"b0.example"}, IPs: []net.IP{net.ParseIP("198.18.0.7")}, Server: true}, t0, 10*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for name, ok := range map[string]bool{"b0.example": true, "198.18.0.7": true, "b1.example": false} {
		_, err := pair.Leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: roots, CurrentTime: t0.Add(day)})
		if (err == nil) != ok {
			t.Fatalf("%s: verify %v", name, err)
		}
	}
	if len(pair.Certificate) != 2 {
		t.Fatalf("chain of %d certificates, want leaf and CA", len(pair.Certificate))
	}
}

func TestALeafNeverOutlivesItsCA(t *testing.T) {
	ca := newCA(t, t0)
	certPEM, _, err := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "x"}, Client: true}, t0, 1000*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := ParseCertificate(certPEM)
	if !cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("leaf until %s, CA until %s", cert.NotAfter, ca.Cert.NotAfter)
	}
}

func TestParseCARefusesALeafAndAForeignKey(t *testing.T) {
	ca := newCA(t, t0)
	certPEM, keyPEM, _ := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "x"}, Server: true}, t0, day, rand.Reader)
	if _, err := ParseCA(certPEM, keyPEM); err == nil {
		t.Fatal("a leaf passed for a CA")
	}
	other := newCA(t, t0)
	if _, err := ParseCA(ca.CertPEM, other.KeyPEM); err == nil {
		t.Fatal("a CA with another's key parsed")
	}
	if back, err := ParseCA(ca.CertPEM, ca.KeyPEM); err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestPrincipalIsTheSubjectDNMostSpecificFirst(t *testing.T) {
	ca := newCA(t, t0)
	certPEM, _, _ := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "alice", Organization: []string{"corp"}, OrganizationalUnit: []string{"eng"}}, Client: true}, t0, day, rand.Reader)
	cert, _ := ParseCertificate(certPEM)
	if got, want := Principal(cert), "User:CN=alice,OU=eng,O=corp"; got != want {
		t.Fatalf("principal %q, want %q", got, want)
	}
	escaped, _, _ := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "a,b"}, Client: true}, t0, day, rand.Reader)
	cert, _ = ParseCertificate(escaped)
	if got, want := Principal(cert), `User:CN=a\,b`; got != want {
		t.Fatalf("principal %q, want %q", got, want)
	}
}

func TestCARotation(t *testing.T) {
	set, changed, err := policy.Step(CASet{}, t0, true, rand.Reader)
	if err != nil || !changed || set.Signing == nil {
		t.Fatalf("no CA made: %v %v", changed, err)
	}
	first := set.Signing

	t.Run("nothing changes before the renewal window", func(t *testing.T) {
		if _, changed, _ := policy.Step(set, t0.Add(79*day), true, rand.Reader); changed {
			t.Fatal("changed")
		}
	})
	renewal := t0.Add(80 * day)
	set, changed, _ = policy.Step(set, renewal, true, rand.Reader)
	t.Run("a next CA is made once the signing one is due, and trusted but not signing", func(t *testing.T) {
		if !changed || set.Next == nil || set.Signing != first {
			t.Fatalf("changed %v next %v", changed, set.Next != nil)
		}
		if certs, _ := ParseBundle(set.Trusted(renewal)); len(certs) != 2 {
			t.Fatalf("bundle of %d", len(certs))
		}
		if got := policy.NextChange(set, true); !got.Equal(set.Next.Cert.NotBefore.Add(backdate + 10*day)) {
			t.Fatalf("next change %s", got)
		}
	})
	t.Run("the next CA does not sign before half the window", func(t *testing.T) {
		if s, _, _ := policy.Step(set, renewal.Add(9*day), true, rand.Reader); s.Signing != first {
			t.Fatal("promoted early")
		}
	})
	promoted := renewal.Add(10 * day)
	set, _, _ = policy.Step(set, promoted, true, rand.Reader)
	t.Run("then it signs, and the old one stays trusted", func(t *testing.T) {
		if set.Signing == first || set.Next != nil || set.Previous != first.Cert {
			t.Fatal("not promoted")
		}
		if certs, _ := ParseBundle(set.Trusted(promoted)); len(certs) != 2 {
			t.Fatalf("bundle of %d", len(certs))
		}
		if !promoted.Before(first.Cert.NotAfter) {
			t.Fatal("promoted only after the old CA expired")
		}
	})
	t.Run("the old one leaves the bundle once expired", func(t *testing.T) {
		after := first.Cert.NotAfter.Add(time.Minute)
		s, changed, _ := policy.Step(set, after, true, rand.Reader)
		if !changed || s.Previous != nil {
			t.Fatal("previous kept")
		}
		if certs, _ := ParseBundle(s.Trusted(after)); len(certs) != 1 {
			t.Fatalf("bundle of %d", len(certs))
		}
	})
	t.Run("a user-supplied CA is never touched", func(t *testing.T) {
		if s, changed, _ := policy.Step(CASet{Signing: first}, first.Cert.NotAfter, false, rand.Reader); changed || s.Next != nil {
			t.Fatal("renewed a user's CA")
		}
	})
}

func TestLeafVerdict(t *testing.T) {
	ca := newCA(t, t0)
	names := []string{"a.example", "b.example"}
	ips := []net.IP{net.ParseIP("10.0.0.1")}
	issue := func(ca *CA, dns []string, validity time.Duration) *x509.Certificate {
		p, _, err := ca.Issue(Leaf{Subject: pkix.Name{CommonName: "b"}, DNSNames: dns, IPs: ips, Server: true}, t0, validity, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := ParseCertificate(p)
		return c
	}
	leaf := issue(ca, names, 30*day)
	for _, c := range []struct {
		sentence string
		cert     *x509.Certificate
		signing  *CA
		dns      []string
		now      time.Time
		want     string
	}{
		{"a missing certificate is issued", nil, ca, names, t0, "Missing"},
		{"a fresh certificate with the same names stays", leaf, ca, []string{"b.example", "a.example"}, t0, ""},
		{"a certificate of another CA is re-issued", leaf, newCA(t, t0), names, t0, "NewCertificateAuthority"},
		{"a certificate without a new name is re-issued", leaf, ca, append(names, "c.example"), t0, "NamesChanged"},
		{"a certificate in its renewal window is renewed", leaf, ca, names, t0.Add(11 * day), "Renewal"},
		{"a certificate that lives as long as its CA waits for the next CA", issue(ca, names, 1000*day), ca, names, t0.Add(90 * day), ""},
	} {
		t.Run(c.sentence, func(t *testing.T) {
			if got := LeafVerdict(c.cert, c.signing, c.dns, ips, c.now, 20*day); got != c.want {
				t.Fatalf("verdict %q, want %q", got, c.want)
			}
		})
	}
}
