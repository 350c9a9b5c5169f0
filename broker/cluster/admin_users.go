package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// The broker's KafkaUser writes (docs/security.md, "Authorization"): CreateAcls and
// DeleteAcls change a user's spec.authorization.acls, AlterClientQuotas its spec.quotas and
// AlterUserScramCredentials its salted credentials (never a password Secret reference: the
// admission policy refuses that from a broker). The broker Role's verbs on kafkausers
// are exactly what these need: get, list, watch, create, update. Every write carries the
// resourceVersion it read (an update, never a blind overwrite) and is retried a few times on a
// conflict, so a user's own edit or another broker's is never undone.

// ErrUserNotOurs refuses a write to a KafkaUser that is another cluster's, or is being
// deleted: the ACLs of a principal of this cluster cannot go there.
type ErrUserNotOurs struct {
	Name, Why string
}

func (e *ErrUserNotOurs) Error() string { return fmt.Sprintf("KafkaUser %s %s", e.Name, e.Why) }

// UpdateUser applies change to the current KafkaUser name and writes it back when change
// reports a change, retrying a few times on a conflict. A user that does not exist is
// created when create is true — ACLs only (no authentication), labelled with the cluster's
// labels; the KafkaUser reconciler adds its finalizer and status — and otherwise change sees
// nil and nothing is written. A user of another cluster, or being deleted, is refused with
// ErrUserNotOurs; an error from change is returned as is and nothing is written.
func (a *Admin) UpdateUser(ctx context.Context, name string, create bool, change func(*v1alpha1.KafkaUser) (bool, error)) error {
	var err error
	for range 4 {
		u := &v1alpha1.KafkaUser{}
		err = a.Client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: name}, u)
		switch {
		case apierrors.IsNotFound(err) && !create:
			_, cerr := change(nil)
			return cerr
		case apierrors.IsNotFound(err):
			u = &v1alpha1.KafkaUser{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.Namespace, Labels: v1alpha1.ClusterLabels(a.Cluster)},
				Spec:       v1alpha1.KafkaUserSpec{Cluster: a.Cluster},
			}
			changed, cerr := change(u)
			if cerr != nil || !changed {
				return cerr
			}
			if err = a.Client.Create(ctx, u); err == nil || !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue // created meanwhile: change the one that is there
		case err != nil:
			return err
		case u.Spec.Cluster != a.Cluster:
			return &ErrUserNotOurs{Name: name, Why: "belongs to cluster " + u.Spec.Cluster + ", not " + a.Cluster}
		case !u.DeletionTimestamp.IsZero():
			return &ErrUserNotOurs{Name: name, Why: "is being deleted"}
		}
		changed, cerr := change(u)
		if cerr != nil || !changed {
			return cerr
		}
		if err = a.Client.Update(ctx, u); err == nil || !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// Users are the KafkaUsers of the broker's cluster as the API server has them now (not the
// informer's copy): what a DeleteAcls filter is matched against before its writes.
func (a *Admin) Users(ctx context.Context) ([]v1alpha1.KafkaUser, error) {
	var list v1alpha1.KafkaUserList
	if err := a.Client.List(ctx, &list, client.InNamespace(a.Namespace)); err != nil {
		return nil, err
	}
	var out []v1alpha1.KafkaUser
	for _, u := range list.Items {
		if u.Spec.Cluster == a.Cluster && u.DeletionTimestamp.IsZero() {
			out = append(out, u)
		}
	}
	return out, nil
}
