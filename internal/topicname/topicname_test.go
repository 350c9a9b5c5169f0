package topicname

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestKafkaNameRules(t *testing.T) {
	for _, tt := range []struct {
		name    string
		wantErr string // substring; "" = valid
	}{
		{"orders", ""},
		{"Orders.v1_2-x", ""},
		{strings.Repeat("a", 249), ""},
		{"", "the empty string is not allowed"},
		{".", "'.' is not allowed"},
		{"..", "'..' is not allowed"},
		{"...", ""},
		{strings.Repeat("a", 250), "longer than the max allowed length 249"},
		{"a b", "characters other than ASCII alphanumerics"},
		{"a/b", "characters other than ASCII alphanumerics"},
		{"é", "characters other than ASCII alphanumerics"},
	} {
		err := Validate(tt.name)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Validate(%.20q) = %v, want valid", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("Validate(%.20q) = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

func TestNamesThatDifferOnlyByDotAndUnderscoreCollide(t *testing.T) {
	if CollisionKey("a.b_c") != CollisionKey("a_b.c") {
		t.Error("a.b_c and a_b.c must collide")
	}
	if CollisionKey("a.b") == CollisionKey("a-b") {
		t.Error("a.b and a-b must not collide")
	}
}

func TestAValidObjectNameIsItsOwnObjectName(t *testing.T) {
	for _, n := range []string{"orders", "orders.v1", "a-b", "0"} {
		if got := ObjectName(n); got != n {
			t.Errorf("ObjectName(%q) = %q, want the name itself", n, got)
		}
	}
}

func TestOtherNamesMapToADeterministicValidObjectName(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"Orders", "orders_v1", "_private", "-x", "x-", ".hidden", "a..b", "___", "A.B", "a.b_", strings.Repeat("Z", 249)} {
		got := ObjectName(n)
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("ObjectName(%q) = %q, not a valid object name: %v", n, got, errs)
		}
		if got != ObjectName(n) {
			t.Errorf("ObjectName(%q) is not deterministic", n)
		}
		if prev, dup := seen[got]; dup {
			t.Errorf("ObjectName(%q) = ObjectName(%q) = %q", n, prev, got)
		}
		seen[got] = n
	}
	if got := ObjectName("Orders"); !strings.HasPrefix(got, "orders-") || got == ObjectName("orders") {
		t.Errorf("ObjectName(Orders) = %q, want a sanitized prefix orders- and a name distinct from orders'", got)
	}
}

func TestTheOldestClaimOfACollisionClassIsServed(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := Conflicts([]Claim{
		{Object: "b", Name: "a.b", Created: t0.Add(time.Second)},
		{Object: "a-b-1234", Name: "a_b", Created: t0},
		{Object: "c", Name: "a.b", Created: t0},
		{Object: "alone", Name: "alone", Created: t0},
	})
	// "a-b-1234" and "c" are equally old: the lower object name wins.
	want := map[string]string{"b": "a-b-1234", "c": "a-b-1234"}
	if len(got) != len(want) {
		t.Fatalf("Conflicts = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Conflicts[%s] = %q, want %q", k, got[k], v)
		}
	}
}
