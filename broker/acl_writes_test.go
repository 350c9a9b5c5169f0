package broker

import (
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
)

// TestCreateAclsAnswersEachACLWithApachesErrorOrItsUsersWrite: one request of many ACLs gets
// one result per ACL, in order: Apache's INVALID_REQUEST for what it refuses, paddock's for
// principals that name no KafkaUser (and for a tls principal, a user of another cluster), and
// success for the rest, whose KafkaUsers then hold them, merged into one rule per resource.
func TestCreateAclsAnswersEachACLWithApachesErrorOrItsUsersWrite(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLCluster, "", acl.OpAlter))
	ab.ensureUserOf(t, "frank", "d")
	ab.ensureUser(t, "grace")
	tlsUser := ab.kafkaUser(t, "grace")
	tlsUser.Spec.Authentication = &v1alpha1.UserAuthentication{Type: v1alpha1.UserTLS}
	if err := ab.kube.Update(t.Context(), tlsUser); err != nil {
		t.Fatal(err)
	}
	type creation struct {
		principal string
		typ       kmsg.ACLResourceType
		name      string
		pattern   kmsg.ACLResourcePatternType
		op        kmsg.ACLOperation
		perm      kmsg.ACLPermissionType
		code      int16
		says      string
	}
	lit, pre := kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed
	allowP, denyP := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	topic, cl := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeCluster
	read, write := kmsg.ACLOperationRead, kmsg.ACLOperationWrite
	bad := kerr.InvalidRequest.Code
	cases := []creation{
		{"User:alice", topic, "orders", lit, read, allowP, 0, ""},
		{"User:alice", topic, "orders", lit, write, allowP, 0, ""},
		{"User:alice", topic, "team-", pre, read, denyP, 0, ""},
		{"User:alice", cl, "kafka-cluster", lit, kmsg.ACLOperationDescribe, allowP, 0, ""},
		{"User:alice", kmsg.ACLResourceTypeAny, "x", lit, read, allowP, bad, "Invalid resourceType"},
		{"User:alice", topic, "x", kmsg.ACLResourcePatternTypeMatch, read, allowP, bad, "Invalid patternType"},
		{"User:alice", topic, "x", lit, kmsg.ACLOperationAny, allowP, bad, "Invalid operation"},
		{"User:alice", topic, "x", lit, read, kmsg.ACLPermissionTypeAny, bad, "Invalid permissionType"},
		{"User:alice", topic, "", lit, read, allowP, bad, "Resource name should not be empty"},
		{"User:alice", cl, "c", lit, kmsg.ACLOperationAlter, allowP, bad, "kafka-cluster"},
		{"User:alice", kmsg.ACLResourceTypeDelegationToken, "tok", lit, read, allowP, bad, "KafkaUser"},
		{"User:*", topic, "orders", lit, read, allowP, bad, "in the KafkaCluster's spec.authorization.acls"},
		{"User:CN=heidi", topic, "orders", lit, read, allowP, bad, "create it with authentication type tls"},
		{"User:grace", topic, "orders", lit, read, allowP, bad, "principal is User:CN=grace"},
		{"User:CN=grace", topic, "orders", lit, read, allowP, 0, ""},
		{"User:frank", topic, "orders", lit, read, allowP, bad, "belongs to cluster d"},
	}
	req := latest(kmsg.NewPtrCreateACLsRequest())
	for _, c := range cases {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.Principal, cr.Host, cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = c.principal, "*", c.typ, c.name, c.pattern
		cr.Operation, cr.PermissionType = c.op, c.perm
		req.Creations = append(req.Creations, cr)
	}
	resp := ab.request(t, req).(*kmsg.CreateACLsResponse)
	if len(resp.Results) != len(cases) {
		t.Fatalf("%d results for %d creations", len(resp.Results), len(cases))
	}
	for i, c := range cases {
		r := resp.Results[i]
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if r.ErrorCode != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s %v %q: code %d %q, want %d %q", c.principal, c.typ, c.name, r.ErrorCode, msg, c.code, c.says)
		}
	}
	alice := ab.kafkaUser(t, "alice")
	if alice == nil || alice.Spec.Authentication != nil || alice.Spec.Cluster != "c" || alice.Labels[v1alpha1.LabelCluster] != "c" {
		t.Fatalf("KafkaUser alice, made for the principal: %+v", alice)
	}
	got := acl.Bindings(map[string][]v1alpha1.ACLRule{"User:alice": alice.Spec.Authorization.ACLs})
	if len(got) != 4 || len(alice.Spec.Authorization.ACLs) != 3 {
		t.Fatalf("alice's rules %+v (bindings %+v), want READ+WRITE on orders in one rule, the prefix deny, DESCRIBE on the cluster", alice.Spec.Authorization.ACLs, got)
	}
	if g := ab.kafkaUser(t, "grace"); g.Spec.Authorization == nil || len(g.Spec.Authorization.ACLs) != 1 {
		t.Fatalf("tls KafkaUser grace: %+v", g.Spec.Authorization)
	}
	if f := ab.kafkaUser(t, "frank"); f.Spec.Authorization != nil {
		t.Fatalf("cluster d's KafkaUser frank was written: %+v", f.Spec.Authorization)
	}
	if ab.kafkaUser(t, "heidi") != nil {
		t.Fatal("a KafkaUser heidi was made for a tls principal")
	}
	before := ab.kafkaUser(t, "alice").ResourceVersion
	if code := createACL(t, ab, "User:alice", topic, "orders", read); code != 0 {
		t.Fatalf("creating an ACL alice has: code %d", code)
	}
	if after := ab.kafkaUser(t, "alice").ResourceVersion; after != before {
		t.Fatalf("creating an ACL alice has wrote KafkaUser alice (resourceVersion %s → %s)", before, after)
	}
}

// TestDeleteAclsListsEachDeletedACLUnderEveryFilterSelectingIt: filters are matched as
// DescribeAcls' (a MATCH filter selects the prefix rule applying to a name); an ACL two
// filters select is listed under both, as Apache's AclControlManager does; the selected
// operations leave the rules and the others stay; a filter with an UNKNOWN element answers
// INVALID_REQUEST in Apache's words.
func TestDeleteAclsListsEachDeletedACLUnderEveryFilterSelectingIt(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLCluster, "", acl.OpAlter))
	ab.ensureUser(t, "alice", allow(v1alpha1.ACLTopic, "orders", acl.OpRead, acl.OpWrite),
		v1alpha1.ACLRule{Type: v1alpha1.ACLAllow, Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLTopic, Name: "team-", PatternType: v1alpha1.ACLPrefix}, Operations: []v1alpha1.ACLOperation{acl.OpRead}, Host: "*"})
	ab.ensureUser(t, "bob", allow(v1alpha1.ACLTopic, "orders", acl.OpRead))
	filter := func(principal *string, name *string, pattern kmsg.ACLResourcePatternType, op kmsg.ACLOperation) kmsg.DeleteACLsRequestFilter {
		f := kmsg.NewDeleteACLsRequestFilter()
		f.ResourceType, f.ResourceName, f.ResourcePatternType, f.Principal = kmsg.ACLResourceTypeTopic, name, pattern, principal
		f.Operation, f.PermissionType = op, kmsg.ACLPermissionTypeAny
		return f
	}
	req := latest(kmsg.NewPtrDeleteACLsRequest())
	req.Filters = []kmsg.DeleteACLsRequestFilter{
		filter(strptr("User:alice"), strptr("orders"), kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead),
		filter(nil, strptr("orders"), kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLOperationRead), // alice's again, and bob's
		filter(strptr("User:alice"), strptr("team-a"), kmsg.ACLResourcePatternTypeMatch, kmsg.ACLOperationAny),
		filter(nil, nil, kmsg.ACLResourcePatternTypeUnknown, kmsg.ACLOperationAny),
	}
	resp := ab.request(t, req).(*kmsg.DeleteACLsResponse)
	listed := func(i int) []string {
		var out []string
		for _, m := range resp.Results[i].MatchingACLs {
			if m.ErrorCode != 0 {
				t.Errorf("filter %d: matching ACL error %d", i, m.ErrorCode)
			}
			out = append(out, m.Principal+" "+m.ResourceName+" "+m.Operation.String())
		}
		slices.Sort(out)
		return out
	}
	for i, want := range [][]string{{"User:alice orders READ"}, {"User:alice orders READ", "User:bob orders READ"}, {"User:alice team- READ"}, nil} {
		if got := listed(i); !slices.Equal(got, want) {
			t.Errorf("filter %d deleted %v, want %v", i, got, want)
		}
	}
	if r := resp.Results[3]; r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Unknown patternFilter." {
		t.Errorf("the UNKNOWN filter: code %d %v, want INVALID_REQUEST Unknown patternFilter.", r.ErrorCode, r.ErrorMessage)
	}
	alice := ab.kafkaUser(t, "alice")
	if a := alice.Spec.Authorization.ACLs; len(a) != 1 || !slices.Equal(a[0].Operations, []v1alpha1.ACLOperation{acl.OpWrite}) {
		t.Fatalf("alice's rules after the delete: %+v, want WRITE on orders alone", a)
	}
	if b := ab.kafkaUser(t, "bob"); b == nil || len(b.Spec.Authorization.ACLs) != 0 {
		t.Fatalf("bob after the delete: %+v, want the KafkaUser without rules", b)
	}
}
