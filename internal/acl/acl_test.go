package acl

import (
	"testing"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func rule(perm v1alpha1.ACLPermission, typ v1alpha1.ACLResourceType, name string, pattern v1alpha1.ACLPatternType, host string, ops ...v1alpha1.ACLOperation) v1alpha1.ACLRule {
	return v1alpha1.ACLRule{Type: perm, Resource: v1alpha1.ACLResource{Type: typ, Name: name, PatternType: pattern}, Operations: ops, Host: host}
}

func topic(op v1alpha1.ACLOperation, name string) Action {
	return Action{Principal: "User:alice", Host: "10.0.0.1", Type: v1alpha1.ACLTopic, Name: name, Operation: op}
}

func TestApacheACLSemantics(t *testing.T) {
	allow, deny := v1alpha1.ACLAllow, v1alpha1.ACLDeny
	lit, pre := v1alpha1.ACLLiteral, v1alpha1.ACLPrefix
	tp, grp, cl := v1alpha1.ACLTopic, v1alpha1.ACLGroup, v1alpha1.ACLCluster
	cases := []struct {
		rule   string
		rules  []v1alpha1.ACLRule
		action Action
		want   bool
	}{
		{"no rule denies (allow.everyone.if.no.acl.found=false)", nil, topic(OpRead, "orders"), false},
		{"a literal allow of the operation allows it", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)}, topic(OpRead, "orders"), true},
		{"a literal rule covers only its own name", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)}, topic(OpRead, "orders2"), false},
		{"a rule of one operation does not allow another", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)}, topic(OpWrite, "orders"), false},
		{"the literal name * covers every topic", []v1alpha1.ACLRule{rule(allow, tp, "*", lit, "*", OpWrite)}, topic(OpWrite, "anything"), true},
		{"a prefix rule covers the names starting with it", []v1alpha1.ACLRule{rule(allow, tp, "team-a.", pre, "*", OpRead)}, topic(OpRead, "team-a.orders"), true},
		{"a prefix rule does not cover other names", []v1alpha1.ACLRule{rule(allow, tp, "team-a.", pre, "*", OpRead)}, topic(OpRead, "team-b.orders"), false},
		{"a prefix * is no wildcard", []v1alpha1.ACLRule{rule(allow, tp, "*", pre, "*", OpRead)}, topic(OpRead, "orders"), false},
		{"All allows every operation", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpAll)}, topic(OpDelete, "orders"), true},
		{"Read implies Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)}, topic(OpDescribe, "orders"), true},
		{"Write implies Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpWrite)}, topic(OpDescribe, "orders"), true},
		{"Delete implies Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpDelete)}, topic(OpDescribe, "orders"), true},
		{"Alter implies Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpAlter)}, topic(OpDescribe, "orders"), true},
		{"Create does not imply Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpCreate)}, topic(OpDescribe, "orders"), false},
		{"Describe implies nothing", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpDescribe)}, topic(OpRead, "orders"), false},
		{"AlterConfigs implies DescribeConfigs", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpAlterConfigs)}, topic(OpDescribeConfigs, "orders"), true},
		{"DescribeConfigs does not imply AlterConfigs", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpDescribeConfigs)}, topic(OpAlterConfigs, "orders"), false},
		{"deny beats allow", []v1alpha1.ACLRule{rule(allow, tp, "*", lit, "*", OpAll), rule(deny, tp, "orders", lit, "*", OpRead)}, topic(OpRead, "orders"), false},
		{"a prefix deny beats a literal allow", []v1alpha1.ACLRule{rule(allow, tp, "secret.x", lit, "*", OpRead), rule(deny, tp, "secret.", pre, "*", OpAll)}, topic(OpRead, "secret.x"), false},
		{"a deny of Read does not deny Describe", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpDescribe), rule(deny, tp, "orders", lit, "*", OpRead)}, topic(OpDescribe, "orders"), true},
		{"a deny of another operation leaves the allow", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead), rule(deny, tp, "orders", lit, "*", OpWrite)}, topic(OpRead, "orders"), true},
		{"a rule for another host does not apply", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "10.0.0.2", OpRead)}, topic(OpRead, "orders"), false},
		{"a rule for the client's host applies", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "10.0.0.1", OpRead)}, topic(OpRead, "orders"), true},
		{"a deny for another host does not deny", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead), rule(deny, tp, "orders", lit, "10.0.0.2", OpRead)}, topic(OpRead, "orders"), true},
		{"a topic rule does not cover a group of the same name", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)},
			Action{Principal: "User:alice", Host: "10.0.0.1", Type: grp, Name: "orders", Operation: OpRead}, false},
		{"a cluster rule covers the cluster whatever its name", []v1alpha1.ACLRule{rule(allow, cl, "", lit, "*", OpAlter)},
			Action{Principal: "User:alice", Host: "10.0.0.1", Type: cl, Name: "kafka-cluster", Operation: OpAlter}, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			z := &Authorizer{Rules: map[string][]v1alpha1.ACLRule{"User:alice": tc.rules}}
			if got := z.Allowed(tc.action); got != tc.want {
				t.Fatalf("allowed %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPrincipalsAndSuperUsers(t *testing.T) {
	readOrders := []v1alpha1.ACLRule{rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpRead)}
	z := &Authorizer{SuperUsers: []string{"User:admin"}, Rules: map[string][]v1alpha1.ACLRule{
		"User:alice": readOrders,
		"User:bob":   {rule(v1alpha1.ACLDeny, v1alpha1.ACLTopic, "*", v1alpha1.ACLLiteral, "*", OpAll)},
	}}
	for name, c := range map[string]struct {
		principal string
		want      bool
	}{
		"another principal's rules do not apply":           {"User:mallory", false},
		"a super user needs no rule":                       {"User:admin", true},
		"the rules of the principal apply":                 {"User:alice", true},
		"a deny of the principal stands without any allow": {"User:bob", false},
	} {
		a := topic(OpRead, "orders")
		a.Principal = c.principal
		if got := z.Allowed(a); got != c.want {
			t.Errorf("%s: allowed %v, want %v", name, got, c.want)
		}
	}
	z.Rules[WildcardPrincipal] = readOrders
	a := topic(OpRead, "orders")
	a.Principal = "User:mallory"
	if !z.Allowed(a) {
		t.Error("a rule of User:* does not apply to every principal")
	}
	a.Principal = "User:bob"
	if z.Allowed(a) {
		t.Error("a principal's deny did not beat User:*'s allow")
	}
}
