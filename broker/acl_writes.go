package broker

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
)

// What the KafkaUser-writing admin APIs share (CreateAcls, DeleteAcls; docs/security.md,
// "Authorization"): the Kafka error of a failed KafkaUser write (cluster.Admin writes them).

// errNoUserAdmin is the message of a KafkaUser-writing request to a broker without Admin.
const errNoUserAdmin = "this broker runs without API access (no Admin); KafkaUsers cannot be changed through it"

// userWriteError is the Kafka error a failed KafkaUser write answers with, and its message.
func userWriteError(err error) (int16, string) {
	var notOurs *cluster.ErrUserNotOurs
	switch {
	case errors.As(err, &notOurs):
		return kerr.InvalidRequest.Code, notOurs.Error()
	case errors.As(err, new(invalidACL)):
		return kerr.InvalidRequest.Code, err.Error()
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return kerr.ClusterAuthorizationFailed.Code, "the broker may not write KafkaUsers: " + err.Error()
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return kerr.InvalidRequest.Code, err.Error()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return kerr.RequestTimedOut.Code, "the API server did not answer in time: " + err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}

// invalidACL refuses one ACL write with INVALID_REQUEST and says why.
type invalidACL string

func (e invalidACL) Error() string { return string(e) }

// userKey is a KafkaUser as a principal names it: its object name, and whether the
// principal is its tls one (User:CN=<name>).
type userKey struct {
	name string
	tls  bool
}

// checkPrincipal refuses a change to KafkaUser u (nil: none exists) for the principal of key
// when u does not have that principal.
func checkPrincipal(u *v1alpha1.KafkaUser, key userKey) error {
	principal := "User:" + key.name
	if key.tls {
		principal = "User:CN=" + key.name
	}
	switch {
	case u == nil && key.tls:
		return invalidACL("principal " + principal + " is a tls KafkaUser's and there is no KafkaUser " + key.name +
			": create it with authentication type tls, then its ACLs can be changed through Kafka")
	case u == nil:
		return nil
	case u.Principal() != principal:
		return invalidACL("KafkaUser " + key.name + "'s principal is " + u.Principal() + ", not " + principal)
	}
	return nil
}
