package acl

import (
	"reflect"
	"strings"
	"testing"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestRuleOfRefusesWhatApacheRefusesAndWhatAKafkaUserCannotHold(t *testing.T) {
	ok := Binding{ResourceType: 2, ResourceName: "orders", PatternType: PatternLiteral, Principal: "User:alice", Host: "*", Operation: 3, Permission: PermissionAllow}
	with := func(f func(*Binding)) Binding { b := ok; f(&b); return b }
	cases := []struct {
		rule string
		b    Binding
		says string // "" = stored
	}{
		{"a literal topic allow is stored", ok, ""},
		{"type ANY is refused", with(func(b *Binding) { b.ResourceType = 1 }), "Invalid resourceType ANY"},
		{"type UNKNOWN is refused", with(func(b *Binding) { b.ResourceType = 0 }), "Invalid resourceType UNKNOWN"},
		{"pattern MATCH is refused", with(func(b *Binding) { b.PatternType = 2 }), "Invalid patternType MATCH"},
		{"pattern ANY is refused", with(func(b *Binding) { b.PatternType = 1 }), "Invalid patternType ANY"},
		{"operation ANY is refused", with(func(b *Binding) { b.Operation = 1 }), "Invalid operation ANY"},
		{"permission ANY is refused", with(func(b *Binding) { b.Permission = 1 }), "Invalid permissionType ANY"},
		{"an undefined type is UNKNOWN", with(func(b *Binding) { b.ResourceType = 9 }), "Invalid resourceType UNKNOWN"},
		{"an undefined operation is UNKNOWN", with(func(b *Binding) { b.Operation = 40 }), "Invalid operation UNKNOWN"},
		{"an empty name is refused", with(func(b *Binding) { b.ResourceName = "" }), "Resource name should not be empty"},
		{"a cluster not called kafka-cluster is refused", with(func(b *Binding) { b.ResourceType, b.ResourceName = 4, "c" }), "The only valid name for the CLUSTER resource is kafka-cluster"},
		{"a delegation token resource has no KafkaUser rule", with(func(b *Binding) { b.ResourceType = 6 }), "topic, group, cluster and transactionalId"},
		{"a token operation has no KafkaUser rule", with(func(b *Binding) { b.Operation = 13 }), "no token operations"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, why := RuleOf(tc.b)
			if (tc.says == "") != (why == "") || !strings.Contains(why, tc.says) {
				t.Fatalf("refusal %q, want %q", why, tc.says)
			}
		})
	}
	r, _ := RuleOf(Binding{ResourceType: 4, ResourceName: ClusterName, PatternType: PatternLiteral, Host: "10.0.0.1", Operation: 7, Permission: PermissionDeny})
	want := v1alpha1.ACLRule{Type: v1alpha1.ACLDeny, Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLCluster, PatternType: v1alpha1.ACLLiteral},
		Operations: []v1alpha1.ACLOperation{OpAlter}, Host: "10.0.0.1"}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("cluster deny rule %+v, want %+v", r, want)
	}
	if b := Bindings(map[string][]v1alpha1.ACLRule{"User:alice": {r}}); len(b) != 1 || b[0].ResourceName != ClusterName || b[0].Operation != 7 || b[0].Permission != PermissionDeny {
		t.Fatalf("the stored rule describes as %+v", b)
	}
}

func TestUserOfMapsOnlyPrincipalsAKafkaUserHas(t *testing.T) {
	cases := []struct {
		principal string
		name      string
		tls       bool
	}{
		{"User:alice", "alice", false},
		{"User:CN=alice", "alice", true},
		{"User:team.a-1", "team.a-1", false},
		{"User:*", "", false},
		{"Group:admins", "", false},
		{"alice", "", false},
		{"User:CN=alice,O=paddock.dev", "", false},
		{"User:OU=x", "", false},
		{"User:Alice", "", false},
		{"User:ANONYMOUS", "", false},
		{"User:", "", false},
	}
	for _, tc := range cases {
		name, tls, why := UserOf(tc.principal)
		if name != tc.name || tls != tc.tls || (name == "") != (why != "") {
			t.Errorf("UserOf(%q) = %q, %v, %q; want %q, %v", tc.principal, name, tls, why, tc.name, tc.tls)
		}
		where := "declare the ACL on a KafkaUser"
		if tc.principal == WildcardPrincipal {
			where = "the KafkaCluster's spec.authorization.acls" // everyone's rules live there
		}
		if why != "" && !strings.Contains(why, where) {
			t.Errorf("UserOf(%q)'s refusal %q does not say where to declare it (%s)", tc.principal, why, where)
		}
	}
}

func TestAddMergesIntoTheRuleOfTheSameResourceAndIsIdempotent(t *testing.T) {
	read := rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpRead)
	write := rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", "", "", OpWrite) // defaults unset
	rules, changed := Add([]v1alpha1.ACLRule{read}, write)
	if !changed || len(rules) != 1 || !reflect.DeepEqual(rules[0].Operations, []v1alpha1.ACLOperation{OpRead, OpWrite}) {
		t.Fatalf("adding WRITE to the READ rule: %+v (changed %v)", rules, changed)
	}
	if read.Operations[0] != OpRead || len(read.Operations) != 1 {
		t.Fatalf("Add changed its input: %+v", read)
	}
	if again, changed := Add(rules, write); changed || !reflect.DeepEqual(again, rules) {
		t.Fatalf("adding it again changed %+v", again)
	}
	deny := rule(v1alpha1.ACLDeny, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpRead)
	if rules, changed = Add(rules, deny); !changed || len(rules) != 2 {
		t.Fatalf("a deny is its own rule: %+v", rules)
	}
	other := rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "10.0.0.1", OpRead)
	if rules, changed = Add(rules, other); !changed || len(rules) != 3 {
		t.Fatalf("another host is its own rule: %+v", rules)
	}
}

func TestRemoveTakesTheSelectedOperationsAndDropsEmptyRules(t *testing.T) {
	rules := []v1alpha1.ACLRule{
		rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpRead, OpWrite),
		rule(v1alpha1.ACLAllow, v1alpha1.ACLGroup, "g", v1alpha1.ACLLiteral, "*", OpRead),
	}
	readOnly := func(b Binding) bool { return b.Operation == OperationCode(OpRead) }
	out, removed := Remove("User:alice", rules, readOnly)
	want := []v1alpha1.ACLRule{rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpWrite)}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("left %+v, want %+v", out, want)
	}
	if len(removed) != 2 || removed[0].Principal != "User:alice" || removed[0].ResourceType != 2 || removed[1].ResourceType != 3 {
		t.Fatalf("removed %+v, want the topic's and the group's READ", removed)
	}
	if len(rules[0].Operations) != 2 {
		t.Fatalf("Remove changed its input: %+v", rules)
	}
	if out, removed := Remove("User:alice", rules, func(Binding) bool { return false }); len(removed) != 0 || !reflect.DeepEqual(out, rules) {
		t.Fatalf("selecting nothing changed %+v", out)
	}
}
