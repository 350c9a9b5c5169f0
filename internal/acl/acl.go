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

// AllowedOnAny decides Apache's authorizeByResourceType: may principal, connected from host,
// perform op on at least one resource of type typ? True for a super user; false when a
// matching DENY covers every name (a literal "*"); else true when some matching ALLOW (of op
// or All) names a resource that no matching DENY covers: a literal name no literal DENY of
// the same name and no prefix DENY covers, or a prefix no shorter-or-equal prefix DENY
// covers. InitProducerId without a transactional id asks it for WRITE on topics.
func (z *Authorizer) AllowedOnAny(principal, host string, typ v1alpha1.ACLResourceType, op v1alpha1.ACLOperation) bool {
	if slices.Contains(z.SuperUsers, principal) {
		return true
	}
	var allows []v1alpha1.ACLResource
	deniedNames := map[string]bool{}
	var deniedPrefixes []string
	for _, p := range []string{principal, WildcardPrincipal} {
		for _, r := range z.Rules[p] {
			if r.Resource.Type != typ || !grants(r.Operations, []v1alpha1.ACLOperation{op}) {
				continue
			}
			if h := r.Host; h != "" && h != WildcardHost && h != host {
				continue
			}
			switch {
			case r.Type != v1alpha1.ACLDeny:
				allows = append(allows, r.Resource)
			case r.Resource.PatternType == v1alpha1.ACLPrefix:
				deniedPrefixes = append(deniedPrefixes, r.Resource.Name)
			default:
				deniedNames[r.Resource.Name] = true
			}
		}
		if principal == WildcardPrincipal {
			break
		}
	}
	if deniedNames[WildcardName] {
		return false
	}
	for _, a := range allows {
		if a.PatternType != v1alpha1.ACLPrefix && deniedNames[a.Name] {
			continue
		}
		if !slices.ContainsFunc(deniedPrefixes, func(p string) bool { return strings.HasPrefix(a.Name, p) }) {
			return true
		}
	}
	return false
}

// Kafka's wire codes of the ACL model (AclOperation, ResourceType, PatternType,
// AclPermissionType), for DescribeAcls and the authorized-operations bitfields.
var (
	operationCodes = map[v1alpha1.ACLOperation]int8{
		OpAll: 2, OpRead: 3, OpWrite: 4, OpCreate: 5, OpDelete: 6, OpAlter: 7, OpDescribe: 8,
		OpClusterAction: 9, OpDescribeConfigs: 10, OpAlterConfigs: 11, OpIdempotentWrite: 12,
	}
	resourceTypeCodes = map[v1alpha1.ACLResourceType]int8{
		v1alpha1.ACLTopic: 2, v1alpha1.ACLGroup: 3, v1alpha1.ACLCluster: 4, v1alpha1.ACLTransactionalID: 5,
	}
)

// Wire codes of the pattern and permission types.
const (
	PatternLiteral  int8 = 3
	PatternPrefixed int8 = 4
	PermissionDeny  int8 = 2
	PermissionAllow int8 = 3
)

// ClusterName is the one cluster resource's name on the wire.
const ClusterName = "kafka-cluster"

// OperationCode is op's AclOperation code (0, UNKNOWN, for none).
func OperationCode(op v1alpha1.ACLOperation) int8 { return operationCodes[op] }

// ResourceTypeCode is typ's ResourceType code (0, UNKNOWN, for none).
func ResourceTypeCode(typ v1alpha1.ACLResourceType) int8 { return resourceTypeCodes[typ] }

// Operations are the operations Kafka defines for a resource type (Apache's
// AclEntry.supportedOperations): the bits of an authorized-operations field.
func Operations(typ v1alpha1.ACLResourceType) []v1alpha1.ACLOperation {
	switch typ {
	case v1alpha1.ACLTopic:
		return []v1alpha1.ACLOperation{OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe, OpDescribeConfigs, OpAlterConfigs}
	case v1alpha1.ACLGroup:
		return []v1alpha1.ACLOperation{OpRead, OpDelete, OpDescribe}
	case v1alpha1.ACLCluster:
		return []v1alpha1.ACLOperation{OpCreate, OpAlter, OpDescribe, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite}
	case v1alpha1.ACLTransactionalID:
		return []v1alpha1.ACLOperation{OpWrite, OpDescribe}
	}
	return nil
}

// AuthorizedOperations is the authorized-operations bitfield (bit n: AclOperation n) of the
// resource of typ called name for principal at host.
func (z *Authorizer) AuthorizedOperations(principal, host string, typ v1alpha1.ACLResourceType, name string) int32 {
	var bits int32
	for _, op := range Operations(typ) {
		if z.Allowed(Action{Principal: principal, Host: host, Type: typ, Name: name, Operation: op}) {
			bits |= 1 << OperationCode(op)
		}
	}
	return bits
}
