package devcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is the credentials of one environment: a CA, the apiserver's serving certificate, the
// service-account signing key and the admin bearer token. Everything is written under dir.
type pki struct {
	dir   string
	caPEM []byte
	token string
}

// Files under the pki directory.
const (
	caCertFile      = "ca.crt"
	servingCertFile = "apiserver.crt"
	servingKeyFile  = "apiserver.key"
	saKeyFile       = "sa.key"
	tokenFile       = "tokens.csv"
)

// adminUser is the identity behind the dev kubeconfig's token; system:masters may do anything.
const adminUser = "paddock-dev-admin"

// newPKI writes fresh credentials into dir.
func newPKI(dir string) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pki dir: %w", err)
	}
	ca, caKey, caDER, err := newCA()
	if err != nil {
		return nil, err
	}
	servingDER, servingKeyPEM, err := newServingCert(ca, caKey)
	if err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	saKeyPEM, err := ecKeyPEM(saKey)
	if err != nil {
		return nil, err
	}
	tokenBytes := make([]byte, 24)
	if _, err := rand.Read(tokenBytes); err != nil {
		return nil, fmt.Errorf("generate token: %w", err)
	}
	p := &pki{
		dir:   dir,
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		token: hex.EncodeToString(tokenBytes),
	}
	files := map[string][]byte{
		caCertFile:      p.caPEM,
		servingCertFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: servingDER}),
		servingKeyFile:  servingKeyPEM,
		saKeyFile:       saKeyPEM,
		tokenFile:       fmt.Appendf(nil, "%s,%s,%s,\"system:masters\"\n", p.token, adminUser, adminUser),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, fmt.Errorf("write %s: %w", name, err)
		}
	}
	return p, nil
}

// newCA makes the environment's CA, valid for a year.
func newCA() (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "paddock-dev-ca"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	return cert, key, der, nil
}

// newServingCert makes the apiserver's serving certificate, signed by ca, for every name and
// address it is reached at (any forwarded address is checked as "kubernetes": writeKubeconfig).
func newServingCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey) (der, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "kube-apiserver"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceClusterFirstIP), net.ParseIP(apiServerAdvertiseAddress)},
	}
	if der, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey); err != nil {
		return nil, nil, fmt.Errorf("sign serving certificate: %w", err)
	}
	if keyPEM, err = ecKeyPEM(key); err != nil {
		return nil, nil, err
	}
	return der, keyPEM, nil
}

func ecKeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// loadPKI reads the credentials a previous run wrote into dir (paddock dev --keep).
func loadPKI(dir string) (*pki, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	tokens, err := os.ReadFile(filepath.Join(dir, tokenFile))
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	token, _, ok := strings.Cut(string(tokens), ",")
	if !ok {
		return nil, fmt.Errorf("token file %s is malformed", filepath.Join(dir, tokenFile))
	}
	return &pki{dir: dir, caPEM: caPEM, token: token}, nil
}
