package acl

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Editing a KafkaUser's rules as CreateAcls and DeleteAcls state them (docs/security.md,
// "Authorization"): a binding is one operation of one rule, so adding one joins its operation
// to the rule of the same permission, resource, pattern and host (or makes that rule), and
// deleting one takes its operation out of its rule (and the rule out once it has none left).

// declareOnAKafkaUser ends every refusal of a principal that names no KafkaUser.
const declareOnAKafkaUser = "declare the ACL on a KafkaUser (spec.authorization.acls) instead"

// RuleOf is the rule of binding b alone (one operation), or why a KafkaUser cannot hold it
// ("" when it can): Apache's validation of a new ACL (AclControlManager.validateNewAcl,
// AclApis.handleCreateAcls) in Apache's words, and paddock's refusal of what KafkaUser rules
// do not have (the DELEGATION_TOKEN and USER resource types, the token operations). The
// principal is not looked at (UserOf).
func RuleOf(b Binding) (v1alpha1.ACLRule, string) {
	var r v1alpha1.ACLRule
	switch {
	case b.ResourceType <= codeAny || b.ResourceType > 7: // an undefined code is UNKNOWN to Apache
		return r, "Invalid resourceType " + enumName(b.ResourceType, 7)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return r, "Invalid patternType " + patternName(b.PatternType)
	case b.Operation <= codeAny || b.Operation > 14:
		return r, "Invalid operation " + enumName(b.Operation, 14)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return r, "Invalid permissionType " + enumName(b.Permission, PermissionAllow)
	}
	r.Type = v1alpha1.ACLAllow
	if b.Permission == PermissionDeny {
		r.Type = v1alpha1.ACLDeny
	}
	if b.ResourceName == "" {
		return r, "Resource name should not be empty"
	}
	typ, ok := resourceTypeOf(b.ResourceType)
	if !ok {
		return r, fmt.Sprintf("resource type %d has no KafkaUser ACL rule: paddock's rules cover topic, group, cluster and transactionalId", b.ResourceType)
	}
	op, ok := operationOf(b.Operation)
	if !ok {
		return r, fmt.Sprintf("operation %d has no KafkaUser ACL rule: paddock has no delegation tokens, so no token operations", b.Operation)
	}
	if typ == v1alpha1.ACLCluster && b.ResourceName != ClusterName {
		return r, "The only valid name for the CLUSTER resource is " + ClusterName
	}
	r.Resource = v1alpha1.ACLResource{Type: typ, Name: b.ResourceName, PatternType: v1alpha1.ACLLiteral}
	if typ == v1alpha1.ACLCluster {
		r.Resource.Name = ""
	}
	if b.PatternType == PatternPrefixed {
		r.Resource.PatternType = v1alpha1.ACLPrefix
	}
	r.Operations = []v1alpha1.ACLOperation{op}
	r.Host = b.Host
	return r, ""
}

// UserOf is the KafkaUser a principal names — User:<name> a KafkaUser <name> (scram, or of
// ACLs only), User:CN=<name> a tls KafkaUser <name> (tls true) — or why it names none ("" when
// it does): another principal type, the wildcard User:*, a DN other than CN=<name>, a name
// that is no object name (a DNS-1123 subdomain: lower case, digits, '-' and '.').
func UserOf(principal string) (name string, tls bool, why string) {
	typ, rest, ok := strings.Cut(principal, ":")
	switch {
	case !ok:
		return "", false, fmt.Sprintf("Could not parse principal from `%s` (no colon is present separating the principal type from the principal name); %s", principal, declareOnAKafkaUser)
	case typ != "User":
		return "", false, fmt.Sprintf("principal %s is of type %s: paddock's ACLs are KafkaUsers' and name User principals only; %s", principal, typ, declareOnAKafkaUser)
	case rest == "*":
		return "", false, fmt.Sprintf("the wildcard principal %s names no KafkaUser: declare its ACLs in the KafkaCluster's spec.authorization.acls", principal)
	}
	name = rest
	if cn, isCN := strings.CutPrefix(rest, "CN="); isCN {
		name, tls = cn, true
	}
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		if tls || strings.Contains(rest, "=") {
			return "", false, fmt.Sprintf("principal %s is no KafkaUser's: a tls KafkaUser's principal is User:CN=<object name>; %s", principal, declareOnAKafkaUser)
		}
		return "", false, fmt.Sprintf("principal %s names no KafkaUser: %q is not a valid object name; %s", principal, rest, declareOnAKafkaUser)
	}
	return name, tls, ""
}

// Add is rules with add's operations joined to the first rule of the same permission,
// resource, pattern and host (the API's defaults taken as what they default to), or add
// appended as a new rule; changed is false when every operation was there already. rules is
// not modified.
func Add(rules []v1alpha1.ACLRule, add v1alpha1.ACLRule) (out []v1alpha1.ACLRule, changed bool) {
	out = slices.Clone(rules)
	for i, r := range out {
		if !sameTarget(r, add) {
			continue
		}
		for _, op := range add.Operations {
			if !slices.Contains(r.Operations, op) {
				r.Operations = append(slices.Clone(r.Operations), op)
				changed = true
			}
		}
		out[i] = r
		return out, changed
	}
	return append(out, add), true
}

// Remove takes out of rules (principal's) every binding selected says to, and returns the
// rules left and the bindings taken out, in rule order. A rule left with no operation is
// dropped. rules is not modified.
func Remove(principal string, rules []v1alpha1.ACLRule, selected func(Binding) bool) (kept []v1alpha1.ACLRule, removed []Binding) {
	for _, r := range rules {
		var ops []v1alpha1.ACLOperation
		for _, op := range r.Operations {
			if b := bindingOf(principal, r, op); selected(b) {
				removed = append(removed, b)
			} else {
				ops = append(ops, op)
			}
		}
		switch {
		case len(ops) == len(r.Operations):
			kept = append(kept, r)
		case len(ops) > 0:
			r.Operations = ops
			kept = append(kept, r)
		}
	}
	return kept, removed
}

// sameTarget says whether a and b are rules of the same permission, resource, pattern and
// host, the API's defaults ("" allow, literal, host "*") taken as what they default to.
func sameTarget(a, b v1alpha1.ACLRule) bool {
	return permissionOf(a) == permissionOf(b) && a.Resource.Type == b.Resource.Type &&
		(a.Resource.Type == v1alpha1.ACLCluster || a.Resource.Name == b.Resource.Name) &&
		patternOf(a) == patternOf(b) && hostOf(a) == hostOf(b)
}

// bindingOf is the binding of operation op of rule r under principal, as Bindings states it.
func bindingOf(principal string, r v1alpha1.ACLRule, op v1alpha1.ACLOperation) Binding {
	b := Binding{ResourceType: ResourceTypeCode(r.Resource.Type), ResourceName: r.Resource.Name,
		PatternType: patternOf(r), Principal: principal, Host: hostOf(r), Permission: permissionOf(r), Operation: OperationCode(op)}
	if r.Resource.Type == v1alpha1.ACLCluster {
		b.ResourceName = ClusterName
	}
	return b
}

func patternOf(r v1alpha1.ACLRule) int8 {
	if r.Resource.PatternType == v1alpha1.ACLPrefix {
		return PatternPrefixed
	}
	return PatternLiteral
}

func hostOf(r v1alpha1.ACLRule) string {
	if r.Host == "" {
		return WildcardHost
	}
	return r.Host
}

func permissionOf(r v1alpha1.ACLRule) int8 {
	if r.Type == v1alpha1.ACLDeny {
		return PermissionDeny
	}
	return PermissionAllow
}

func resourceTypeOf(code int8) (v1alpha1.ACLResourceType, bool) {
	for typ, c := range resourceTypeCodes {
		if c == code {
			return typ, true
		}
	}
	return "", false
}

func operationOf(code int8) (v1alpha1.ACLOperation, bool) {
	for op, c := range operationCodes {
		if c == code {
			return op, true
		}
	}
	return "", false
}

// enumName is how Apache prints an invalid code of an ACL enum whose codes go up to max: ANY
// for 1, UNKNOWN for 0 and every undefined code (fromCode's answer), else the code.
func enumName(code, max int8) string {
	switch {
	case code == codeAny:
		return "ANY"
	case code <= codeUnknown || code > max:
		return "UNKNOWN"
	}
	return fmt.Sprint(code)
}

// patternName is how Apache prints an invalid pattern type.
func patternName(code int8) string {
	if code == patternMatch {
		return "MATCH"
	}
	return enumName(code, PatternPrefixed)
}
