package acl

import (
	"slices"
	"strings"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

// Wildcards of Apache's ACL model: a literal resource name "*" matches every name, a host
// "*" every host, a principal "User:*" every principal.
const (
	WildcardName      = "*"
	WildcardHost      = "*"
	WildcardPrincipal = "User:*"
)

// Action is one authorization question: may Principal, connected from Host, perform
// Operation on the resource of Type called Name (ignored for the cluster)?
type Action struct {
	Principal, Host string
	Type            v1alpha1.ACLResourceType
	Name            string
	Operation       v1alpha1.ACLOperation
}

// Authorizer holds what decides: the super users and every principal's rules.
type Authorizer struct {
	// SuperUsers may do everything (spec.authorization.superUsers, and the brokers' and the
	// operator's own principals).
	SuperUsers []string
	// Rules are each principal's ACL rules (a KafkaUser's spec.authorization.acls), by
	// principal; WildcardPrincipal's apply to everyone.
	Rules map[string][]v1alpha1.ACLRule
}

// Allowed decides a, with Apache's semantics (package doc).
func (z *Authorizer) Allowed(a Action) bool {
	if slices.Contains(z.SuperUsers, a.Principal) {
		return true
	}
	var matching []v1alpha1.ACLRule
	for _, principal := range []string{a.Principal, WildcardPrincipal} {
		for _, r := range z.Rules[principal] {
			if covers(r, a) {
				matching = append(matching, r)
			}
		}
		if a.Principal == WildcardPrincipal {
			break
		}
	}
	for _, r := range matching {
		if r.Type == v1alpha1.ACLDeny && grants(r.Operations, []v1alpha1.ACLOperation{a.Operation}) {
			return false
		}
	}
	for _, r := range matching {
		if r.Type != v1alpha1.ACLDeny && grants(r.Operations, implying(a.Operation)) {
			return true
		}
	}
	return false
}

// covers says whether rule r is about a's resource and host (its operations aside).
func covers(r v1alpha1.ACLRule, a Action) bool {
	if r.Resource.Type != a.Type {
		return false
	}
	if host := r.Host; host != "" && host != WildcardHost && host != a.Host {
		return false
	}
	if a.Type == v1alpha1.ACLCluster {
		return true
	}
	switch r.Resource.PatternType {
	case v1alpha1.ACLPrefix:
		return r.Resource.Name != "" && strings.HasPrefix(a.Name, r.Resource.Name)
	default: // literal (the API's default)
		return r.Resource.Name == a.Name || r.Resource.Name == WildcardName
	}
}

// implying are the operations an ALLOW of which allows op: op itself, and for DESCRIBE also
// READ, WRITE, DELETE and ALTER, for DESCRIBE_CONFIGS also ALTER_CONFIGS (Apache's implied
// operations).
func implying(op v1alpha1.ACLOperation) []v1alpha1.ACLOperation {
	switch op {
	case OpDescribe:
		return []v1alpha1.ACLOperation{OpDescribe, OpRead, OpWrite, OpDelete, OpAlter}
	case OpDescribeConfigs:
		return []v1alpha1.ACLOperation{OpDescribeConfigs, OpAlterConfigs}
	}
	return []v1alpha1.ACLOperation{op}
}

// grants says whether a rule naming ops covers any of wanted (ALL covers every one).
func grants(ops, wanted []v1alpha1.ACLOperation) bool {
	for _, op := range ops {
		if op == OpAll || slices.Contains(wanted, op) {
			return true
		}
	}
	return false
}

// The operations, as the API spells them.
const (
	OpAll             v1alpha1.ACLOperation = "All"
	OpRead            v1alpha1.ACLOperation = "Read"
	OpWrite           v1alpha1.ACLOperation = "Write"
	OpCreate          v1alpha1.ACLOperation = "Create"
	OpDelete          v1alpha1.ACLOperation = "Delete"
	OpAlter           v1alpha1.ACLOperation = "Alter"
	OpDescribe        v1alpha1.ACLOperation = "Describe"
	OpClusterAction   v1alpha1.ACLOperation = "ClusterAction"
	OpDescribeConfigs v1alpha1.ACLOperation = "DescribeConfigs"
	OpAlterConfigs    v1alpha1.ACLOperation = "AlterConfigs"
	OpIdempotentWrite v1alpha1.ACLOperation = "IdempotentWrite"
)
