package certificates

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
)

// Reconciler keeps a TLS cluster's CAs and broker certificates (doc.go).
type Reconciler struct {
	client.Client
	// APIReader reads a user-supplied CA Secret, which carries no paddock label and so is
	// not in the manager's cache.
	APIReader client.Reader
	// Recorder receives an Event for every CA made or renewed and every certificate issued
	// (never their keys). Required.
	Recorder events.EventRecorder
	// Clock is the time renewals are judged by; nil is the real clock.
	Clock clock.PassiveClock
	// Random is the source of keys and serials; nil is crypto/rand.
	Random io.Reader
}

// Event reasons (docs/security.md, "Certificates").
const (
	reasonCAIssued       = "CertificateAuthorityIssued"
	reasonCAInvalid      = "CertificateAuthorityInvalid"
	reasonCertIssued     = "CertificateIssued"
	actionIssue          = "Issue"
	retryUnusableCAAfter = time.Minute
)

// scope is one reconcile's state.
type scope struct {
	cluster *kafkav1alpha1.KafkaCluster
	now     time.Time
	// clusterCA and clientsCA are the CA sets after this reconcile's renewals.
	clusterCA, clientsCA pki.CASet
	// next is the earliest time something must be renewed or promoted.
	next time.Time
}

// Reconcile keeps the CAs, then every broker's certificate, and comes back at the next
// renewal.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &kafkav1alpha1.KafkaCluster{}
	if err := r.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cluster.DeletionTimestamp.IsZero() || !cluster.Spec.NeedsTLS() {
		return ctrl.Result{}, nil // the Secrets are owned by the cluster: collected with it
	}
	s := &scope{cluster: cluster, now: r.now()}
	var err error
	if s.clusterCA, err = r.keepCA(ctx, s, "cluster", kafkav1alpha1.ClusterCASecretName, kafkav1alpha1.ClusterCACertSecretName, cluster.Spec.Certificates.ClusterCA); err != nil {
		return r.caFailed(ctx, cluster, err)
	}
	if s.clientsCA, err = r.keepCA(ctx, s, "clients", kafkav1alpha1.ClientsCASecretName, kafkav1alpha1.ClientsCACertSecretName, cluster.Spec.Certificates.ClientsCA); err != nil {
		return r.caFailed(ctx, cluster, err)
	}
	var errs []error
	for id := int32(0); id < cluster.Spec.Replicas; id++ {
		if err := r.keepBrokerCertificate(ctx, s, id); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	return requeueAt(s.now, s.next), nil
}

// errUnusableCA is a CA the user supplied (or a stored one) that cannot sign.
var errUnusableCA = errors.New("unusable CA")

func (r *Reconciler) caFailed(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, err error) (ctrl.Result, error) {
	if !errors.Is(err, errUnusableCA) {
		return ctrl.Result{}, err
	}
	// Retrying at once cannot help, and a user's Secret is not watched: look again later.
	log.FromContext(ctx).Info("CA unusable", "reason", err.Error())
	r.Recorder.Eventf(cluster, nil, corev1.EventTypeWarning, reasonCAInvalid, actionIssue, "%s", err.Error())
	return ctrl.Result{RequeueAfter: retryUnusableCAAfter}, nil
}

// keepCA reads the CA set of one kind, renews it by its policy, stores it when it changed
// and publishes its trust bundle in bundleName. A user-supplied CA is read from user's
// Secret and never written.
func (r *Reconciler) keepCA(ctx context.Context, s *scope, kind string, secretName, bundleName func(string) string, user *kafkav1alpha1.CertificateAuthority) (pki.CASet, error) {
	c := s.cluster
	managed := user == nil
	set, err := r.readCA(ctx, c.Namespace, secretName(c.Name), user)
	if err != nil {
		return set, err
	}
	policy := caPolicy(c, kind)
	set, changed, err := policy.Step(set, s.now, managed, r.random())
	if err != nil {
		return set, err
	}
	if changed {
		if err := r.writeSecret(ctx, c, secretName(c.Name), caSecretData(set)); err != nil {
			return set, err
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, reasonCAIssued, actionIssue,
			"The %s CA in Secret %s was made or renewed; it signs until %s", kind, secretName(c.Name), set.Signing.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := r.writeSecret(ctx, c, bundleName(c.Name), map[string][]byte{kafkav1alpha1.SecretKeyCACert: set.Trusted(s.now)}); err != nil {
		return set, err
	}
	s.next = earliest(s.next, policy.NextChange(set, managed))
	return set, nil
}

// readCA is the stored CA set: the user's CA, or what Secret name holds (empty when it does
// not exist yet).
func (r *Reconciler) readCA(ctx context.Context, namespace, name string, user *kafkav1alpha1.CertificateAuthority) (pki.CASet, error) {
	if user != nil {
		sec := &corev1.Secret{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: user.SecretName}, sec); err != nil {
			if apierrors.IsNotFound(err) {
				return pki.CASet{}, fmt.Errorf("%w: Secret %s does not exist", errUnusableCA, user.SecretName)
			}
			return pki.CASet{}, fmt.Errorf("get secret %s: %w", user.SecretName, err)
		}
		ca, err := pki.ParseCA(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
		if err != nil {
			return pki.CASet{}, fmt.Errorf("%w: Secret %s: %v", errUnusableCA, user.SecretName, err)
		}
		return pki.CASet{Signing: ca}, nil
	}
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return pki.CASet{}, nil
		}
		return pki.CASet{}, fmt.Errorf("get secret %s: %w", name, err)
	}
	return parseCASet(name, sec.Data)
}

// parseCASet reads a CA Secret the operator wrote. A damaged one is refused, never replaced:
// a new CA would silently cut off every client that trusts the old one.
func parseCASet(name string, data map[string][]byte) (pki.CASet, error) {
	var set pki.CASet
	var err error
	if set.Signing, err = pki.ParseCA(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		return set, fmt.Errorf("%w: Secret %s: %v", errUnusableCA, name, err)
	}
	if len(data[kafkav1alpha1.SecretKeyNextCert]) > 0 {
		if set.Next, err = pki.ParseCA(data[kafkav1alpha1.SecretKeyNextCert], data[kafkav1alpha1.SecretKeyNextKey]); err != nil {
			return set, fmt.Errorf("%w: Secret %s, next CA: %v", errUnusableCA, name, err)
		}
	}
	if len(data[kafkav1alpha1.SecretKeyPreviousCert]) > 0 {
		if set.Previous, err = pki.ParseCertificate(data[kafkav1alpha1.SecretKeyPreviousCert]); err != nil {
			return set, fmt.Errorf("%w: Secret %s, previous CA: %v", errUnusableCA, name, err)
		}
	}
	return set, nil
}

// caSecretData is what a managed CA Secret holds.
func caSecretData(set pki.CASet) map[string][]byte {
	data := map[string][]byte{corev1.TLSCertKey: set.Signing.CertPEM, corev1.TLSPrivateKeyKey: set.Signing.KeyPEM}
	if set.Next != nil {
		data[kafkav1alpha1.SecretKeyNextCert], data[kafkav1alpha1.SecretKeyNextKey] = set.Next.CertPEM, set.Next.KeyPEM
	}
	if set.Previous != nil {
		data[kafkav1alpha1.SecretKeyPreviousCert] = pki.Bundle(set.Previous.NotBefore, set.Previous)
	}
	return data
}

// keepBrokerCertificate issues broker id's certificate when LeafVerdict says so, and keeps
// the trust bundles beside it current.
func (r *Reconciler) keepBrokerCertificate(ctx context.Context, s *scope, id int32) error {
	c := s.cluster
	name := kafkav1alpha1.BrokerCertSecretName(c.Name, id)
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, sec); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get secret %s: %w", name, err)
	}
	leaf := brokerLeaf(c, id)
	var cert *x509.Certificate
	if len(sec.Data[corev1.TLSCertKey]) > 0 {
		cert, _ = pki.ParseCertificate(sec.Data[corev1.TLSCertKey]) // unparsable: issued anew
	}
	renewBefore := c.Spec.CertificateRenewBefore()
	data := maps.Clone(sec.Data)
	if data == nil {
		data = map[string][]byte{}
	}
	if verdict := pki.LeafVerdict(cert, s.clusterCA.Signing, leaf.DNSNames, leaf.IPs, s.now, renewBefore); verdict != "" {
		certPEM, keyPEM, err := s.clusterCA.Signing.Issue(leaf, s.now, c.Spec.CertificateValidity(), r.random())
		if err != nil {
			return fmt.Errorf("issue the certificate of broker %d: %w", id, err)
		}
		data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey] = certPEM, keyPEM
		if cert, _ = pki.ParseCertificate(certPEM); cert == nil {
			return fmt.Errorf("issue the certificate of broker %d: it does not parse", id)
		}
		r.Recorder.Eventf(c, nil, corev1.EventTypeNormal, reasonCertIssued, actionIssue,
			"Issued the certificate of broker %d (Secret %s, reason %s), valid until %s", id, name, verdict, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	data[kafkav1alpha1.SecretKeyCACert] = s.clusterCA.Trusted(s.now)
	data[kafkav1alpha1.SecretKeyClientsCACert] = s.clientsCA.Trusted(s.now)
	if t := pki.RenewalTime(cert, renewBefore); t.After(s.now) {
		s.next = earliest(s.next, t)
	}
	return r.writeSecret(ctx, c, name, data, kafkav1alpha1.LabelBrokerID, fmt.Sprint(id))
}

// writeSecret creates or updates Secret name of cluster with data (and the cluster's labels,
// an extra label pair when given, and the cluster as its controller); nothing is written when
// it already holds exactly that.
func (r *Reconciler) writeSecret(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, name string, data map[string][]byte, extraLabel ...string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cluster.Namespace}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, sec, func() error {
		if sec.Labels == nil {
			sec.Labels = map[string]string{}
		}
		maps.Copy(sec.Labels, kafkav1alpha1.ClusterLabels(cluster.Name))
		if len(extraLabel) == 2 {
			sec.Labels[extraLabel[0]] = extraLabel[1]
		}
		if !sameData(sec.Data, data) {
			sec.Data = data
		}
		return controllerutil.SetControllerReference(cluster, sec, r.Scheme())
	})
	if err != nil {
		return fmt.Errorf("write secret %s: %w", name, err)
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
}

func (r *Reconciler) random() io.Reader {
	if r.Random == nil {
		return rand.Reader
	}
	return r.Random
}

func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// requeueAt comes back at next (at least a second from now), or never when next is zero.
func requeueAt(now, next time.Time) ctrl.Result {
	if next.IsZero() {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(now), time.Second)}
}

// SetupWithManager watches KafkaClusters (their spec, and the advertised hosts in their
// registry rows) and the Secrets they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("certificates").
		For(&kafkav1alpha1.KafkaCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, advertisedHostsChanged()))).
		Owns(&corev1.Secret{}).
		Complete(r)
}

// advertisedHostsChanged passes a KafkaCluster update whose registry rows advertise other
// hosts: a broker certificate must name them.
func advertisedHostsChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*kafkav1alpha1.KafkaCluster)
		cur, okNew := e.ObjectNew.(*kafkav1alpha1.KafkaCluster)
		return okOld && okNew && !slices.Equal(advertisedHosts(old), advertisedHosts(cur))
	}}
}

func advertisedHosts(c *kafkav1alpha1.KafkaCluster) []string {
	var hosts []string
	for _, row := range c.Status.Brokers {
		for _, l := range row.Listeners {
			hosts = append(hosts, fmt.Sprintf("%d/%s", row.ID, l.Host))
		}
	}
	return hosts
}
