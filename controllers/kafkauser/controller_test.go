package kafkauser

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/controllers/certificates"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
	"github.com/paddock-dev/paddock/internal/testenv"
)

var env testenv.Lazy

func TestMain(m *testing.M) { os.Exit(env.Run(m)) }

// fixture is a cluster in a namespace of its own, the KafkaUser reconciler and the
// certificates reconciler (for the clients CA) on one fake clock, reconciled by hand.
type fixture struct {
	t       *testing.T
	c       client.Client
	clock   *clocktesting.FakeClock
	r       *Reconciler
	certs   *certificates.Reconciler
	events  *events.FakeRecorder
	cluster *kafkav1alpha1.KafkaCluster
}

func newFixture(t *testing.T, mutate func(*kafkav1alpha1.KafkaCluster)) *fixture {
	t.Helper()
	e := env.Get(t)
	ctx := context.Background()
	ns, err := testenv.NewNamespace(ctx, e.Client, "users")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	kc := &kafkav1alpha1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns}, Spec: kafkav1alpha1.KafkaClusterSpec{
		Replicas: 1,
		Listeners: []kafkav1alpha1.Listener{{Name: "tls", Port: 9093, TLS: true,
			Authentication: &kafkav1alpha1.ListenerAuthentication{Type: kafkav1alpha1.AuthenticationScramSHA512}}},
		Certificates: kafkav1alpha1.Certificates{Validity: &metav1.Duration{Duration: 100 * 24 * time.Hour}, RenewBefore: &metav1.Duration{Duration: 20 * 24 * time.Hour}},
	}}
	if mutate != nil {
		mutate(kc)
	}
	if err := e.Client.Create(ctx, kc); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	rec := events.NewFakeRecorder(100)
	return &fixture{t: t, c: e.Client, clock: clk, events: rec, cluster: kc,
		r:     &Reconciler{Client: e.Client, APIReader: e.Client, Recorder: rec, Clock: clk, Random: rand.Reader},
		certs: &certificates.Reconciler{Client: e.Client, APIReader: e.Client, Recorder: events.NewFakeRecorder(100), Clock: clk, Random: rand.Reader}}
}

// user creates KafkaUser name of cluster c with auth ("" for none).
func (f *fixture) user(name string, auth kafkav1alpha1.UserAuthenticationType, mutate ...func(*kafkav1alpha1.KafkaUser)) *kafkav1alpha1.KafkaUser {
	f.t.Helper()
	u := &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.cluster.Namespace}, Spec: kafkav1alpha1.KafkaUserSpec{Cluster: "c"}}
	if auth != "" {
		u.Spec.Authentication = &kafkav1alpha1.UserAuthentication{Type: auth}
	}
	for _, m := range mutate {
		m(u)
	}
	if err := f.c.Create(context.Background(), u); err != nil {
		f.t.Fatal(err)
	}
	return u
}

// reconcile reconciles user name (twice: the first adds the finalizer and goes on) and
// returns the user as stored.
func (f *fixture) reconcile(name string) (*kafkav1alpha1.KafkaUser, ctrl.Result) {
	f.t.Helper()
	key := client.ObjectKey{Namespace: f.cluster.Namespace, Name: name}
	res, err := f.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
	if err != nil {
		f.t.Fatalf("reconcile %s: %v", name, err)
	}
	u := &kafkav1alpha1.KafkaUser{}
	if err := f.c.Get(context.Background(), key, u); err != nil && !apierrors.IsNotFound(err) {
		f.t.Fatal(err)
	}
	return u, res
}

func (f *fixture) secret(name string) *corev1.Secret {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: name}, s); err != nil {
		f.t.Fatalf("secret %s: %v", name, err)
	}
	return s
}

// entry is user's stored credentials in the cluster's credentials Secret (nil: none).
func (f *fixture) entry(user string) scram.Stored {
	f.t.Helper()
	s := &corev1.Secret{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: kafkav1alpha1.ScramCredentialsSecretName("c")}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		f.t.Fatal(err)
	}
	text, ok := s.Data[user]
	if !ok {
		return nil
	}
	stored, err := scram.Decode(text)
	if err != nil {
		f.t.Fatalf("entry of %s: %v", user, err)
	}
	return stored
}

func ready(t *testing.T, u *kafkav1alpha1.KafkaUser) metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(u.Status.Conditions, kafkav1alpha1.ConditionReady)
	if c == nil {
		t.Fatalf("KafkaUser %s has no Ready condition: %+v", u.Name, u.Status)
	}
	return *c
}

// verifies fails unless stored holds both mechanisms' credentials of password.
func verifies(t *testing.T, stored scram.Stored, password string) {
	t.Helper()
	for _, m := range scram.Mechanisms {
		cred, ok := stored[m.Name]
		if !ok {
			t.Fatalf("no %s credential", m.Name)
		}
		if cred.Iterations < scram.MinIterations {
			t.Errorf("%s: %d iterations, want at least %d", m.Name, cred.Iterations, scram.MinIterations)
		}
		if !m.Verify(cred, password) {
			t.Errorf("%s: the stored credential is not the password's", m.Name)
		}
	}
}

func TestAScramUserGetsAPasswordItsSecretAndSaltedCredentialsOnly(t *testing.T) {
	f := newFixture(t, nil)
	f.user("alice", kafkav1alpha1.UserScramSHA512)
	u, _ := f.reconcile("alice")
	if c := ready(t, u); c.Status != metav1.ConditionTrue || c.Reason != ReasonCredentialsIssued {
		t.Fatalf("Ready = %+v, want True %s", c, ReasonCredentialsIssued)
	}
	if u.Status.Principal != "User:alice" || u.Status.Secret != "alice" {
		t.Errorf("status principal %q secret %q, want User:alice, alice", u.Status.Principal, u.Status.Secret)
	}
	own := f.secret("alice")
	password := string(own.Data[kafkav1alpha1.SecretKeyPassword])
	if len(password) != passwordLength {
		t.Fatalf("password of %d characters, want %d", len(password), passwordLength)
	}
	if jaas := string(own.Data[kafkav1alpha1.SecretKeyJAAS]); !strings.Contains(jaas, `username="alice"`) || !strings.Contains(jaas, `password="`+password+`"`) {
		t.Errorf("sasl.jaas.config %q does not carry alice's user name and password", jaas)
	}
	if owner := metav1.GetControllerOf(own); owner == nil || owner.UID != u.UID {
		t.Errorf("Secret alice is controlled by %v, want the KafkaUser", owner)
	}
	verifies(t, f.entry("alice"), password)
	creds := f.secret(kafkav1alpha1.ScramCredentialsSecretName("c"))
	for key, v := range creds.Data {
		if strings.Contains(string(v), password) {
			t.Errorf("the credentials Secret holds the password in the clear (key %s)", key)
		}
	}
	if owner := metav1.GetControllerOf(creds); owner == nil || owner.UID != f.cluster.UID {
		t.Errorf("the credentials Secret is controlled by %v, want the KafkaCluster", owner)
	}
	for ev := range len(f.events.Events) {
		if e := <-f.events.Events; strings.Contains(e, password) {
			t.Errorf("event %d carries the password: %q", ev, e)
		}
	}
}

func TestAPasswordIsSaltedOnceAndAgainOnlyWhenItChanges(t *testing.T) {
	f := newFixture(t, nil)
	if err := f.c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bob-password", Namespace: f.cluster.Namespace},
		Data: map[string][]byte{"pw": []byte("first-password")}}); err != nil {
		t.Fatal(err)
	}
	f.user("bob", kafkav1alpha1.UserScramSHA512, func(u *kafkav1alpha1.KafkaUser) {
		u.Spec.Authentication.Password = &kafkav1alpha1.PasswordSource{SecretKeyRef: kafkav1alpha1.SecretKeyRef{Name: "bob-password", Key: "pw"}}
	})
	_, res := f.reconcile("bob")
	if res.RequeueAfter != recheckReferencedPassword {
		t.Errorf("requeue after %v, want %v (the referenced Secret is not watched)", res.RequeueAfter, recheckReferencedPassword)
	}
	first := f.entry("bob")
	verifies(t, first, "first-password")
	if got := string(f.secret("bob").Data[kafkav1alpha1.SecretKeyPassword]); got != "first-password" {
		t.Errorf("Secret bob password %q, want the referenced one", got)
	}
	version := f.secret(kafkav1alpha1.ScramCredentialsSecretName("c")).ResourceVersion
	f.reconcile("bob")
	if now := f.secret(kafkav1alpha1.ScramCredentialsSecretName("c")).ResourceVersion; now != version {
		t.Errorf("an unchanged password was salted again (resourceVersion %s → %s)", version, now)
	}
	ref := f.secret("bob-password")
	ref.Data["pw"] = []byte("second-password")
	if err := f.c.Update(context.Background(), ref); err != nil {
		t.Fatal(err)
	}
	f.reconcile("bob")
	second := f.entry("bob")
	verifies(t, second, "second-password")
	if string(second[scram.SHA512.Name].Salt) == string(first[scram.SHA512.Name].Salt) {
		t.Error("a changed password kept its salt")
	}
}

func TestDeletingAUserRemovesItsCredentialsAndNoOtherUsers(t *testing.T) {
	f := newFixture(t, nil)
	f.user("alice", kafkav1alpha1.UserScramSHA512)
	f.user("carol", kafkav1alpha1.UserScramSHA512)
	f.reconcile("alice")
	f.reconcile("carol")
	u := &kafkav1alpha1.KafkaUser{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: "alice"}, u); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(u.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v, want %s", u.Finalizers, Finalizer)
	}
	if err := f.c.Delete(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	f.reconcile("alice")
	if got := f.entry("alice"); got != nil {
		t.Errorf("alice's credentials are still stored after her deletion: %v", got)
	}
	if got := f.entry("carol"); got == nil {
		t.Error("deleting alice removed carol's credentials")
	}
	err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: "alice"}, &kafkav1alpha1.KafkaUser{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("alice after her finalizer ran: %v, want gone", err)
	}
}

func TestATLSUserGetsAClientCertificateFromTheClientsCA(t *testing.T) {
	f := newFixture(t, func(kc *kafkav1alpha1.KafkaCluster) {
		kc.Spec.Listeners[0].Authentication.Type = kafkav1alpha1.AuthenticationTLS
	})
	f.user("dave", kafkav1alpha1.UserTLS)
	u, _ := f.reconcile("dave")
	if c := ready(t, u); c.Status != metav1.ConditionFalse || c.Reason != ReasonNoClientsCA {
		t.Fatalf("before the clients CA exists: Ready = %+v, want False %s", c, ReasonNoClientsCA)
	}
	if _, err := f.certs.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.cluster)}); err != nil {
		t.Fatal(err)
	}
	u, res := f.reconcile("dave")
	if c := ready(t, u); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v, want True", c)
	}
	if u.Status.Principal != "User:CN=dave" {
		t.Errorf("principal %q, want User:CN=dave", u.Status.Principal)
	}
	own := f.secret("dave")
	cert, err := pki.ParseCertificate(own.Data[kafkav1alpha1.SecretKeyUserCert])
	if err != nil {
		t.Fatal(err)
	}
	if got := pki.Principal(cert); got != "User:CN=dave" {
		t.Errorf("the certificate's principal is %q, want User:CN=dave", got)
	}
	clientsCA := f.secret(kafkav1alpha1.ClientsCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(clientsCA)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: f.clock.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("the clients CA does not verify dave's certificate for client auth: %v", err)
	}
	if got, want := string(own.Data[kafkav1alpha1.SecretKeyCACert]), string(f.secret(kafkav1alpha1.ClusterCACertSecretName("c")).Data[kafkav1alpha1.SecretKeyCACert]); got != want {
		t.Error("ca.crt is not the cluster CA bundle the brokers' certificates verify against")
	}
	if f.entry("dave") != nil {
		t.Error("a tls user has SCRAM credentials")
	}
	if renew := cert.NotAfter.Add(-20 * 24 * time.Hour); res.RequeueAfter <= 0 || f.clock.Now().Add(res.RequeueAfter).After(renew.Add(time.Second)) {
		t.Errorf("requeue after %v, want by the renewal time %v", res.RequeueAfter, renew)
	}
	// Unchanged while it is valid and its CA signs; issued anew by a new clients CA.
	f.reconcile("dave")
	if again := f.secret("dave"); string(again.Data[kafkav1alpha1.SecretKeyUserCert]) != string(own.Data[kafkav1alpha1.SecretKeyUserCert]) {
		t.Error("a certificate still valid was issued again")
	}
	if err := f.c.Delete(context.Background(), f.secret(kafkav1alpha1.ClientsCASecretName("c"))); err != nil {
		t.Fatal(err)
	}
	if _, err := f.certs.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.cluster)}); err != nil {
		t.Fatal(err)
	}
	f.reconcile("dave")
	reissued, err := pki.ParseCertificate(f.secret("dave").Data[kafkav1alpha1.SecretKeyUserCert])
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := pki.ParseCertificate(f.secret(kafkav1alpha1.ClientsCASecretName("c")).Data[corev1.TLSCertKey])
	if err != nil {
		t.Fatal(err)
	}
	if !pki.SignedBy(reissued, newCA) {
		t.Error("after the clients CA changed, dave's certificate is not the new CA's")
	}
}

func TestChangingAuthenticationRemovesWhatTheOldTypeIssued(t *testing.T) {
	f := newFixture(t, nil)
	f.user("erin", kafkav1alpha1.UserScramSHA512)
	f.reconcile("erin")
	if f.entry("erin") == nil {
		t.Fatal("no credentials for a scram user")
	}
	u, _ := f.reconcile("erin")
	u.Spec.Authentication = nil
	if err := f.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u, _ = f.reconcile("erin")
	if f.entry("erin") != nil {
		t.Error("a user without authentication still has SCRAM credentials")
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: "erin"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("Secret erin: %v, want deleted (no password left behind)", err)
	}
	if c := ready(t, u); c.Status != metav1.ConditionTrue || c.Reason != ReasonACLsOnly {
		t.Errorf("Ready = %+v, want True %s", c, ReasonACLsOnly)
	}
}

func TestAUserNeverTakesASecretThatIsNotItsOwn(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "frank", Namespace: f.cluster.Namespace}, Data: map[string][]byte{"x": []byte("keep me")}}
	if err := f.c.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	f.user("frank", kafkav1alpha1.UserScramSHA512)
	f.user("c-clients-ca", kafkav1alpha1.UserTLS)
	for _, name := range []string{"frank", "c-clients-ca"} {
		u, _ := f.reconcile(name)
		if c := ready(t, u); c.Status != metav1.ConditionFalse || c.Reason != ReasonSecretConflict {
			t.Errorf("%s: Ready = %+v, want False %s", name, c, ReasonSecretConflict)
		}
		if d := meta.FindStatusCondition(u.Status.Conditions, kafkav1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionTrue {
			t.Errorf("%s: Degraded = %+v, want True", name, d)
		}
	}
	if got := f.secret("frank"); string(got.Data["x"]) != "keep me" || len(got.Data) != 1 {
		t.Errorf("Secret frank was changed: %v", got.Data)
	}
	if f.entry("frank") != nil {
		t.Error("a user whose Secret is in conflict got credentials")
	}
}

func TestAUserOfAMissingClusterSaysSo(t *testing.T) {
	f := newFixture(t, nil)
	f.user("gina", kafkav1alpha1.UserScramSHA512, func(u *kafkav1alpha1.KafkaUser) { u.Spec.Cluster = "nope" })
	u, _ := f.reconcile("gina")
	if c := ready(t, u); c.Status != metav1.ConditionFalse || c.Reason != ReasonClusterNotFound || !strings.Contains(c.Message, "nope") {
		t.Errorf("Ready = %+v, want False %s naming the cluster", c, ReasonClusterNotFound)
	}
}

func TestSetCredentialsReplaceThePasswordAndItsSecret(t *testing.T) {
	f := newFixture(t, nil)
	f.user("alice", kafkav1alpha1.UserScramSHA512)
	f.reconcile("alice")
	old := string(f.secret("alice").Data[kafkav1alpha1.SecretKeyPassword])

	// What AlterUserScramCredentials hands over: the client's salting of its new password.
	salt := []byte("0123456789abcdef")
	set, err := scram.SHA512.Salt("new-password", salt, 8192)
	if err != nil {
		t.Fatal(err)
	}
	u := &kafkav1alpha1.KafkaUser{}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: "alice"}, u); err != nil {
		t.Fatal(err)
	}
	u.Spec.Authentication.ScramCredentials = &kafkav1alpha1.ScramCredentials{SHA512: &kafkav1alpha1.ScramCredential{
		Iterations: 8192, Salt: set.Salt, StoredKey: set.StoredKey, ServerKey: set.ServerKey}}
	if err := f.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	u, _ = f.reconcile("alice")
	if c := ready(t, u); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "AlterUserScramCredentials") {
		t.Fatalf("Ready = %+v, want True saying the credentials were set through AlterUserScramCredentials", c)
	}
	stored := f.entry("alice")
	if len(stored) != 1 || !scram.SHA512.Verify(stored[scram.SHA512.Name], "new-password") || stored[scram.SHA512.Name].Iterations != 8192 {
		t.Fatalf("stored %v, want the set SCRAM-SHA-512 credential of the new password alone", stored)
	}
	if scram.SHA512.Verify(stored[scram.SHA512.Name], old) {
		t.Fatal("the old password still verifies")
	}
	if err := f.c.Get(context.Background(), client.ObjectKey{Namespace: f.cluster.Namespace, Name: "alice"}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the user's password Secret is still there (%v): its password no longer works", err)
	}
	version := f.secret(kafkav1alpha1.ScramCredentialsSecretName("c")).ResourceVersion
	f.reconcile("alice")
	if now := f.secret(kafkav1alpha1.ScramCredentialsSecretName("c")).ResourceVersion; now != version {
		t.Errorf("unchanged set credentials were written again (resourceVersion %s → %s)", version, now)
	}

	// Deleting the last set credential leaves the user with none.
	if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.Spec.Authentication.ScramCredentials = &kafkav1alpha1.ScramCredentials{}
	if err := f.c.Update(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	f.reconcile("alice")
	if stored := f.entry("alice"); stored != nil {
		t.Fatalf("with no set credential left: stored %v, want none", stored)
	}
}

func TestSetCredentialsAreRefusedBesideAPasswordSecret(t *testing.T) {
	f := newFixture(t, nil)
	u := &kafkav1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "bob", Namespace: f.cluster.Namespace}, Spec: kafkav1alpha1.KafkaUserSpec{Cluster: "c",
		Authentication: &kafkav1alpha1.UserAuthentication{Type: kafkav1alpha1.UserTLS, ScramCredentials: &kafkav1alpha1.ScramCredentials{}}}}
	if err := f.c.Create(context.Background(), u); err == nil || !strings.Contains(err.Error(), "scramCredentials are for a scram-sha-512 user") {
		t.Fatalf("a tls user with scramCredentials: %v, want refused by the CRD", err)
	}
}
