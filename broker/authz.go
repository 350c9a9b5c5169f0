package broker

import (
	"net"
	"sync/atomic"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
)

// Authorization (docs/security.md, "Authorization"): with the cluster's spec.authorization
// set (the view's Authorization), every API checks the request's principal (User:ANONYMOUS
// on a listener without authentication) and the client's address against the KafkaUsers'
// ACLs, per Apache's table; each api_NN_*.go file says which check its key makes, next to
// its handler. Without it everyone may do everything, as Apache without an authorizer.
//
// Super users: spec.authorization.superUsers, the brokers' own principal and the operator's.

// Apache's messages of the authorization errors (Errors.java).
const (
	msgTopicAuthorizationFailed   = "Topic authorization failed."
	msgGroupAuthorizationFailed   = "Group authorization failed."
	msgClusterAuthorizationFailed = "Cluster authorization failed."
	msgTxnAuthorizationFailed     = "Transactional Id authorization failed."
)

// operatorPrincipal is the operator's own client certificate's principal.
var operatorPrincipal = "User:CN=" + v1alpha1.OperatorPrincipalCommonName + ",O=" + v1alpha1.PrincipalOrganization

// authzCache is the Authorizer built for one pair of snapshots: handlers run on every
// request, so it is built once per change of the view or of the security state.
type authzCache struct {
	view *cluster.Snapshot
	sec  *cluster.SecuritySnapshot
	z    *acl.Authorizer
}

// authorizer is the Authorizer of view and the current security snapshot, from the cache
// when neither changed since it was built.
func (h *Handler) authorizer(view *cluster.Snapshot) *acl.Authorizer {
	sec := h.security()
	if c := h.authz.Load(); c != nil && c.view == view && c.sec == sec {
		return c.z
	}
	z := &acl.Authorizer{
		SuperUsers: append([]string{h.brokerPrincipal(), operatorPrincipal}, view.SuperUsers...),
		Rules:      make(map[string][]v1alpha1.ACLRule, len(sec.Users)),
	}
	for principal, u := range sec.Users {
		z.Rules[principal] = u.ACLs
	}
	if len(view.EveryoneACLs) > 0 {
		z.Rules[acl.WildcardPrincipal] = view.EveryoneACLs // no KafkaUser's principal is User:*
	}
	h.authz.Store(&authzCache{view: view, sec: sec, z: z})
	return z
}

// authzState holds the Handler's cached Authorizer; the zero value has none.
type authzState = atomic.Pointer[authzCache]

// enforcing reports whether the request is checked at all (spec.authorization is set).
func (rc *requestContext) enforcing() bool { return rc.view.Authorization }

// allowed decides whether the request's principal may perform op on the resource of typ
// called name (ignored for the cluster); true when authorization is off.
func (rc *requestContext) allowed(typ v1alpha1.ACLResourceType, name string, op v1alpha1.ACLOperation) bool {
	if !rc.enforcing() {
		return true
	}
	if typ == v1alpha1.ACLCluster {
		name = acl.ClusterName
	}
	return rc.z().Allowed(acl.Action{Principal: rc.principal(), Host: rc.host(), Type: typ, Name: name, Operation: op})
}

func (rc *requestContext) allowedTopic(op v1alpha1.ACLOperation, name string) bool {
	return rc.allowed(v1alpha1.ACLTopic, name, op)
}

func (rc *requestContext) allowedGroup(op v1alpha1.ACLOperation, name string) bool {
	return rc.allowed(v1alpha1.ACLGroup, name, op)
}

// splitGroups is groups split into those the principal may op and the others, each in
// request order: the group APIs that answer per group pass the first to the coordinator and
// answer the others GROUP_AUTHORIZATION_FAILED.
func (rc *requestContext) splitGroups(op v1alpha1.ACLOperation, groups []string) (allowed, denied []string) {
	for _, g := range groups {
		if rc.allowedGroup(op, g) {
			allowed = append(allowed, g)
		} else {
			denied = append(denied, g)
		}
	}
	return allowed, denied
}

func (rc *requestContext) allowedCluster(op v1alpha1.ACLOperation) bool {
	return rc.allowed(v1alpha1.ACLCluster, "", op)
}

// allowedOnAnyTopic is Apache's authorizeByResourceType for topics: op is allowed on at least
// one topic name.
func (rc *requestContext) allowedOnAnyTopic(op v1alpha1.ACLOperation) bool {
	if !rc.enforcing() {
		return true
	}
	return rc.z().AllowedOnAny(rc.principal(), rc.host(), v1alpha1.ACLTopic, op)
}

// authorizedOps is the authorized-operations bitfield of a resource, as Metadata,
// DescribeCluster, DescribeGroups and the describes of KIP-430 answer it: without
// authorization every operation Kafka defines for the type.
func (rc *requestContext) authorizedOps(typ v1alpha1.ACLResourceType, name string) int32 {
	if !rc.enforcing() {
		var bits int32
		for _, op := range acl.Operations(typ) {
			bits |= 1 << acl.OperationCode(op)
		}
		return bits
	}
	if typ == v1alpha1.ACLCluster {
		name = acl.ClusterName
	}
	return rc.z().AuthorizedOperations(rc.principal(), rc.host(), typ, name)
}

func (rc *requestContext) z() *acl.Authorizer { return rc.h.authorizer(rc.view) }

// principal is who the request comes from: the session's principal (User:ANONYMOUS on a
// listener without authentication).
func (rc *requestContext) principal() string {
	if rc.session == nil || rc.session.principal == "" {
		return anonymous
	}
	return rc.session.principal
}

// host is the client's IP address, as ACL hosts name it.
func (rc *requestContext) host() string {
	switch a := rc.remote.(type) {
	case *net.TCPAddr:
		return a.IP.String()
	case nil:
		return ""
	}
	if h, _, err := net.SplitHostPort(rc.remote.String()); err == nil {
		return h
	}
	return rc.remote.String()
}

// splitAuthorized splits items into those whose topic the principal may perform op on and
// the others, each in request order.
func splitAuthorized[T any](rc *requestContext, items []T, topic func(T) string, op v1alpha1.ACLOperation) (allowed, denied []T) {
	if !rc.enforcing() {
		return items, nil
	}
	for _, it := range items {
		if rc.allowedTopic(op, topic(it)) {
			allowed = append(allowed, it)
		} else {
			denied = append(denied, it)
		}
	}
	return allowed, denied
}
