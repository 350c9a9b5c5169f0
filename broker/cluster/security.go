package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/notify"
	"github.com/paddock-dev/paddock/internal/scram"
)

// Security is what the broker knows of its cluster's security (docs/security.md, "Secrets and
// who reads them"): its certificate, the CAs it trusts, the salted SCRAM credentials and the
// KafkaUsers. Handlers read it on every request, so Snapshot is cheap and never calls the API
// server.
type Security interface {
	// Security returns the current state; never nil, read-only.
	Security() *SecuritySnapshot
	// SecurityUpdated returns a channel closed at the next change.
	SecurityUpdated() <-chan struct{}
}

// SecuritySnapshot is one immutable reading of the cluster's security.
type SecuritySnapshot struct {
	// Synced is true once the Secrets and KafkaUsers were read at least once.
	Synced bool
	// Certificate is this broker's certificate and key (its Secret's tls.crt and tls.key);
	// nil until the operator issued it.
	Certificate *tls.Certificate
	// ClusterCAs and ClientCAs are the trust bundles of the broker's Secret: the cluster CA
	// (other brokers) and the clients CA (mutual-TLS clients). Nil until read.
	ClusterCAs, ClientCAs *x509.CertPool
	// MutualTLSCAs is what a mutual-TLS listener verifies client certificates against: the
	// clients CA bundle and the cluster CA bundle (the brokers' own certificates). Nil until
	// the clients CA bundle is read.
	MutualTLSCAs *x509.CertPool
	// Credentials are the SCRAM users' salted credentials, by user name.
	Credentials map[string]scram.Stored
	// Users are the cluster's KafkaUsers, by principal.
	Users map[string]User
}

// User is one KafkaUser as the broker sees it.
type User struct {
	// Name is the KafkaUser's name; Principal is what ACLs name.
	Name, Principal string
	// Authentication is scram-sha-512, tls, or empty for a user of ACLs only.
	Authentication v1alpha1.UserAuthenticationType
	ACLs           []v1alpha1.ACLRule
	Quotas         *v1alpha1.UserQuotas
}

// Credential is user's stored credential for mechanism, or ok=false.
func (s *SecuritySnapshot) Credential(user string, mechanism scram.Mechanism) (scram.Credential, bool) {
	c, ok := s.Credentials[user][mechanism.Name]
	return c, ok
}

// securityStore is the single owner of the current security snapshot, as snapshotStore is of
// the view's.
type securityStore struct {
	cur     atomic.Pointer[SecuritySnapshot]
	changed notify.Notifier
}

func (st *securityStore) Security() *SecuritySnapshot {
	if s := st.cur.Load(); s != nil {
		return s
	}
	return &SecuritySnapshot{}
}

func (st *securityStore) SecurityUpdated() <-chan struct{} { return st.changed.Changed() }

func (st *securityStore) store(s *SecuritySnapshot) {
	st.cur.Store(s)
	st.changed.Notify()
}

// MemorySecurity is a Security set by its owner (tests). The zero value was never set.
type MemorySecurity struct{ securityStore }

// Set replaces the state with s (marked Synced). The caller must not change s afterwards.
func (m *MemorySecurity) Set(s SecuritySnapshot) {
	s.Synced = true
	m.store(&s)
}

// InformerSecurity is the production Security: informers on the broker's own certificate
// Secret, on the cluster's credentials Secret (each by a field selector on its name, which is
// what lets the broker Role name them), and on the namespace's KafkaUsers. Every event marks
// it dirty; one goroutine rebuilds the snapshot.
type InformerSecurity struct {
	securityStore
	caches             []cache.Cache
	namespace, cluster string
	certSecret, creds  string
	log                logr.Logger
	dirty              chan struct{}
}

// NewInformerSecurity prepares the informers of broker id of cluster in namespace; Start runs
// them.
func NewInformerSecurity(cfg *rest.Config, scheme *runtime.Scheme, namespace, cluster string, id int32, log logr.Logger) (*InformerSecurity, error) {
	s := &InformerSecurity{namespace: namespace, cluster: cluster, log: log, dirty: make(chan struct{}, 1),
		certSecret: v1alpha1.BrokerCertSecretName(cluster, id), creds: v1alpha1.ScramCredentialsSecretName(cluster)}
	for _, name := range []string{s.certSecret, s.creds} {
		c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", name)}}})
		if err != nil {
			return nil, fmt.Errorf("create informer cache for secret %s: %w", name, err)
		}
		s.caches = append(s.caches, c)
	}
	users, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		return nil, fmt.Errorf("create informer cache for kafkausers: %w", err)
	}
	s.caches = append(s.caches, users)
	return s, nil
}

// Start runs the informers until ctx ends and returns once they synced and the first
// snapshot is published.
func (s *InformerSecurity) Start(ctx context.Context) error {
	kinds := [][]client.Object{{&corev1.Secret{}}, {&corev1.Secret{}}, {&v1alpha1.KafkaUser{}}}
	for i, c := range s.caches {
		if err := markDirtyOnEvents(ctx, c, kinds[i], s.dirty); err != nil {
			return err
		}
		go func() {
			if err := c.Start(ctx); err != nil {
				s.log.Error(err, "Informer cache stopped")
			}
		}()
	}
	for _, c := range s.caches {
		if !c.WaitForCacheSync(ctx) {
			return fmt.Errorf("security informers did not sync: %w", ctx.Err())
		}
	}
	if err := s.rebuild(ctx); err != nil {
		return err
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.dirty:
				if err := s.rebuild(ctx); err != nil && ctx.Err() == nil {
					s.log.Error(err, "Rebuild security view")
				}
			}
		}
	}()
	return nil
}

func (s *InformerSecurity) rebuild(ctx context.Context) error {
	cert := getCached(ctx, s.caches[0], s.namespace, s.certSecret, &corev1.Secret{})
	creds := getCached(ctx, s.caches[1], s.namespace, s.creds, &corev1.Secret{})
	var users v1alpha1.KafkaUserList
	if err := s.caches[2].List(ctx, &users, client.InNamespace(s.namespace)); err != nil {
		return fmt.Errorf("list kafkausers: %w", err)
	}
	snap, problems := securityFrom(s.cluster, cert, creds, users.Items)
	for _, p := range problems {
		s.log.Info("Security material not usable", "reason", p)
	}
	s.store(snap)
	return nil
}

// securityFrom is the security snapshot of what the informers hold (nil Secrets: not there
// yet). What cannot be used — a certificate that does not parse, a user's credential line
// that does not decode — is left out and said in problems, which never quote key material
// or a credential.
func securityFrom(cluster string, cert, creds *corev1.Secret, users []v1alpha1.KafkaUser) (*SecuritySnapshot, []string) {
	s := &SecuritySnapshot{Synced: true, Credentials: map[string]scram.Stored{}, Users: map[string]User{}}
	var problems []string
	if cert != nil {
		if len(cert.Data[corev1.TLSCertKey]) > 0 {
			pair, err := tls.X509KeyPair(cert.Data[corev1.TLSCertKey], cert.Data[corev1.TLSPrivateKeyKey])
			if err != nil {
				problems = append(problems, fmt.Sprintf("secret %s: the certificate and key do not load: %v", cert.Name, err))
			} else {
				s.Certificate = &pair
			}
		}
		s.ClusterCAs = poolOf(cert.Data[v1alpha1.SecretKeyCACert])
		s.ClientCAs = poolOf(cert.Data[v1alpha1.SecretKeyClientsCACert])
		if s.ClientCAs != nil {
			s.MutualTLSCAs = poolOf(append(append([]byte{}, cert.Data[v1alpha1.SecretKeyClientsCACert]...), cert.Data[v1alpha1.SecretKeyCACert]...))
		}
	}
	if creds != nil {
		for user, text := range creds.Data {
			stored, err := scram.Decode(text)
			if err != nil {
				problems = append(problems, fmt.Sprintf("secret %s: the credentials of one user do not decode (left out)", creds.Name))
				continue
			}
			s.Credentials[user] = stored
		}
	}
	for i := range users {
		u := &users[i]
		if u.Spec.Cluster != cluster || !u.DeletionTimestamp.IsZero() {
			continue
		}
		row := User{Name: u.Name, Principal: u.Principal(), Quotas: u.Spec.Quotas}
		if u.Spec.Authentication != nil {
			row.Authentication = u.Spec.Authentication.Type
		}
		if u.Spec.Authorization != nil {
			row.ACLs = u.Spec.Authorization.ACLs
		}
		s.Users[row.Principal] = row
	}
	return s, problems
}

func poolOf(bundle []byte) *x509.CertPool {
	if len(bundle) == 0 {
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil
	}
	return pool
}

// InformerSecurity prepares the security informers of broker id (Start runs them).
func (c *Conn) InformerSecurity(namespace, cluster string, id int32, log logr.Logger) (*InformerSecurity, error) {
	return NewInformerSecurity(c.rest, c.scheme, namespace, cluster, id, log)
}
