package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// CreateAcls (key 30): versions 0-3, Apache 3.7's (docs/security.md, "Authorization").
//
// Behaviour:
//   - An ACL is a rule of the KafkaUser its principal names: User:<name> is KafkaUser
//     <name>'s, User:CN=<name> a tls KafkaUser <name>'s. Each ACL's operation is added to
//     the user's spec.authorization.acls (to the rule of the same permission, resource,
//     pattern and host, or as a new rule; an ACL the user has already is success and no
//     write), through cluster.Admin.UpdateUser: read, change, update with the
//     resourceVersion read, retried on a conflict. A User:<name> with no KafkaUser gets one
//     (no authentication: ACLs only, spec.cluster this cluster, the cluster's labels).
//   - One write per user; each ACL's result is its user's write's: success means the
//     KafkaUser holds it. The brokers apply it once their informers see the change (within
//     about a second), as Apache's brokers apply what the controller committed.
//   - Errors per ACL (INVALID_REQUEST): Apache's for an UNKNOWN or ANY resource type,
//     pattern (also MATCH), operation or permission, an empty name, a cluster resource not
//     named kafka-cluster; paddock's for what no KafkaUser rule holds (the
//     DELEGATION_TOKEN and USER resource types, the token operations) and for a principal
//     that names no KafkaUser (User:*, another principal type, a DN other than CN=<name>, a
//     name that is no object name, a User:CN=<name> without a tls KafkaUser <name>, a
//     KafkaUser of another cluster or being deleted): each says to declare the ACL on a
//     KafkaUser. A refused API write answers with the code of its API error
//     (userWriteError).
//   - Authorization (Apache's AclApis.handleCreateAcls): ALTER on the cluster, else every
//     result CLUSTER_AUTHORIZATION_FAILED. Without spec.authorization → SECURITY_DISABLED
//     (no authorizer), as Apache. Nothing refused is written.
//
// Version notes:
//   - v0: no pattern type: LITERAL. v1: pattern types. v2: flexible. v3: the USER resource
//     type (refused, above).
func init() { register(30, 0, 3, handleCreateACLs) }

func handleCreateACLs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	failAll := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = e.Code, strptr(msg)
		}
		return resp, nil
	}
	switch {
	case !rc.allowedCluster(acl.OpAlter):
		return failAll(kerr.ClusterAuthorizationFailed, msgClusterAuthorizationFailed)
	case !rc.enforcing():
		return failAll(kerr.SecurityDisabled, "No Authorizer is configured on the broker")
	case rc.h.Admin == nil:
		return failAll(kerr.UnknownServerError, errNoUserAdmin)
	}
	// The ACLs of each user, in request order, and which entries they came from.
	type pending struct {
		entries []int
		rules   []v1alpha1.ACLRule
	}
	var order []userKey
	byUser := map[userKey]*pending{}
	for i, c := range req.Creations {
		b := acl.Binding{ResourceType: int8(c.ResourceType), ResourceName: c.ResourceName, PatternType: int8(c.ResourcePatternType),
			Principal: c.Principal, Host: c.Host, Operation: int8(c.Operation), Permission: int8(c.PermissionType)}
		if req.Version == 0 {
			b.PatternType = acl.PatternLiteral
		}
		rule, why := acl.RuleOf(b)
		if why == "" {
			var key userKey
			key.name, key.tls, why = acl.UserOf(c.Principal)
			if why == "" {
				p := byUser[key]
				if p == nil {
					p = &pending{}
					byUser[key] = p
					order = append(order, key)
				}
				p.entries, p.rules = append(p.entries, i), append(p.rules, rule)
				continue
			}
		}
		resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strptr(why)
	}
	write, cancel := context.WithTimeout(rc.ctx, maxAdminWait)
	defer cancel()
	for _, key := range order {
		p := byUser[key]
		err := rc.h.Admin.UpdateUser(write, key.name, !key.tls, func(u *v1alpha1.KafkaUser) (bool, error) {
			if err := checkPrincipal(u, key); err != nil {
				return false, err
			}
			if u.Spec.Authorization == nil {
				u.Spec.Authorization = &v1alpha1.UserAuthorization{Type: v1alpha1.AuthorizationSimple}
			}
			changed := false
			for _, r := range p.rules {
				var added bool
				u.Spec.Authorization.ACLs, added = acl.Add(u.Spec.Authorization.ACLs, r)
				changed = changed || added
			}
			return changed, nil
		})
		if err != nil {
			code, msg := userWriteError(err)
			for _, i := range p.entries {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, strptr(msg)
			}
		}
	}
	return resp, nil
}
