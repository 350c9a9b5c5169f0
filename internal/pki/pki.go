// Package pki holds the certificate rules the operator and the brokers share: making a CA,
// issuing broker and client certificates from it, deciding when one must be renewed or
// re-issued, and naming the principal a client certificate proves (docs/security.md,
// "Certificates").
//
// It is pure: no I/O and no clock reads (callers pass now and a source of randomness); it
// imports nothing of paddock's.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"slices"
	"time"
)

// backdate is how far before now a certificate starts: a client whose clock is a little
// behind still accepts a certificate issued this second.
const backdate = 5 * time.Minute

// CA is a certificate authority: its certificate and private key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	// CertPEM and KeyPEM are the PEM forms, as stored.
	CertPEM, KeyPEM []byte
}

// NewCA makes a self-signed CA called commonName (organization org) valid for validity from
// now.
func NewCA(commonName, org string, now time.Time, validity time.Duration, random io.Reader) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	serial, err := newSerial(random)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{org}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: CA certificate: %w", err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return ParseCA(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// ParseCA reads a CA from its PEM certificate and key (the first certificate of certPEM).
// A certificate that is not a CA, or a key that does not match it, is an error.
func ParseCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("pki: CA: %w", err)
	}
	cert := pair.Leaf
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, errors.New("pki: CA: the certificate is not a CA (basic constraints and cert-sign usage)")
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok {
		return nil, errors.New("pki: CA: the key cannot sign")
	}
	return &CA{Cert: cert, Key: signer, CertPEM: firstPEM(certPEM), KeyPEM: keyPEM}, nil
}

// Leaf is what a certificate is issued for.
type Leaf struct {
	Subject pkix.Name
	// DNSNames and IPs are the subject alternative names (a server certificate's host names).
	DNSNames []string
	IPs      []net.IP
	// Server and Client choose the extended key usages; a broker's certificate has both
	// (it is also the broker's identity as a client of other brokers).
	Server, Client bool
}

// Issue issues leaf from ca, valid for validity from now but never past the CA's own expiry.
// certPEM is the leaf followed by the CA certificate (the chain a server presents).
func (ca *CA) Issue(leaf Leaf, now time.Time, validity time.Duration, random io.Reader) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: key: %w", err)
	}
	serial, err := newSerial(random)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	var usages []x509.ExtKeyUsage
	if leaf.Server {
		usages = append(usages, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		usages = append(usages, x509.ExtKeyUsageClientAuth)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      leaf.Subject,
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usages,
		DNSNames:     leaf.DNSNames,
		IPAddresses:  leaf.IPs,
	}
	der, err := x509.CreateCertificate(random, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	certPEM = append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.CertPEM...)
	return certPEM, keyPEM, nil
}

// DueForRenewal reports whether cert must be replaced at now: less than renewBefore of its
// validity is left (or it has expired).
func DueForRenewal(cert *x509.Certificate, now time.Time, renewBefore time.Duration) bool {
	return !now.Before(cert.NotAfter.Add(-renewBefore))
}

// RenewalTime is when DueForRenewal turns true for cert.
func RenewalTime(cert *x509.Certificate, renewBefore time.Duration) time.Time {
	return cert.NotAfter.Add(-renewBefore)
}

// SANsDiffer reports whether cert's alternative names are not exactly dnsNames and ips (in
// any order): a broker certificate is re-issued when what it advertises changes.
func SANsDiffer(cert *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	if !sameStrings(cert.DNSNames, dnsNames) {
		return true
	}
	have := make([]string, len(cert.IPAddresses))
	for i, ip := range cert.IPAddresses {
		have[i] = ip.String()
	}
	want := make([]string, len(ips))
	for i, ip := range ips {
		want[i] = ip.String()
	}
	return !sameStrings(have, want)
}

// SignedBy reports whether cert was signed by ca's key.
func SignedBy(cert *x509.Certificate, ca *x509.Certificate) bool {
	return cert.CheckSignatureFrom(ca) == nil
}

// ParseCertificate is the first certificate of a PEM text.
func ParseCertificate(certPEM []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("pki: no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

// ParseBundle is every certificate of a PEM text (a trust bundle).
func ParseBundle(bundle []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, bundle = pem.Decode(bundle)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("pki: bundle: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("pki: bundle holds no certificate")
	}
	return out, nil
}

// Bundle is the PEM trust bundle of certs, in order, without the expired ones at now and
// without repeats.
func Bundle(now time.Time, certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	var seen [][]byte
	for _, c := range certs {
		if c == nil || now.After(c.NotAfter) || slices.ContainsFunc(seen, func(raw []byte) bool { return bytes.Equal(raw, c.Raw) }) {
			continue
		}
		seen = append(seen, c.Raw)
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}) // a bytes.Buffer does not fail
	}
	return b.Bytes()
}

// Principal is the Kafka principal a client certificate proves with Apache's default
// mapping: "User:" and the subject DN in RFC 2253 form, most specific attribute first
// ("User:CN=alice,O=corp").
func Principal(cert *x509.Certificate) string {
	var rdns pkix.RDNSequence
	if rest, err := asn1.Unmarshal(cert.RawSubject, &rdns); err != nil || len(rest) > 0 {
		return "User:" + cert.Subject.String()
	}
	return "User:" + rdns.String()
}

func newSerial(random io.Reader) (*big.Int, error) {
	serial, err := randInt(random, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	return serial.Add(serial, big.NewInt(1)), nil
}

func randInt(random io.Reader, max *big.Int) (*big.Int, error) {
	b := make([]byte, (max.BitLen()+7)/8)
	if _, err := io.ReadFull(random, b); err != nil {
		return nil, err
	}
	return new(big.Int).Mod(new(big.Int).SetBytes(b), max), nil
}

func encodeKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func firstPEM(text []byte) []byte {
	block, _ := pem.Decode(text)
	if block == nil {
		return text
	}
	return pem.EncodeToMemory(block)
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
