package cluster

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
	"github.com/paddock-dev/paddock/internal/testkit"
)

// brokerSecret is a broker certificate Secret as the certificates reconciler writes it.
func brokerSecret(t *testing.T, ns string) (*corev1.Secret, *pki.CA) {
	t.Helper()
	ca, err := pki.NewCA("ca", "paddock.dev", time.Now(), time.Hour, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(pki.Leaf{Subject: pkix.Name{CommonName: "c-broker"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}, time.Now(), time.Hour, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.BrokerCertSecretName("c", 0), Namespace: ns}, Data: map[string][]byte{
		corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, v1alpha1.SecretKeyCACert: ca.CertPEM, v1alpha1.SecretKeyClientsCACert: ca.CertPEM,
	}}, ca
}

func TestSecurityFromKeepsWhatIsUsableAndSaysWhatIsNot(t *testing.T) {
	sec, _ := brokerSecret(t, "ns")
	cred, err := scram.SHA512.Salt("pw", make([]byte, 16), 4096)
	if err != nil {
		t.Fatal(err)
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c-scram-credentials"}, Data: map[string][]byte{
		"alice": scram.Stored{scram.SHA512.Name: cred}.Encode(), "mallory": []byte("SCRAM-SHA-512 garbage\n"),
	}}
	now := metav1.Now()
	users := []v1alpha1.KafkaUser{
		{ObjectMeta: metav1.ObjectMeta{Name: "alice"}, Spec: v1alpha1.KafkaUserSpec{Cluster: "c", Authentication: &v1alpha1.UserAuthentication{Type: v1alpha1.UserScramSHA512}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bob"}, Spec: v1alpha1.KafkaUserSpec{Cluster: "c", Authentication: &v1alpha1.UserAuthentication{Type: v1alpha1.UserTLS}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "carol"}, Spec: v1alpha1.KafkaUserSpec{Cluster: "other"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "dave", DeletionTimestamp: &now}, Spec: v1alpha1.KafkaUserSpec{Cluster: "c"}},
	}
	s, problems := securityFrom("c", sec, creds, users)
	if s.Certificate == nil || s.ClientCAs == nil || s.MutualTLSCAs == nil {
		t.Fatal("certificate or bundles not loaded")
	}
	if _, ok := s.Credential("alice", scram.SHA512); !ok {
		t.Fatal("alice's credential lost")
	}
	if _, ok := s.Credentials["mallory"]; ok || len(problems) != 1 {
		t.Fatalf("a damaged credential was kept (problems %q)", problems)
	}
	for _, p := range problems {
		if strings.Contains(p, "garbage") || strings.Contains(p, "mallory") {
			t.Fatalf("a problem quotes the credential or the user: %s", p)
		}
	}
	if _, ok := s.Users["User:alice"]; !ok {
		t.Fatal("no User:alice")
	}
	if u, ok := s.Users["User:CN=bob"]; !ok || u.Authentication != v1alpha1.UserTLS {
		t.Fatal("no User:CN=bob of type tls")
	}
	if len(s.Users) != 2 {
		t.Fatalf("users %v: another cluster's and a deleted one must not count", s.Users)
	}
}

func TestInformerSecurityFollowsTheSecretsAndKafkaUsers(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t)
	env := testEnv.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := NewInformerSecurity(env.Config, env.Scheme, ns, "c", 0, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if snap := s.Security(); !snap.Synced || snap.Certificate != nil {
		t.Fatal("synced with a certificate that does not exist")
	}
	sec, _ := brokerSecret(t, ns)
	if err := c.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	user := &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: ns}, Spec: v1alpha1.KafkaUserSpec{Cluster: "c", Authentication: &v1alpha1.UserAuthentication{Type: v1alpha1.UserTLS}}}
	if err := c.Create(ctx, user); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the certificate and the user", func() bool {
		snap := s.Security()
		_, ok := snap.Users["User:CN=bob"]
		return snap.Certificate != nil && ok
	})
	renewed, _ := brokerSecret(t, ns)
	sec.Data = renewed.Data
	if err := c.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the renewed certificate", func() bool {
		cert := s.Security().Certificate
		return cert != nil && string(cert.Certificate[0]) != "" && cert.Leaf.SerialNumber.Cmp(mustLeaf(t, renewed).SerialNumber) == 0
	})
	if err := c.Delete(ctx, user); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the deleted user gone", func() bool { _, ok := s.Security().Users["User:CN=bob"]; return !ok })
}

func mustLeaf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	c, err := pki.ParseCertificate(s.Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
