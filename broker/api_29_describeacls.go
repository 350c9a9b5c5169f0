package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeAcls (key 29): versions 0-3, Apache 3.7's (docs/security.md, "Authorization").
//
// Behaviour:
//   - The ACLs are the KafkaUsers' spec.authorization.acls as the broker sees them (the
//     security snapshot): one binding per operation of each rule, the rule's principal
//     (User:<name> or User:CN=<name>), host ("*" when unset), pattern LITERAL or PREFIXED,
//     the cluster named kafka-cluster; and the KafkaCluster's spec.authorization.acls under
//     the wildcard principal User:*. They are grouped by resource, sorted.
//   - The filter selects as Apache's AclBindingFilter: a null name, principal or host
//     matches any; type, operation and permission ANY match any; pattern ANY every pattern
//     of exactly the name, MATCH every binding that applies to the name (literal equal or
//     "*", a prefix of it).
//   - A filter with an UNKNOWN (or undefined) type, pattern, operation or permission →
//     INVALID_REQUEST.
//   - Authorization (Apache's AclApis.handleDescribeAcls): DESCRIBE on the cluster, else
//     CLUSTER_AUTHORIZATION_FAILED. Without spec.authorization → SECURITY_DISABLED (no
//     authorizer), as Apache.
//
// Version notes:
//   - v0: no pattern type: LITERAL. v1: pattern types. v2: flexible. v3: the USER resource
//     type (no KafkaUser rule has one, so it matches nothing).
func init() { register(29, 0, 3, handleDescribeACLs) }

func handleDescribeACLs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	f := acl.Filter{ResourceType: int8(req.ResourceType), ResourceName: req.ResourceName, PatternType: int8(req.ResourcePatternType),
		Principal: req.Principal, Host: req.Host, Operation: int8(req.Operation), Permission: int8(req.PermissionType)}
	if req.Version == 0 {
		f.PatternType = acl.PatternLiteral
	}
	fail := func(e *kerr.Error, msg string) (kmsg.Response, error) {
		resp.ErrorCode, resp.ErrorMessage = e.Code, &msg
		return resp, nil
	}
	switch {
	case !f.Valid():
		return fail(kerr.InvalidRequest, "The filter contain UNKNOWN elements")
	case !rc.allowedCluster(acl.OpDescribe):
		return fail(kerr.ClusterAuthorizationFailed, msgClusterAuthorizationFailed)
	case !rc.enforcing():
		return fail(kerr.SecurityDisabled, "No Authorizer is configured on the broker")
	}
	var last *kmsg.DescribeACLsResponseResource
	for _, b := range acl.Bindings(rc.z().Rules) {
		if !f.Matches(b) {
			continue
		}
		if last == nil || int8(last.ResourceType) != b.ResourceType || last.ResourceName != b.ResourceName || int8(last.ResourcePatternType) != b.PatternType {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			resp.Resources = append(resp.Resources, r)
			last = &resp.Resources[len(resp.Resources)-1]
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		last.ACLs = append(last.ACLs, a)
	}
	return resp, nil
}
