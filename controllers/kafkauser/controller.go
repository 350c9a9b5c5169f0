package kafkauser

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kafkav1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/pki"
	"github.com/paddock-dev/paddock/internal/scram"
)

// Reconciler keeps every KafkaUser's credentials (doc.go).
type Reconciler struct {
	client.Client
	// APIReader reads Secrets the manager does not cache (they carry no paddock label): a
	// referenced password, a user-supplied clients CA, a Secret in the way of the user's own.
	APIReader client.Reader
	// Recorder receives an Event when credentials are issued and when a user cannot be
	// served; never a password or a key. Required.
	Recorder events.EventRecorder
	// Clock judges certificate renewals; nil is the real clock.
	Clock clock.PassiveClock
	// Random is the source of passwords, salts, keys and serials; nil is crypto/rand.
	Random io.Reader
}

// Finalizer is held by a KafkaUser until its entry in the cluster's credentials Secret is
// removed.
const Finalizer = "kafka.paddock.dev/credentials"

// Condition reasons and Event reasons (docs/security.md, "KafkaUser").
const (
	ReasonCredentialsIssued  = "CredentialsIssued"
	ReasonACLsOnly           = "ACLsOnly"
	ReasonClusterNotFound    = "ClusterNotFound"
	ReasonSecretConflict     = "SecretConflict"
	ReasonPasswordUnreadable = "PasswordSecretInvalid"
	ReasonNoClientsCA        = "NoClientsCA"
	reasonCertificateIssued  = "CertificateIssued"
	reasonPasswordSalted     = "PasswordSalted"
	reasonCredentialsSet     = "CredentialsSet"
	actionIssue              = "Issue"
	// recheckReferencedPassword is how often a password taken from a user's Secret is read
	// again: that Secret carries no paddock label, so no watch sees it change.
	recheckReferencedPassword = time.Minute
)

// clusterIndex indexes KafkaUsers by spec.cluster.
const clusterIndex = "spec.cluster"

// problem is a reason the user cannot be served that needs a human (or another object to
// appear): Ready False, Degraded True, a Warning Event.
type problem struct{ reason, message string }

func (p *problem) Error() string { return p.message }

// outcome is what one reconcile made: the Ready condition's reason and message, and when to
// come back.
type outcome struct {
	reason, message string
	requeueAfter    time.Duration
}

// Reconcile makes the user's credentials, or removes them when it is being deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	user := &kafkav1alpha1.KafkaUser{}
	if err := r.Get(ctx, req.NamespacedName, user); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !user.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, user)
	}
	if !controllerutil.ContainsFinalizer(user, Finalizer) {
		patch := client.MergeFrom(user.DeepCopy())
		controllerutil.AddFinalizer(user, Finalizer)
		if err := r.Patch(ctx, user, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	out, err := r.keep(ctx, user)
	var p *problem
	switch {
	case errors.As(err, &p):
		r.Recorder.Eventf(user, nil, corev1.EventTypeWarning, p.reason, actionIssue, "%s", p.message)
		return ctrl.Result{}, r.writeStatus(ctx, user, p)
	case err != nil:
		return ctrl.Result{}, err
	}
	if err := r.writeStatus(ctx, user, nil, out); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: out.requeueAfter}, nil
}

// keep makes what user's authentication type needs and removes what it no longer needs.
func (r *Reconciler) keep(ctx context.Context, user *kafkav1alpha1.KafkaUser) (outcome, error) {
	cluster := &kafkav1alpha1.KafkaCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Spec.Cluster}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{}, &problem{ReasonClusterNotFound, fmt.Sprintf("KafkaCluster %s does not exist in namespace %s", user.Spec.Cluster, user.Namespace)}
		}
		return outcome{}, fmt.Errorf("get cluster %s: %w", user.Spec.Cluster, err)
	}
	auth := kafkav1alpha1.UserAuthenticationType("")
	if user.Spec.Authentication != nil {
		auth = user.Spec.Authentication.Type
	}
	if auth != kafkav1alpha1.UserScramSHA512 {
		if err := r.setCredentials(ctx, cluster, user.Name, nil); err != nil {
			return outcome{}, err
		}
	}
	switch auth {
	case kafkav1alpha1.UserScramSHA512:
		return r.keepScram(ctx, cluster, user)
	case kafkav1alpha1.UserTLS:
		return r.keepCertificate(ctx, cluster, user)
	}
	if err := r.deleteOwnSecret(ctx, user); err != nil {
		return outcome{}, err
	}
	return outcome{reason: ReasonACLsOnly, message: "the user has no credentials of its own: its ACLs apply to principal " + user.Principal() + " authenticated elsewhere"}, nil
}

// keepScram keeps the user's password in its Secret and its salted credentials in the
// cluster's credentials Secret.
func (r *Reconciler) keepScram(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user *kafkav1alpha1.KafkaUser) (outcome, error) {
	if set := user.Spec.Authentication.ScramCredentials; set != nil {
		return r.keepSetCredentials(ctx, cluster, user, set)
	}
	own, err := r.ownSecret(ctx, cluster, user)
	if err != nil {
		return outcome{}, err
	}
	out := outcome{reason: ReasonCredentialsIssued}
	var password string
	if ref := user.Spec.Authentication.Password; ref != nil {
		if password, err = r.referencedPassword(ctx, user.Namespace, ref.SecretKeyRef); err != nil {
			return outcome{}, err
		}
		out.requeueAfter = recheckReferencedPassword
		out.message = fmt.Sprintf("the password of Secret %s (key %s) is in Secret %s; the brokers check its salted SCRAM-SHA-256 and SCRAM-SHA-512 credentials", ref.SecretKeyRef.Name, ref.SecretKeyRef.Key, user.Name)
	} else {
		password = string(own.Data[kafkav1alpha1.SecretKeyPassword])
		if password == "" {
			if password, err = generatePassword(r.random()); err != nil {
				return outcome{}, err
			}
		}
		out.message = fmt.Sprintf("a generated password is in Secret %s; the brokers check its salted SCRAM-SHA-256 and SCRAM-SHA-512 credentials", user.Name)
	}
	// The password is in the user's Secret before the brokers accept it: an application that
	// starts once the user is Ready finds a password that works.
	if err := r.writeOwnSecret(ctx, cluster, user, own, map[string][]byte{
		kafkav1alpha1.SecretKeyPassword: []byte(password),
		kafkav1alpha1.SecretKeyJAAS:     []byte(jaasConfig(user.Name, password)),
	}); err != nil {
		return outcome{}, err
	}
	current, err := r.credentialsEntry(ctx, cluster, user.Name)
	if err != nil {
		return outcome{}, err
	}
	if !credentialsMatch(current, password) {
		stored, err := saltCredentials(password, r.random())
		if err != nil {
			return outcome{}, err
		}
		if err := r.setCredentials(ctx, cluster, user.Name, stored.Encode()); err != nil {
			return outcome{}, err
		}
		r.Recorder.Eventf(user, nil, corev1.EventTypeNormal, reasonPasswordSalted, actionIssue,
			"Salted the password of Secret %s into %s (SCRAM-SHA-256, SCRAM-SHA-512)", user.Name, kafkav1alpha1.ScramCredentialsSecretName(cluster.Name))
	}
	return out, nil
}

// keepSetCredentials keeps the salted credentials set through AlterUserScramCredentials
// (spec.authentication.scramCredentials) as the user's entry of the cluster's credentials
// Secret, and removes the user's own Secret: no password of the operator's works any more, so
// none is kept where an application would take it for the user's.
func (r *Reconciler) keepSetCredentials(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user *kafkav1alpha1.KafkaUser, set *kafkav1alpha1.ScramCredentials) (outcome, error) {
	stored, mechanisms := storedOf(set)
	current, err := r.credentialsEntry(ctx, cluster, user.Name)
	if err != nil {
		return outcome{}, err
	}
	var text []byte
	if len(stored) > 0 {
		text = stored.Encode()
	}
	if !bytes.Equal(current, text) {
		if err := r.setCredentials(ctx, cluster, user.Name, text); err != nil {
			return outcome{}, err
		}
		r.Recorder.Eventf(user, nil, corev1.EventTypeNormal, reasonCredentialsSet, actionIssue,
			"Wrote the salted credentials set through AlterUserScramCredentials into %s (%v)", kafkav1alpha1.ScramCredentialsSecretName(cluster.Name), mechanisms)
	}
	if err := r.deleteOwnSecret(ctx, user); err != nil {
		return outcome{}, err
	}
	return outcome{reason: ReasonCredentialsIssued,
		message: fmt.Sprintf("salted credentials set through AlterUserScramCredentials (%v) are what the brokers check; no password is kept", mechanisms)}, nil
}

// storedOf is set as the credentials Secret stores them, and the mechanisms it has.
func storedOf(set *kafkav1alpha1.ScramCredentials) (scram.Stored, []string) {
	stored := scram.Stored{}
	var mechanisms []string
	for _, m := range []struct {
		mech scram.Mechanism
		cred *kafkav1alpha1.ScramCredential
	}{{scram.SHA256, set.SHA256}, {scram.SHA512, set.SHA512}} {
		if m.cred == nil {
			continue
		}
		stored[m.mech.Name] = scram.Credential{Salt: m.cred.Salt, Iterations: int(m.cred.Iterations), StoredKey: m.cred.StoredKey, ServerKey: m.cred.ServerKey}
		mechanisms = append(mechanisms, m.mech.Name)
	}
	return stored, mechanisms
}

// referencedPassword reads the password a scram user names.
func (r *Reconciler) referencedPassword(ctx context.Context, namespace string, ref kafkav1alpha1.SecretKeyRef) (string, error) {
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &problem{ReasonPasswordUnreadable, fmt.Sprintf("the password Secret %s does not exist", ref.Name)}
		}
		return "", fmt.Errorf("get secret %s: %w", ref.Name, err)
	}
	password := string(sec.Data[ref.Key])
	if password == "" {
		return "", &problem{ReasonPasswordUnreadable, fmt.Sprintf("the password Secret %s has no key %s, or it is empty", ref.Name, ref.Key)}
	}
	return password, nil
}

// keepCertificate keeps a tls user's client certificate, issued by the clients CA, and the
// cluster CA bundle it needs to trust the brokers.
func (r *Reconciler) keepCertificate(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user *kafkav1alpha1.KafkaUser) (outcome, error) {
	own, err := r.ownSecret(ctx, cluster, user)
	if err != nil {
		return outcome{}, err
	}
	ca, err := r.clientsCA(ctx, cluster)
	if err != nil {
		return outcome{}, err
	}
	trust := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: kafkav1alpha1.ClusterCACertSecretName(cluster.Name)}, trust); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{}, &problem{ReasonNoClientsCA, fmt.Sprintf("the cluster CA bundle %s is not published yet", kafkav1alpha1.ClusterCACertSecretName(cluster.Name))}
		}
		return outcome{}, fmt.Errorf("get secret %s: %w", kafkav1alpha1.ClusterCACertSecretName(cluster.Name), err)
	}
	now, renewBefore := r.now(), cluster.Spec.CertificateRenewBefore()
	certPEM, keyPEM := own.Data[kafkav1alpha1.SecretKeyUserCert], own.Data[kafkav1alpha1.SecretKeyUserKey]
	var cert *x509.Certificate
	if len(certPEM) > 0 && len(keyPEM) > 0 {
		cert, _ = pki.ParseCertificate(certPEM) // unparsable: issued anew
	}
	if cert != nil && cert.Subject.CommonName != user.Name {
		cert = nil
	}
	if verdict := pki.LeafVerdict(cert, ca, nil, nil, now, renewBefore); verdict != "" {
		if certPEM, keyPEM, err = ca.Issue(userLeaf(user.Name), now, cluster.Spec.CertificateValidity(), r.random()); err != nil {
			return outcome{}, fmt.Errorf("issue the certificate of user %s: %w", user.Name, err)
		}
		if cert, err = pki.ParseCertificate(certPEM); err != nil {
			return outcome{}, fmt.Errorf("issue the certificate of user %s: %w", user.Name, err)
		}
		r.Recorder.Eventf(user, nil, corev1.EventTypeNormal, reasonCertificateIssued, actionIssue,
			"Issued the client certificate CN=%s (Secret %s, reason %s), valid until %s", user.Name, user.Name, verdict, cert.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := r.writeOwnSecret(ctx, cluster, user, own, map[string][]byte{
		kafkav1alpha1.SecretKeyCACert:   trust.Data[kafkav1alpha1.SecretKeyCACert],
		kafkav1alpha1.SecretKeyUserCert: certPEM,
		kafkav1alpha1.SecretKeyUserKey:  keyPEM,
	}); err != nil {
		return outcome{}, err
	}
	out := outcome{reason: ReasonCredentialsIssued,
		message: fmt.Sprintf("the client certificate CN=%s is in Secret %s, valid until %s", user.Name, user.Name, cert.NotAfter.UTC().Format(time.RFC3339))}
	if t := pki.RenewalTime(cert, renewBefore); t.After(now) {
		out.requeueAfter = max(t.Sub(now), time.Second)
	}
	return out, nil
}

// clientsCA is the CA that signs the cluster's client certificates: the user's
// (spec.certificates.clientsCA) or the one the certificates reconciler keeps.
func (r *Reconciler) clientsCA(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster) (*pki.CA, error) {
	if !cluster.Spec.NeedsTLS() {
		return nil, &problem{ReasonNoClientsCA, fmt.Sprintf("KafkaCluster %s has no TLS listener, so no clients CA issues certificates: add a listener with tls: true", cluster.Name)}
	}
	name, reader := kafkav1alpha1.ClientsCASecretName(cluster.Name), client.Reader(r.Client)
	if user := cluster.Spec.Certificates.ClientsCA; user != nil {
		name, reader = user.SecretName, r.APIReader
	}
	sec := &corev1.Secret{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &problem{ReasonNoClientsCA, fmt.Sprintf("the clients CA Secret %s does not exist yet", name)}
		}
		return nil, fmt.Errorf("get secret %s: %w", name, err)
	}
	ca, err := pki.ParseCA(sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, &problem{ReasonNoClientsCA, fmt.Sprintf("the clients CA Secret %s cannot sign: %v", name, err)}
	}
	return ca, nil
}

// ownSecret is the user's Secret as it is now (empty when it does not exist), or a
// SecretConflict problem when that name is the cluster's or another owner's.
func (r *Reconciler) ownSecret(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user *kafkav1alpha1.KafkaUser) (*corev1.Secret, error) {
	if why := reservedSecretName(cluster.Name, user.Name); why != "" {
		return nil, &problem{ReasonSecretConflict, why}
	}
	sec := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Name}, sec)
	if apierrors.IsNotFound(err) {
		// Not in the cache, which holds only labelled Secrets: one of the user's own may be
		// there under this name.
		err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Name}, sec)
		if apierrors.IsNotFound(err) {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: user.Namespace, Name: user.Name}}, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("get secret %s: %w", user.Name, err)
	}
	if owner := metav1.GetControllerOf(sec); owner == nil || owner.UID != user.UID {
		return nil, &problem{ReasonSecretConflict, fmt.Sprintf("Secret %s exists and is not this KafkaUser's; delete it or give the KafkaUser another name", user.Name)}
	}
	return sec, nil
}

// writeOwnSecret makes sec (from ownSecret) hold exactly data, labelled with the cluster's
// labels and controlled by the user; nothing is written when it already does.
func (r *Reconciler) writeOwnSecret(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user *kafkav1alpha1.KafkaUser, sec *corev1.Secret, data map[string][]byte) error {
	want := sec.DeepCopy()
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	maps.Copy(want.Labels, kafkav1alpha1.ClusterLabels(cluster.Name))
	want.Type = corev1.SecretTypeOpaque
	want.Data = data
	if err := controllerutil.SetControllerReference(user, want, r.Scheme()); err != nil {
		return err
	}
	if sec.ResourceVersion == "" {
		if err := r.Create(ctx, want); err != nil {
			return fmt.Errorf("create secret %s: %w", sec.Name, err)
		}
		return nil
	}
	if equality.Semantic.DeepEqual(sec.Labels, want.Labels) && equality.Semantic.DeepEqual(sec.OwnerReferences, want.OwnerReferences) &&
		maps.EqualFunc(sec.Data, want.Data, bytes.Equal) {
		return nil
	}
	if err := r.Update(ctx, want); err != nil {
		return fmt.Errorf("update secret %s: %w", sec.Name, err)
	}
	return nil
}

// deleteOwnSecret removes the user's Secret when the user controls it (a user that no
// longer authenticates keeps no stale password or key).
func (r *Reconciler) deleteOwnSecret(ctx context.Context, user *kafkav1alpha1.KafkaUser) error {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Name}, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if owner := metav1.GetControllerOf(sec); owner == nil || owner.UID != user.UID {
		return nil
	}
	if err := r.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete secret %s: %w", sec.Name, err)
	}
	return nil
}

// credentialsEntry is user's entry in the cluster's credentials Secret (nil when none).
func (r *Reconciler) credentialsEntry(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user string) ([]byte, error) {
	sec := &corev1.Secret{}
	name := kafkav1alpha1.ScramCredentialsSecretName(cluster.Name)
	if err := r.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get secret %s: %w", name, err)
	}
	return sec.Data[user], nil
}

// setCredentials sets user's entry in the cluster's credentials Secret to text, or removes
// it when text is nil. Only that key is touched: every KafkaUser owns its own entry. The
// write carries the resourceVersion it read, so two users' writes never undo each other
// (a conflict is retried by the next reconcile).
func (r *Reconciler) setCredentials(ctx context.Context, cluster *kafkav1alpha1.KafkaCluster, user string, text []byte) error {
	name := kafkav1alpha1.ScramCredentialsSecretName(cluster.Name)
	sec := &corev1.Secret{}
	err := r.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, sec)
	switch {
	case apierrors.IsNotFound(err):
		if text == nil {
			return nil
		}
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: name, Labels: kafkav1alpha1.ClusterLabels(cluster.Name)},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{user: text}}
		if err := controllerutil.SetControllerReference(cluster, sec, r.Scheme()); err != nil {
			return err
		}
		if err := r.Create(ctx, sec); err != nil {
			return fmt.Errorf("create secret %s: %w", name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("get secret %s: %w", name, err)
	}
	current, present := sec.Data[user]
	if (text == nil && !present) || (text != nil && bytes.Equal(current, text)) {
		return nil
	}
	sec = sec.DeepCopy()
	if text == nil {
		delete(sec.Data, user)
	} else {
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[user] = text
	}
	if err := r.Update(ctx, sec); err != nil {
		return fmt.Errorf("update secret %s: %w", name, err)
	}
	return nil
}

// finalize removes a deleted user's credentials entry, then its finalizer. The user's own
// Secret is collected with it (it is the owner).
func (r *Reconciler) finalize(ctx context.Context, user *kafkav1alpha1.KafkaUser) error {
	if !controllerutil.ContainsFinalizer(user, Finalizer) {
		return nil
	}
	cluster := &kafkav1alpha1.KafkaCluster{}
	switch err := r.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Spec.Cluster}, cluster); {
	case apierrors.IsNotFound(err):
		// Without the cluster its credentials Secret is collected with it.
	case err != nil:
		return fmt.Errorf("get cluster %s: %w", user.Spec.Cluster, err)
	default:
		if err := r.setCredentials(ctx, cluster, user.Name, nil); err != nil {
			return err
		}
	}
	patch := client.MergeFrom(user.DeepCopy())
	controllerutil.RemoveFinalizer(user, Finalizer)
	if err := r.Patch(ctx, user, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	log.FromContext(ctx).Info("KafkaUser revoked", "cluster", user.Spec.Cluster)
	return nil
}

// writeStatus sets the status from a problem (Ready False, Degraded True) or an outcome
// (Ready True, Degraded False), with the principal, Secret and ACL count; it writes only a
// change.
func (r *Reconciler) writeStatus(ctx context.Context, user *kafkav1alpha1.KafkaUser, p *problem, out ...outcome) error {
	next := user.DeepCopy()
	st := &next.Status
	st.ObservedGeneration = user.Generation
	st.Principal = user.Principal()
	st.ACLs = 0
	if a := user.Spec.Authorization; a != nil {
		st.ACLs = int32(len(a.ACLs))
	}
	st.Secret = ""
	ready := metav1.Condition{Type: kafkav1alpha1.ConditionReady, ObservedGeneration: user.Generation}
	degraded := metav1.Condition{Type: kafkav1alpha1.ConditionDegraded, ObservedGeneration: user.Generation}
	if p != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, p.reason, p.message
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, p.reason, p.message
	} else {
		o := out[0]
		ready.Status, ready.Reason, ready.Message = metav1.ConditionTrue, o.reason, o.message
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionFalse, o.reason, "nothing needs a human"
		if o.reason == ReasonCredentialsIssued {
			st.Secret = user.Name
		}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, degraded)
	if equality.Semantic.DeepEqual(user.Status, next.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, next, client.MergeFrom(user)); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
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

// SetupWithManager watches KafkaUsers and their Secrets, and maps a KafkaCluster (created,
// deleted, its spec changed) and the cluster Secrets a user's credentials depend on (the
// clients CA, the cluster CA bundle, the credentials Secret) to the cluster's users.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &kafkav1alpha1.KafkaUser{}, clusterIndex, func(o client.Object) []string {
		return []string{o.(*kafkav1alpha1.KafkaUser).Spec.Cluster}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("kafkauser").
		For(&kafkav1alpha1.KafkaUser{}).
		Owns(&corev1.Secret{}).
		Watches(&kafkav1alpha1.KafkaCluster{}, handler.EnqueueRequestsFromMapFunc(r.usersOfCluster), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.usersOfClusterSecret)).
		Complete(r)
}

// usersOfCluster is every KafkaUser of the cluster o.
func (r *Reconciler) usersOfCluster(ctx context.Context, o client.Object) []reconcile.Request {
	return r.users(ctx, o.GetNamespace(), o.GetName())
}

// usersOfClusterSecret maps a cluster Secret a user depends on to the cluster's users.
func (r *Reconciler) usersOfClusterSecret(ctx context.Context, o client.Object) []reconcile.Request {
	cluster := o.GetLabels()[kafkav1alpha1.LabelCluster]
	switch o.GetName() {
	case kafkav1alpha1.ClientsCASecretName(cluster), kafkav1alpha1.ClusterCACertSecretName(cluster), kafkav1alpha1.ScramCredentialsSecretName(cluster):
		return r.users(ctx, o.GetNamespace(), cluster)
	}
	return nil
}

func (r *Reconciler) users(ctx context.Context, namespace, cluster string) []reconcile.Request {
	if cluster == "" {
		return nil
	}
	var list kafkav1alpha1.KafkaUserList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{clusterIndex: cluster}); err != nil {
		log.FromContext(ctx).Error(err, "list the cluster's KafkaUsers", "cluster", cluster)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, u := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.Namespace, Name: u.Name}})
	}
	return out
}
