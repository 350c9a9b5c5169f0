package acl

import (
	"testing"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func TestAllowedOnAnyIsApachesAuthorizeByResourceType(t *testing.T) {
	allow, deny := v1alpha1.ACLAllow, v1alpha1.ACLDeny
	lit, pre := v1alpha1.ACLLiteral, v1alpha1.ACLPrefix
	tp := v1alpha1.ACLTopic
	cases := []struct {
		rule  string
		rules []v1alpha1.ACLRule
		want  bool
	}{
		{"no rule: no topic", nil, false},
		{"a literal allow of one topic is some topic", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpWrite)}, true},
		{"a prefix allow is some topic", []v1alpha1.ACLRule{rule(allow, tp, "team-a.", pre, "*", OpWrite)}, true},
		{"All allows the operation", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpAll)}, true},
		{"another operation is not it", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpRead)}, false},
		{"a group rule is no topic", []v1alpha1.ACLRule{rule(allow, v1alpha1.ACLGroup, "orders", lit, "*", OpWrite)}, false},
		{"a deny of every name denies", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpWrite), rule(deny, tp, "*", lit, "*", OpWrite)}, false},
		{"a literal deny of the one allowed name denies", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpWrite), rule(deny, tp, "orders", lit, "*", OpWrite)}, false},
		{"a deny of another name leaves the allow", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "*", OpWrite), rule(deny, tp, "other", lit, "*", OpWrite)}, true},
		{"a shorter prefix deny covers a prefix allow", []v1alpha1.ACLRule{rule(allow, tp, "team-a.", pre, "*", OpWrite), rule(deny, tp, "team", pre, "*", OpWrite)}, false},
		{"a longer prefix deny leaves a prefix allow", []v1alpha1.ACLRule{rule(allow, tp, "team-a.", pre, "*", OpWrite), rule(deny, tp, "team-a.x", pre, "*", OpWrite)}, true},
		{"a prefix deny covers a literal allow", []v1alpha1.ACLRule{rule(allow, tp, "team-a.orders", lit, "*", OpWrite), rule(deny, tp, "team-a.", pre, "*", OpAll)}, false},
		{"an allow for another host is not it", []v1alpha1.ACLRule{rule(allow, tp, "orders", lit, "10.0.0.2", OpWrite)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			z := &Authorizer{Rules: map[string][]v1alpha1.ACLRule{"User:alice": tc.rules}}
			if got := z.AllowedOnAny("User:alice", "10.0.0.1", tp, OpWrite); got != tc.want {
				t.Fatalf("allowed %v, want %v", got, tc.want)
			}
		})
	}
	if !(&Authorizer{SuperUsers: []string{"User:admin"}}).AllowedOnAny("User:admin", "h", tp, OpWrite) {
		t.Error("a super user may not write some topic")
	}
}

func TestAuthorizedOperationsSetsABitPerAllowedOperation(t *testing.T) {
	z := &Authorizer{Rules: map[string][]v1alpha1.ACLRule{"User:alice": {
		rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "*", OpRead),
	}}}
	// READ (3) and the DESCRIBE (8) it implies.
	if got, want := z.AuthorizedOperations("User:alice", "h", v1alpha1.ACLTopic, "orders"), int32(1<<3|1<<8); got != want {
		t.Fatalf("bits %b, want %b", got, want)
	}
	if got := z.AuthorizedOperations("User:bob", "h", v1alpha1.ACLTopic, "orders"); got != 0 {
		t.Fatalf("another principal's bits %b, want none", got)
	}
}

func TestBindingsAndFilters(t *testing.T) {
	rules := map[string][]v1alpha1.ACLRule{
		"User:alice": {
			rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "orders", v1alpha1.ACLLiteral, "", OpRead, OpWrite),
			rule(v1alpha1.ACLDeny, v1alpha1.ACLTopic, "secret.", v1alpha1.ACLPrefix, "10.0.0.1", OpAll),
			rule(v1alpha1.ACLAllow, v1alpha1.ACLCluster, "", v1alpha1.ACLLiteral, "*", OpDescribe),
		},
		"User:bob": {rule(v1alpha1.ACLAllow, v1alpha1.ACLTopic, "*", v1alpha1.ACLLiteral, "*", OpRead)},
	}
	all := Bindings(rules)
	if len(all) != 5 {
		t.Fatalf("%d bindings, want one per operation of each rule (5): %+v", len(all), all)
	}
	if b := all[0]; b.ResourceType != 2 || b.ResourceName != "*" || b.Principal != "User:bob" {
		t.Errorf("first binding %+v, want bob's topic * (sorted by resource)", b)
	}
	for _, b := range all {
		if b.Host == "" {
			t.Errorf("binding %+v has no host, want * for an unset one", b)
		}
		if b.ResourceType == 4 && b.ResourceName != ClusterName {
			t.Errorf("cluster binding named %q, want %q", b.ResourceName, ClusterName)
		}
	}
	str := func(s string) *string { return &s }
	anyFilter := Filter{ResourceType: 1, PatternType: 1, Operation: 1, Permission: 1}
	count := func(f Filter) int {
		n := 0
		for _, b := range all {
			if f.Matches(b) {
				n++
			}
		}
		return n
	}
	for name, c := range map[string]struct {
		change func(*Filter)
		want   int
	}{
		"ANY everything matches all":                  {func(*Filter) {}, 5},
		"a resource type":                             {func(f *Filter) { f.ResourceType = 4 }, 1},
		"a principal":                                 {func(f *Filter) { f.Principal = str("User:bob") }, 1},
		"a host":                                      {func(f *Filter) { f.Host = str("10.0.0.1") }, 1},
		"an operation (ALL is not expanded)":          {func(f *Filter) { f.Operation = 3 }, 2},
		"a permission":                                {func(f *Filter) { f.Permission = PermissionDeny }, 1},
		"LITERAL with a name":                         {func(f *Filter) { f.PatternType, f.ResourceName = PatternLiteral, str("orders") }, 2},
		"PREFIXED with a name":                        {func(f *Filter) { f.PatternType, f.ResourceName = PatternPrefixed, str("secret.") }, 1},
		"ANY with a name is that name of any pattern": {func(f *Filter) { f.ResourceName = str("secret.") }, 1},
		"MATCH: the literal, * and covering prefixes": {func(f *Filter) { f.PatternType, f.ResourceName, f.ResourceType = 2, str("secret.x"), 2 }, 2},
		"MATCH of orders: orders and *":               {func(f *Filter) { f.PatternType, f.ResourceName, f.ResourceType = 2, str("orders"), 2 }, 3},
	} {
		f := anyFilter
		c.change(&f)
		if got := count(f); got != c.want {
			t.Errorf("%s: %d bindings, want %d", name, got, c.want)
		}
	}
	if (Filter{ResourceType: 0, PatternType: 1, Operation: 1, Permission: 1}).Valid() || !anyFilter.Valid() {
		t.Error("a filter with an UNKNOWN element is valid, or the ANY filter is not")
	}
}
