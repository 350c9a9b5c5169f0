package broker

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeClientQuotas (key 48): versions 0-1, Apache 3.7's (docs/security.md, "Quotas").
//
// Behaviour:
//   - The quotas are the KafkaUsers' (quota.go): one entity per user with quotas, of entity
//     type "user" named as Apache names a user entity (the principal without "User:":
//     "alice", "CN=alice" for a tls user), with the keys producer_byte_rate,
//     consumer_byte_rate and request_percentage it sets. There are no default, client-id or
//     ip quotas, so a filter on those matches nothing.
//   - The filter as Apache's: each component names an entity type and matches an exact name
//     (0), the type's default (1) or any name of the type (2); Strict leaves out entities with
//     other types. A component of another type than user, client-id or ip →
//     UNSUPPORTED_VERSION; a type named twice, a name with a non-exact match, an exact match
//     without a name, or ip with user or client-id → INVALID_REQUEST.
//   - Entries by user name.
//   - Authorization (Apache's handleDescribeClientQuotasRequest): DESCRIBE_CONFIGS on the
//     cluster, else the top-level CLUSTER_AUTHORIZATION_FAILED.
func init() { register(48, 0, 1, handleDescribeClientQuotas) }

// The entity types and quota keys of the client-quota APIs.
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

func handleDescribeClientQuotas(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !rc.allowedCluster(acl.OpDescribeConfigs) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	if code, msg := checkQuotaFilter(req.Components); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, &msg
		return resp, nil
	}
	users := rc.h.security().Users
	principals := make([]string, 0, len(users))
	for p := range users {
		principals = append(principals, p)
	}
	slices.Sort(principals)
	for _, p := range principals {
		u := users[p]
		values := quotaValues(u.Quotas)
		name := strings.TrimPrefix(p, "User:")
		if len(values) == 0 || !userEntityMatches(req.Components, req.Strict, name) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
		ent.Type, ent.Name = quotaEntityUser, &name
		e.Entity = append(e.Entity, ent)
		e.Values = values
		resp.Entries = append(resp.Entries, e)
	}
	return resp, nil
}

// checkQuotaFilter is Apache's validation of a filter: an error code and message, or 0.
func checkQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) (int16, string) {
	seen := map[string]bool{}
	for _, c := range components {
		switch c.EntityType {
		case quotaEntityUser, quotaEntityClientID, quotaEntityIP:
		default:
			return kerr.UnsupportedVersion.Code, "Custom entity type " + c.EntityType + " not supported"
		}
		if seen[c.EntityType] {
			return kerr.InvalidRequest.Code, "Entity type " + c.EntityType + " cannot appear more than once in the filter."
		}
		seen[c.EntityType] = true
		switch {
		case c.MatchType == kmsg.QuotasMatchTypeExact && c.Match == nil:
			return kerr.InvalidRequest.Code, "An exact match needs a name for entity type " + c.EntityType
		case c.MatchType != kmsg.QuotasMatchTypeExact && c.Match != nil:
			return kerr.InvalidRequest.Code, "A name is given for entity type " + c.EntityType + " without an exact match"
		case c.MatchType > kmsg.QuotasMatchTypeAny:
			return kerr.InvalidRequest.Code, "Unknown match type for entity type " + c.EntityType
		}
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return kerr.InvalidRequest.Code, "Invalid entity filter component combination: ip cannot be combined with user or client-id"
	}
	return 0, ""
}

// userEntityMatches reports whether the entity {user: name} matches the filter.
func userEntityMatches(components []kmsg.DescribeClientQuotasRequestComponent, strict bool, name string) bool {
	hasUser := false
	for _, c := range components {
		if c.EntityType != quotaEntityUser {
			return false // the entity has no client-id or ip part
		}
		hasUser = true
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if *c.Match != name {
				return false
			}
		case kmsg.QuotasMatchTypeDefault:
			return false // a named user, not the default one
		}
	}
	return hasUser || !strict
}
