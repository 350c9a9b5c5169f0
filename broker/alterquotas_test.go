package broker

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// quotaEntry is one AlterClientQuotas entry: entity as type, name pairs (a nil name the
// default), and ops.
func quotaEntry(entity [][2]*string, ops ...kmsg.AlterClientQuotasRequestEntryOp) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for _, c := range entity {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = *c[0], c[1]
		e.Entity = append(e.Entity, ent)
	}
	e.Ops = ops
	return e
}

func quotaOp(key string, value float64, remove bool) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value, op.Remove = key, value, remove
	return op
}

func userEntity(name string) [][2]*string { return [][2]*string{{strptr("user"), strptr(name)}} }

// TestAlterClientQuotasSetsKafkaUserQuotasAndRefusesWhatAUserCannotHold: user entities set
// and unset spec.quotas (a user without a KafkaUser gets one; validate_only writes nothing);
// Apache's INVALID_REQUEST for an empty entity, an unknown type or key and a fractional byte
// rate; paddock's, saying so, for client-id, ip and default-user quotas and
// controller_mutation_rate.
func TestAlterClientQuotasSetsKafkaUserQuotasAndRefusesWhatAUserCannotHold(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLCluster, "", acl.OpAlterConfigs))
	ab.ensureUser(t, "bob")
	send := func(validateOnly bool, entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasResponse {
		req := latest(kmsg.NewPtrAlterClientQuotasRequest())
		req.Entries, req.ValidateOnly = entries, validateOnly
		return ab.request(t, req).(*kmsg.AlterClientQuotasResponse)
	}

	resp := send(true, quotaEntry(userEntity("alice"), quotaOp("producer_byte_rate", 1024, false)))
	if resp.Entries[0].ErrorCode != 0 || ab.kafkaUser(t, "alice") != nil {
		t.Fatalf("validate_only: code %d, alice %+v; want success and no KafkaUser", resp.Entries[0].ErrorCode, ab.kafkaUser(t, "alice"))
	}
	resp = send(false,
		quotaEntry(userEntity("alice"), quotaOp("producer_byte_rate", 1024, false), quotaOp("request_percentage", 50, false)),
		quotaEntry(userEntity("bob"), quotaOp("consumer_byte_rate", 2048, false)))
	for i, e := range resp.Entries {
		if e.ErrorCode != 0 {
			t.Fatalf("entry %d: code %d %v", i, e.ErrorCode, e.ErrorMessage)
		}
	}
	alice := ab.kafkaUser(t, "alice")
	if q := alice.Spec.Quotas; alice.Spec.Authentication != nil || q == nil || q.ProducerByteRate == nil || *q.ProducerByteRate != 1024 ||
		q.RequestPercentage == nil || *q.RequestPercentage != 50 || q.ConsumerByteRate != nil {
		t.Fatalf("KafkaUser alice: %+v", alice.Spec)
	}
	if q := ab.kafkaUser(t, "bob").Spec.Quotas; q == nil || q.ConsumerByteRate == nil || *q.ConsumerByteRate != 2048 {
		t.Fatalf("KafkaUser bob's quotas: %+v", q)
	}
	resp = send(false, quotaEntry(userEntity("alice"), quotaOp("producer_byte_rate", 0, true), quotaOp("request_percentage", 0, true)),
		quotaEntry(userEntity("nobody"), quotaOp("producer_byte_rate", 0, true)))
	if resp.Entries[0].ErrorCode != 0 || resp.Entries[1].ErrorCode != 0 || ab.kafkaUser(t, "alice").Spec.Quotas != nil || ab.kafkaUser(t, "nobody") != nil {
		t.Fatalf("removals: %+v; alice's quotas %+v", resp.Entries, ab.kafkaUser(t, "alice").Spec.Quotas)
	}

	bad := kerr.InvalidRequest.Code
	for _, c := range []struct {
		rule  string
		entry kmsg.AlterClientQuotasRequestEntry
		says  string
	}{
		{"an empty entity", quotaEntry(nil, quotaOp("producer_byte_rate", 1, false)), "Invalid empty client quota entity"},
		{"an entity type twice", quotaEntry([][2]*string{{strptr("user"), strptr("bob")}, {strptr("user"), strptr("al")}}, quotaOp("producer_byte_rate", 1, false)), "duplicate entity entry user"},
		{"an empty user name", quotaEntry(userEntity(""), quotaOp("producer_byte_rate", 1, false)), "Empty user not supported"},
		{"an unknown entity type", quotaEntry([][2]*string{{strptr("group"), strptr("g")}}, quotaOp("producer_byte_rate", 1, false)), "Unhandled client quota entity type: group"},
		{"a client-id entity", quotaEntry([][2]*string{{strptr("client-id"), strptr("app")}}, quotaOp("producer_byte_rate", 1, false)), "client-id quotas are not supported"},
		{"a user with a client-id", quotaEntry([][2]*string{{strptr("user"), strptr("bob")}, {strptr("client-id"), strptr("app")}}, quotaOp("producer_byte_rate", 1, false)), "client-id quotas are not supported"},
		{"an ip entity", quotaEntry([][2]*string{{strptr("ip"), strptr("10.0.0.1")}}, quotaOp("connection_creation_rate", 1, false)), "ip quotas are not supported"},
		{"the default user", quotaEntry([][2]*string{{strptr("user"), nil}}, quotaOp("producer_byte_rate", 1, false)), "default user quota is not supported"},
		{"an unknown key", quotaEntry(userEntity("bob"), quotaOp("fetch_rate", 1, false)), "Invalid configuration key fetch_rate"},
		{"a fractional byte rate", quotaEntry(userEntity("bob"), quotaOp("producer_byte_rate", 1.5, false)), "must be a Long value"},
		{"controller_mutation_rate", quotaEntry(userEntity("bob"), quotaOp("controller_mutation_rate", 10, false)), "controller_mutation_rate"},
		{"a name of no KafkaUser", quotaEntry(userEntity("Bob"), quotaOp("producer_byte_rate", 1, false)), "declare the ACL on a KafkaUser"},
	} {
		resp := send(false, c.entry)
		e := resp.Entries[0]
		if e.ErrorCode != bad || e.ErrorMessage == nil || !strings.Contains(*e.ErrorMessage, c.says) {
			t.Errorf("%s: code %d %v, want INVALID_REQUEST %q", c.rule, e.ErrorCode, e.ErrorMessage, c.says)
		}
	}
	if q := ab.kafkaUser(t, "bob").Spec.Quotas; q == nil || *q.ConsumerByteRate != 2048 || q.ProducerByteRate != nil {
		t.Fatalf("a refused entry changed bob's quotas: %+v", q)
	}
	twice := quotaEntry(userEntity("bob"), quotaOp("producer_byte_rate", 5, false))
	if resp := send(false, twice, twice); resp.Entries[0].ErrorCode != bad || resp.Entries[1].ErrorCode != bad {
		t.Fatalf("bob twice: %+v, want INVALID_REQUEST for both", resp.Entries)
	}
}
