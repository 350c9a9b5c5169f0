package broker

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// DeleteAcls (key 31): versions 0-3, Apache 3.7's (docs/security.md, "Authorization").
//
// Behaviour:
//   - Each filter selects as DescribeAcls' (acl.Filter): a null name, principal or host
//     matches any; ANY type, operation, permission any; pattern ANY every pattern of the
//     name, MATCH every ACL applying to it. The ACLs are the KafkaUsers' of this cluster as
//     the API server has them now (cluster.Admin.Users), one per operation of each rule.
//   - Every selected operation is taken out of its KafkaUser's rules (a rule left without
//     operations goes), one write per user through cluster.Admin.UpdateUser: read, change,
//     update with the resourceVersion read, retried on a conflict; the selection is made
//     again on the object each write reads, so an ACL added meanwhile by a user's edit is
//     deleted only if it is selected. A KafkaUser is never deleted (it keeps its
//     authentication and quotas; one the brokers created keeps no ACLs).
//   - The answer has one result per filter, in order, listing the ACLs deleted that it
//     selected; an ACL two filters select is listed under each (deleted once), as Apache's
//     AclControlManager.deleteAcls. The ACLs of a user whose write failed are listed with
//     the write's error (userWriteError) on each matching ACL, and stay.
//   - The ACLs of User:* are the KafkaCluster's spec.authorization.acls, which no broker
//     writes: each one a filter selects is listed with INVALID_REQUEST (msgEveryoneACLs)
//     and stays.
//   - A filter with an UNKNOWN (or undefined) element → INVALID_REQUEST for that filter, in
//     Apache's words ("Unknown patternFilter." for the resource type or pattern, "Unknown
//     entryFilter." for the operation or permission).
//   - Authorization (Apache's AclApis.handleDeleteAcls): ALTER on the cluster, else every
//     filter CLUSTER_AUTHORIZATION_FAILED and nothing deleted. Without spec.authorization →
//     SECURITY_DISABLED (no authorizer), as Apache.
//
// Version notes:
//   - v0: no pattern type: LITERAL. v1: pattern types. v2: flexible. v3: the USER resource
//     type (no KafkaUser rule has one, so it selects nothing).
func init() { register(31, 0, 3, handleDeleteACLs) }

func handleDeleteACLs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	failAll := func(code int16, msg string) (kmsg.Response, error) {
		for i := range resp.Results {
			if resp.Results[i].ErrorCode == 0 {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, strptr(msg)
			}
		}
		return resp, nil
	}
	switch {
	case !rc.allowedCluster(acl.OpAlter):
		return failAll(kerr.ClusterAuthorizationFailed.Code, msgClusterAuthorizationFailed)
	case !rc.enforcing():
		return failAll(kerr.SecurityDisabled.Code, "No Authorizer is configured on the broker")
	case rc.h.Admin == nil:
		return failAll(kerr.UnknownServerError.Code, errNoUserAdmin)
	}
	filters := make([]*acl.Filter, len(req.Filters))
	for i, f := range req.Filters {
		af := acl.Filter{ResourceType: int8(f.ResourceType), ResourceName: f.ResourceName, PatternType: int8(f.ResourcePatternType),
			Principal: f.Principal, Host: f.Host, Operation: int8(f.Operation), Permission: int8(f.PermissionType)}
		if req.Version == 0 {
			af.PatternType = acl.PatternLiteral
		}
		if !af.Valid() {
			msg := "Unknown entryFilter."
			patternOnly := af
			patternOnly.Operation, patternOnly.Permission = 1, 1 // ANY: valid
			if !patternOnly.Valid() {
				msg = "Unknown patternFilter."
			}
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.InvalidRequest.Code, strptr(msg)
			continue
		}
		filters[i] = &af
	}
	// selected reports whether some filter selects b.
	selected := func(b acl.Binding) bool {
		for _, f := range filters {
			if f != nil && f.Matches(b) {
				return true
			}
		}
		return false
	}
	write, cancel := context.WithTimeout(rc.ctx, maxAdminWait)
	defer cancel()
	users, err := rc.h.Admin.Users(write)
	if err != nil {
		code, msg := userWriteError(err)
		return failAll(code, "list the cluster's KafkaUsers: "+msg)
	}
	for i := range users {
		listed := &users[i]
		if _, removed := acl.Remove(listed.Principal(), rulesOf(listed), selected); len(removed) == 0 {
			continue
		}
		var removed []acl.Binding
		err := rc.h.Admin.UpdateUser(write, listed.Name, false, func(u *v1alpha1.KafkaUser) (bool, error) {
			removed = nil
			if u == nil || u.UID != listed.UID {
				return false, nil // deleted (or replaced) meanwhile: its ACLs are gone
			}
			var kept []v1alpha1.ACLRule
			kept, removed = acl.Remove(u.Principal(), rulesOf(u), selected)
			if len(removed) == 0 {
				return false, nil
			}
			u.Spec.Authorization.ACLs = kept
			return true, nil
		})
		var code int16
		var msg *string
		if err != nil {
			// Nothing of this user's was deleted: list what was asked, with the error.
			c, m := userWriteError(err)
			code, msg = c, strptr(m)
			_, removed = acl.Remove(listed.Principal(), rulesOf(listed), selected)
		}
		listMatching(resp, filters, removed, code, msg)
	}
	// The wildcard principal's ACLs are the KafkaCluster's (spec.authorization.acls), which a
	// broker does not write: each one a filter selects is listed with INVALID_REQUEST, and stays.
	everyone := acl.Bindings(map[string][]v1alpha1.ACLRule{acl.WildcardPrincipal: rc.view.EveryoneACLs})
	listMatching(resp, filters, everyone, kerr.InvalidRequest.Code, strptr(msgEveryoneACLs))
	return resp, nil
}

// msgEveryoneACLs says why a User:* ACL is not deleted.
const msgEveryoneACLs = "the ACLs of User:* are the KafkaCluster's spec.authorization.acls: remove it there"

// listMatching lists each of bindings under every filter that selects it, with code and msg.
func listMatching(resp *kmsg.DeleteACLsResponse, filters []*acl.Filter, bindings []acl.Binding, code int16, msg *string) {
	for _, b := range bindings {
		for i, f := range filters {
			if f == nil || !f.Matches(b) {
				continue
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ErrorCode, m.ErrorMessage = code, msg
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host, m.Operation, m.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			resp.Results[i].MatchingACLs = append(resp.Results[i].MatchingACLs, m)
		}
	}
}

// rulesOf is u's ACL rules (nil without spec.authorization).
func rulesOf(u *v1alpha1.KafkaUser) []v1alpha1.ACLRule {
	if u.Spec.Authorization == nil {
		return nil
	}
	return u.Spec.Authorization.ACLs
}
