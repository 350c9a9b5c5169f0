package acl

import (
	"cmp"
	"slices"
	"strings"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Binding is one ACL as Kafka's wire states it (DescribeAcls): a resource pattern and one
// access control entry, every enum as its code.
type Binding struct {
	ResourceType int8
	ResourceName string
	PatternType  int8
	Principal    string
	Host         string
	Operation    int8
	Permission   int8
}

// Filter selects bindings as DescribeAcls' request states it: a nil name, principal or host
// matches any; type, operation and permission ANY (1) match any; pattern type ANY matches
// every pattern of exactly the name, MATCH every binding that applies to the name.
type Filter struct {
	ResourceType    int8
	ResourceName    *string
	PatternType     int8
	Principal, Host *string
	Operation       int8
	Permission      int8
}

// Codes of Kafka's ANY and MATCH filter values.
const (
	codeUnknown  int8 = 0
	codeAny      int8 = 1
	patternMatch int8 = 2
)

// Valid reports whether f names no UNKNOWN (or undefined) element, as Apache requires of a
// DescribeAcls filter (else INVALID_REQUEST).
func (f Filter) Valid() bool {
	return f.ResourceType > codeUnknown && f.ResourceType <= 7 &&
		f.PatternType > codeUnknown && f.PatternType <= PatternPrefixed &&
		f.Operation > codeUnknown && f.Operation <= 14 &&
		f.Permission > codeUnknown && f.Permission <= PermissionAllow
}

// Matches reports whether f selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != codeAny && f.ResourceType != b.ResourceType {
		return false
	}
	if !f.matchesPattern(b) {
		return false
	}
	return (f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == codeAny || f.Operation == b.Operation) &&
		(f.Permission == codeAny || f.Permission == b.Permission)
}

func (f Filter) matchesPattern(b Binding) bool {
	switch f.PatternType {
	case codeAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case patternMatch:
		if f.ResourceName == nil {
			return true
		}
		name := *f.ResourceName
		if b.PatternType == PatternPrefixed {
			return strings.HasPrefix(name, b.ResourceName)
		}
		return b.ResourceName == name || b.ResourceName == WildcardName
	}
	return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
}

// Bindings are the rules, by principal, as Kafka bindings, one per operation of each rule,
// sorted by resource (type, name, pattern) then principal, host, operation and permission.
func Bindings(rules map[string][]v1alpha1.ACLRule) []Binding {
	var out []Binding
	for principal, rs := range rules {
		for _, r := range rs {
			b := Binding{ResourceType: ResourceTypeCode(r.Resource.Type), ResourceName: r.Resource.Name,
				PatternType: PatternLiteral, Principal: principal, Host: r.Host, Permission: PermissionAllow}
			if r.Resource.Type == v1alpha1.ACLCluster {
				b.ResourceName = ClusterName
			}
			if r.Resource.PatternType == v1alpha1.ACLPrefix {
				b.PatternType = PatternPrefixed
			}
			if b.Host == "" {
				b.Host = WildcardHost
			}
			if r.Type == v1alpha1.ACLDeny {
				b.Permission = PermissionDeny
			}
			for _, op := range r.Operations {
				b.Operation = OperationCode(op)
				out = append(out, b)
			}
		}
	}
	slices.SortFunc(out, func(a, b Binding) int {
		return cmp.Or(cmp.Compare(a.ResourceType, b.ResourceType), cmp.Compare(a.ResourceName, b.ResourceName),
			cmp.Compare(a.PatternType, b.PatternType), cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host),
			cmp.Compare(a.Operation, b.Operation), cmp.Compare(a.Permission, b.Permission))
	})
	return slices.Compact(out)
}
