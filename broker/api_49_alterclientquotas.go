package broker

import (
	"context"
	"math"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// AlterClientQuotas (key 49): versions 0-1, Apache 3.7's (docs/security.md, "Quotas").
//
// Behaviour:
//   - A quota is a KafkaUser's spec.quotas: the entity {user: <name>} is KafkaUser <name>'s
//     (a scram user's, or one of ACLs only), {user: CN=<name>} a tls KafkaUser <name>'s — the
//     names DescribeClientQuotas answers. producer_byte_rate sets producerByteRate,
//     consumer_byte_rate consumerByteRate, request_percentage requestPercentage; Remove unsets
//     one (a removal of an unset quota is success). A user entity without a KafkaUser gets one
//     (no authentication, spec.cluster this cluster, the cluster's labels), as CreateAcls
//     makes; removals alone never make one.
//   - Writes go through cluster.Admin.UpdateUser (read, change, update with the
//     resourceVersion read, retried on a conflict), one per entry; the entry's result is its
//     write's. ValidateOnly runs every check that needs no read of the user (not the
//     principal's match with an existing KafkaUser) and writes nothing.
//   - Errors per entry, INVALID_REQUEST: Apache's (ClientQuotaControlManager) for an empty
//     entity, an entity type named twice, an unknown entity type ("Unhandled client quota
//     entity type"), an empty name ("Empty user not supported"), an unknown key
//     ("Invalid configuration key"), a byte rate that is not a whole number ("must be a Long
//     value"); paddock's for what a KafkaUser cannot hold, each saying so: client-id and ip
//     entities (alone or with a user), the default user (no name), controller_mutation_rate,
//     a value below 1 or above the KafkaUser's bounds, a fractional request_percentage, a key
//     set twice in one entry, an entity altered twice in one request (every occurrence), a
//     name that names no KafkaUser (the principal mapping of CreateAcls). A refused write
//     answers with the code of its API error (userWriteError).
//   - Authorization (Apache's handleAlterClientQuotasRequest): ALTER_CONFIGS on the cluster,
//     else every entry CLUSTER_AUTHORIZATION_FAILED and nothing written.
func init() { register(49, 0, 1, handleAlterClientQuotas) }

func handleAlterClientQuotas(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	allowed := rc.allowedCluster(acl.OpAlterConfigs)
	counts := countBy(req.Entries, quotaEntityKey)
	write, cancel := context.WithTimeout(rc.ctx, maxAdminWait)
	defer cancel()
	for _, e := range req.Entries {
		r := kmsg.NewAlterClientQuotasResponseEntry()
		for _, ent := range e.Entity {
			re := kmsg.NewAlterClientQuotasResponseEntryEntity()
			re.Type, re.Name = ent.Type, ent.Name
			r.Entity = append(r.Entity, re)
		}
		var code int16
		var msg string
		switch {
		case !allowed:
			code, msg = kerr.ClusterAuthorizationFailed.Code, msgClusterAuthorizationFailed
		case counts[quotaEntityKey(e)] > 1:
			code, msg = kerr.InvalidRequest.Code, "the entity "+quotaEntityKey(e)+" is altered more than once in the request"
		case rc.h.Admin == nil:
			code, msg = kerr.UnknownServerError.Code, errNoUserAdmin
		default:
			code, msg = rc.alterUserQuotas(write, e, req.ValidateOnly)
		}
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, strptr(msg)
		}
		resp.Entries = append(resp.Entries, r)
	}
	return resp, nil
}

// quotaEntityKey names an entity for the duplicate check: its components, in order.
func quotaEntityKey(e kmsg.AlterClientQuotasRequestEntry) string {
	var b strings.Builder
	for _, ent := range e.Entity {
		b.WriteString(ent.Type)
		if ent.Name == nil {
			b.WriteString("=<default>;")
		} else {
			b.WriteString("=" + *ent.Name + ";")
		}
	}
	return b.String()
}

// alterUserQuotas checks entry e and, unless validateOnly, applies its ops to the KafkaUser
// it names; the entry's code and message.
func (rc *requestContext) alterUserQuotas(write context.Context, e kmsg.AlterClientQuotasRequestEntry, validateOnly bool) (int16, string) {
	name, why := quotaUser(e.Entity)
	if why != "" {
		return kerr.InvalidRequest.Code, why
	}
	var key userKey
	if key.name, key.tls, why = acl.UserOf("User:" + name); why != "" {
		return kerr.InvalidRequest.Code, why
	}
	change, sets, why := quotaChange(e.Ops)
	if why != "" {
		return kerr.InvalidRequest.Code, why
	}
	if validateOnly {
		return 0, ""
	}
	err := rc.h.Admin.UpdateUser(write, key.name, sets && !key.tls, func(u *v1alpha1.KafkaUser) (bool, error) {
		if err := checkPrincipal(u, key); err != nil {
			if u == nil && !sets {
				return false, nil // nothing to remove from a user that does not exist
			}
			return false, err
		}
		if u == nil {
			return false, nil // removals only, and no user: nothing set
		}
		before := u.Spec.Quotas.DeepCopy()
		q := u.Spec.Quotas.DeepCopy()
		if q == nil {
			q = &v1alpha1.UserQuotas{}
		}
		change(q)
		if q.ProducerByteRate == nil && q.ConsumerByteRate == nil && q.RequestPercentage == nil {
			q = nil
		}
		u.Spec.Quotas = q
		return !quotasEqual(before, q), nil
	})
	if err != nil {
		code, msg := userWriteError(err)
		return code, msg
	}
	return 0, ""
}

// quotaUser is the user name of an entity, or why the entity is none paddock keeps: Apache's
// refusals of an empty entity, a type named twice and an unknown type, and paddock's of
// client-id, ip and default-user quotas, which KafkaUsers do not have.
func quotaUser(entity []kmsg.AlterClientQuotasRequestEntryEntity) (string, string) {
	if len(entity) == 0 {
		return "", "Invalid empty client quota entity"
	}
	seen := map[string]bool{}
	var user *string
	hasUser := false
	for _, ent := range entity {
		if seen[ent.Type] {
			return "", "Invalid client quota entity, duplicate entity entry " + ent.Type
		}
		seen[ent.Type] = true
		switch ent.Type {
		case quotaEntityUser, quotaEntityClientID, quotaEntityIP:
		default:
			return "", "Unhandled client quota entity type: " + ent.Type
		}
		if ent.Name != nil && *ent.Name == "" {
			return "", "Empty " + ent.Type + " not supported"
		}
	}
	for _, ent := range entity {
		if ent.Type == quotaEntityUser {
			user, hasUser = ent.Name, true
			continue
		}
		return "", "paddock keeps quotas on KafkaUsers only (spec.quotas): " + ent.Type + " quotas are not supported; alter a user entity alone"
	}
	switch {
	case !hasUser:
		return "", "Invalid empty client quota entity"
	case user == nil:
		return "", "paddock keeps quotas on KafkaUsers only (spec.quotas): the default user quota is not supported; name the user"
	}
	return *user, ""
}

// quotaChange is what ops do to a KafkaUser's quotas, whether they set any, or why they are
// refused (before any write).
func quotaChange(ops []kmsg.AlterClientQuotasRequestEntryOp) (change func(*v1alpha1.UserQuotas), sets bool, why string) {
	var steps []func(*v1alpha1.UserQuotas)
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return nil, false, "the quota " + op.Key + " is altered more than once in the entry"
		}
		seen[op.Key] = true
		v := op.Value
		switch op.Key {
		case "producer_byte_rate", "consumer_byte_rate":
			// Apache's whole-number test (ClientQuotaControlManager.validateQuotaKeyValue): within
			// 1e-6 of the integer below v + 1e-6.
			whole := math.Floor(v + 1e-6)
			if !op.Remove && (math.Abs(whole-v) > 1e-6 || math.IsInf(v, 0) || math.IsNaN(v)) {
				return nil, false, "Configuration " + op.Key + " must be a Long value"
			}
			if !op.Remove && (whole < 1 || whole > math.MaxInt64/2) {
				return nil, false, "paddock's " + op.Key + " is from 1 to 2^62 (a KafkaUser's bounds); remove the quota instead of setting 0"
			}
			rate := int64(whole)
			produce := op.Key == "producer_byte_rate"
			steps = append(steps, func(q *v1alpha1.UserQuotas) {
				p := &q.ConsumerByteRate
				if produce {
					p = &q.ProducerByteRate
				}
				if op.Remove {
					*p = nil
				} else {
					*p = &rate
				}
			})
		case "request_percentage":
			if !op.Remove && (v != math.Trunc(v) || v < 1 || v > 100000) {
				return nil, false, "paddock's request_percentage is a whole number from 1 to 100000 (a KafkaUser's requestPercentage)"
			}
			pct := int32(v)
			steps = append(steps, func(q *v1alpha1.UserQuotas) {
				if op.Remove {
					q.RequestPercentage = nil
				} else {
					q.RequestPercentage = &pct
				}
			})
		case "controller_mutation_rate":
			return nil, false, "paddock keeps no controller_mutation_rate quota (a KafkaUser has none)"
		default:
			return nil, false, "Invalid configuration key " + op.Key
		}
		sets = sets || !op.Remove
	}
	return func(q *v1alpha1.UserQuotas) {
		for _, s := range steps {
			s(q)
		}
	}, sets, ""
}

func quotasEqual(a, b *v1alpha1.UserQuotas) bool {
	eq64 := func(x, y *int64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	eq32 := func(x, y *int32) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	}
	return eq64(a.ProducerByteRate, b.ProducerByteRate) && eq64(a.ConsumerByteRate, b.ConsumerByteRate) && eq32(a.RequestPercentage, b.RequestPercentage)
}
