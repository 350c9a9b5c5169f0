package certificates

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/testenv"
)

var env testenv.Lazy

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

const day = 24 * time.Hour

// fixture is a TLS cluster in a namespace of its own and a reconciler on a fake clock,
// reconciled by hand (a test steps the clock, then reconciles).
type fixture struct {
	t       *testing.T
	c       client.Client
	clock   *clocktesting.FakeClock
	r       *Reconciler
	cluster *kafkav1alpha1.KafkaCluster
}

func newFixture(t *testing.T, mutate func(*kafkav1alpha1.KafkaCluster)) *fixture {
	t.Helper()
	e := env.Get(t)
	ns, err := testenv.NewNamespace(context.Background(), e.Client, "certs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: kafkav1alpha1.KafkaClusterSpec{
		Replicas:  2,
		Listeners: []kafkav1alpha1.Listener{{Name: "tls", Port: 9093, TLS: true}, {Name: "ext", Port: 9094, Type: kafkav1alpha1.ListenerNodePort}},
		Certificates: kafkav1alpha1.Certificates{
			Validity: &metav1.Duration{Duration: 100 * day}, RenewBefore: &metav1.Duration{Duration: 20 * day},
		},
	}}
	if mutate != nil {
		mutate(kc)
	}
	if err := e.Client.Create(context.Background(), kc); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	return &fixture{t: t, c: e.Client, clock: clk, cluster: kc,
		r: &Reconciler{Client: e.Client, APIReader: e.Client, Recorder: events.NewFakeRecorder(100), Clock: clk, Random: rand.Reader}}
}

func (f *fixture) reconcile() ctrl.Result {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.cluster)})
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: name}, s); err != nil {
		f.t.Fatalf("secret %s: %v", name, err)
	}
	return s
}

// brokerPair is broker id's certificate and key as a TLS server would load them.
func (f *fixture) brokerPair(id int32) tls.Certificate {
	f.t.Helper()
	s := f.secret(kafkav1alpha1.BrokerCertSecretName("c", id))
	pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		f.t.Fatal(err)
	}
	return pair
}

// trusts reports whether the published cluster CA bundle verifies cert for host.
func (f *fixture) trusts(cert *x509.Certificate, host string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(f.secret(kafkav1alpha1.ClusterCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]) {
		f.t.Fatal("no certificate in the published bundle")
	}
	_, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: host, CurrentTime: f.clock.Now()})
	return err
}

func TestATLSClusterGetsCAsAndABrokerCertificateForEveryNameClientsUse(t *testing.T) {
	f := newFixture(t, nil)
	res := f.reconcile()
	ns := f.cluster.Namespace
	for id := int32(0); id < 2; id++ {
		leaf := f.brokerPair(id).Leaf
		pod := kafkav1alpha1.BrokerPodName("c", id)
		for _, host := range []string{
			pod + ".c-brokers." + ns + ".svc.cluster.local", pod + ".c-brokers." + ns + ".svc",
			"c-bootstrap", "c-bootstrap." + ns + ".svc", "c-bootstrap." + ns + ".svc.cluster.local",
			"c-bootstrap-internal." + ns + ".svc", pod + "." + ns,
		} {
			if err := f.trusts(leaf, host); err != nil {
				t.Errorf("broker %d, host %s: %v", id, host, err)
			}
		}
		if got := pki.Principal(leaf); got != "User:CN=c-broker,O=paddock.dev" {
			t.Errorf("broker principal %q", got)
		}
		if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
			t.Error("a broker certificate is also its client identity")
		}
	}
	if clients := f.secret(kafkav1alpha1.ClientsCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]; len(clients) == 0 {
		t.Fatal("no clients CA bundle")
	}
	if key := f.secret(kafkav1alpha1.ClusterCACertSecretName("c")).Data; len(key) != 1 {
		t.Fatalf("the published bundle holds %d keys, want only ca.crt", len(key))
	}
	if res.RequeueAfter < 79*day || res.RequeueAfter > 81*day {
		t.Fatalf("requeue after %s, want the renewal 80 days out", res.RequeueAfter)
	}
}

func TestACertificateIsReissuedWhenItsBrokerAdvertisesANewAddress(t *testing.T) {
	f := newFixture(t, nil)
	f.reconcile()
	before := f.brokerPair(1).Leaf
	f.cluster.Status.Brokers = []kafkav1alpha1.BrokerRow{{ID: 1, State: kafkav1alpha1.BrokerServing, Health: kafkav1alpha1.BrokerAlive,
		Listeners: []kafkav1alpha1.ListenerAddress{{Name: "tls", Host: "198.18.0.9", Port: 9093}, {Name: "ext", Host: "kafka-1.example.com", Port: 31000}}}}
	if err := f.c.Status().Update(context.Background(), f.cluster); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	after := f.brokerPair(1).Leaf
	if after.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("not re-issued")
	}
	if len(after.IPAddresses) != 1 || after.IPAddresses[0].String() != "198.18.0.9" {
		t.Fatalf("IP SANs %v", after.IPAddresses)
	}
	if err := f.trusts(after, "kafka-1.example.com"); err != nil {
		t.Fatal(err)
	}
	if f.brokerPair(0).Leaf.SerialNumber.Cmp(before.SerialNumber) == 0 {
		t.Fatal("broker 0 got broker 1's certificate")
	}
	serial := after.SerialNumber
	f.reconcile()
	if f.brokerPair(1).Leaf.SerialNumber.Cmp(serial) != 0 {
		t.Fatal("re-issued again with nothing changed")
	}
}

func TestRotationKeepsEveryCertificateTrustedThroughout(t *testing.T) {
	f := newFixture(t, nil)
	f.reconcile()
	first := f.brokerPair(0).Leaf
	host := "c-bootstrap"
	check := func(when string) *x509.Certificate {
		t.Helper()
		leaf := f.brokerPair(0).Leaf
		if err := f.trusts(leaf, host); err != nil {
			t.Fatalf("%s: the broker certificate is not trusted by the published bundle: %v", when, err)
		}
		if err := f.trusts(first, host); err != nil && f.clock.Now().Before(first.NotAfter) {
			t.Fatalf("%s: a client holding the first certificate's CA lost trust: %v", when, err)
		}
		return leaf
	}
	f.clock.Step(80*day + time.Hour) // the CA and the leaf are due
	f.reconcile()
	if leaf := check("renewal window"); leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatal("the leaf was re-issued by the old CA: it would gain nothing")
	}
	if certs, _ := pki.ParseBundle(f.secret(kafkav1alpha1.ClusterCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]); len(certs) != 2 {
		t.Fatalf("bundle of %d CAs, want the old and the next", len(certs))
	}
	f.clock.Step(10*day + time.Hour) // the next CA has been trusted for half the window
	f.reconcile()
	leaf := check("after promotion")
	if leaf.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("not re-issued by the new CA")
	}
	if !leaf.NotAfter.After(first.NotAfter) {
		t.Fatal("the renewed leaf does not outlive the first")
	}
	f.clock.Step(10 * day) // the old CA expired
	f.reconcile()
	check("after the old CA expired")
	if certs, _ := pki.ParseBundle(f.secret(kafkav1alpha1.ClusterCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]); len(certs) != 1 {
		t.Fatalf("bundle of %d CAs, want the new one only", len(certs))
	}
}

func TestAUserCASignsTheBrokersAndIsNeverWritten(t *testing.T) {
	ca, err := pki.NewCA("corp CA", "corp", time.Now(), 50*day, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(kc *kafkav1alpha1.KafkaCluster) {
		kc.Spec.Certificates.ClusterCA = &kafkav1alpha1.CertificateAuthority{SecretName: "corp-ca"}
	})
	// Without the Secret the reconcile says why and comes back later, issuing nothing.
	if res := f.reconcile(); res.RequeueAfter != retryUnusableCAAfter {
		t.Fatalf("requeue %s", res.RequeueAfter)
	}
	userSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "corp-ca", Namespace: f.cluster.Namespace},
		Data: map[string][]byte{corev1.TLSCertKey: ca.CertPEM, corev1.TLSPrivateKeyKey: ca.KeyPEM}}
	if err := f.c.Create(context.Background(), userSecret); err != nil {
		t.Fatal(err)
	}
	f.reconcile()
	leaf := f.brokerPair(0).Leaf
	if !pki.SignedBy(leaf, ca.Cert) {
		t.Fatal("not signed by the user's CA")
	}
	if !leaf.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Fatalf("leaf until %s outlives or undercuts the CA (%s)", leaf.NotAfter, ca.Cert.NotAfter)
	}
	err = f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: kafkav1alpha1.ClusterCASecretName("c")}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("the operator made its own cluster CA beside the user's: %v", err)
	}
	f.clock.Step(49 * day)
	f.reconcile()
	if got := f.secret("corp-ca"); string(got.Data[corev1.TLSCertKey]) != string(ca.CertPEM) {
		t.Fatal("the user's CA was renewed")
	}
}

func TestAClusterWithoutTLSGetsNoCertificates(t *testing.T) {
	f := newFixture(t, func(kc *kafkav1alpha1.KafkaCluster) { kc.Spec.Listeners[0].TLS = false })
	f.reconcile()
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: kafkav1alpha1.ClusterCASecretName("c")}, &corev1.Secret{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("want no CA: %v", err)
	}
}
