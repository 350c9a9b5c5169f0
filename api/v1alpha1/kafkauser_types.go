package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UserAuthenticationType is how a KafkaUser authenticates.
// +kubebuilder:validation:Enum=scram-sha-512;tls
type UserAuthenticationType string

const (
	// UserScramSHA512: a password (generated, or the user's), usable with every SASL
	// listener (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN).
	UserScramSHA512 UserAuthenticationType = "scram-sha-512"
	// UserTLS: a client certificate CN=<name> from the clients CA, for mutual-TLS listeners.
	UserTLS UserAuthenticationType = "tls"
)

// SecretKeyRef names one key of a Secret in the KafkaUser's namespace.
type SecretKeyRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// PasswordSource is where a scram user's password comes from instead of being generated.
type PasswordSource struct {
	// secretKeyRef is the Secret key holding the password.
	// +required
	SecretKeyRef SecretKeyRef `json:"secretKeyRef"`
}

// ScramCredential is one mechanism's salted SCRAM credential (RFC 5802): what a broker checks
// a client's proof against. It is not a password, nor enough to authenticate with.
type ScramCredential struct {
	// iterations of the salting.
	// +required
	// +kubebuilder:validation:Minimum=4096
	// +kubebuilder:validation:Maximum=16384
	Iterations int32 `json:"iterations"`
	// salt the password was salted with.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Salt []byte `json:"salt"`
	// storedKey is H(HMAC(SaltedPassword, "Client Key")).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	StoredKey []byte `json:"storedKey"`
	// serverKey is HMAC(SaltedPassword, "Server Key").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ServerKey []byte `json:"serverKey"`
}

// ScramCredentials are a scram user's salted credentials set through Kafka's
// AlterUserScramCredentials, per mechanism; a mechanism left out has no credential.
type ScramCredentials struct {
	// scramSha256 is the SCRAM-SHA-256 credential.
	// +optional
	SHA256 *ScramCredential `json:"scramSha256,omitempty"`
	// scramSha512 is the SCRAM-SHA-512 credential (PLAIN listeners check this one).
	// +optional
	SHA512 *ScramCredential `json:"scramSha512,omitempty"`
}

// UserAuthentication is how a KafkaUser proves who it is.
// +kubebuilder:validation:XValidation:rule="!has(self.scramCredentials) || (self.type == 'scram-sha-512' && !has(self.password))",message="scramCredentials are for a scram-sha-512 user without a password Secret"
type UserAuthentication struct {
	// type is scram-sha-512 (a password) or tls (a client certificate).
	// +required
	Type UserAuthenticationType `json:"type"`
	// password, for scram-sha-512, takes the password from a Secret instead of generating
	// one.
	// +optional
	Password *PasswordSource `json:"password,omitempty"`
	// scramCredentials, for scram-sha-512, are salted credentials set through Kafka's
	// AlterUserScramCredentials (the brokers write them: the client salts its password, the
	// broker derives the keys): when set, the user's SCRAM credentials are exactly these —
	// no password is generated, read or kept in a Secret — and the operator copies them to
	// the cluster's credentials Secret. Never a password.
	// +optional
	ScramCredentials *ScramCredentials `json:"scramCredentials,omitempty"`
}

// ACLResourceType is the kind of resource an ACL rule covers.
// +kubebuilder:validation:Enum=topic;group;cluster;transactionalId
type ACLResourceType string

// ACL resource types.
const (
	ACLTopic           ACLResourceType = "topic"
	ACLGroup           ACLResourceType = "group"
	ACLCluster         ACLResourceType = "cluster"
	ACLTransactionalID ACLResourceType = "transactionalId"
)

// ACLPatternType says how an ACL rule's name matches.
// +kubebuilder:validation:Enum=literal;prefix
type ACLPatternType string

// ACL pattern types.
const (
	ACLLiteral ACLPatternType = "literal"
	ACLPrefix  ACLPatternType = "prefix"
)

// ACLOperation is a Kafka operation.
// +kubebuilder:validation:Enum=All;Read;Write;Create;Delete;Alter;Describe;ClusterAction;DescribeConfigs;AlterConfigs;IdempotentWrite
type ACLOperation string

// ACLPermission allows or denies.
// +kubebuilder:validation:Enum=allow;deny
type ACLPermission string

// ACL permissions.
const (
	ACLAllow ACLPermission = "allow"
	ACLDeny  ACLPermission = "deny"
)

// ACLResource is what an ACL rule covers.
// +kubebuilder:validation:XValidation:rule="self.type == 'cluster' || (has(self.name) && size(self.name) > 0)",message="a topic, group or transactionalId rule needs a name"
type ACLResource struct {
	// type is topic, group, cluster or transactionalId.
	// +required
	Type ACLResourceType `json:"type"`
	// name of the resource ("*" for all); ignored for cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Name string `json:"name,omitempty"`
	// patternType is literal (the name, or "*") or prefix (every name starting with it).
	// +optional
	// +kubebuilder:default=literal
	PatternType ACLPatternType `json:"patternType,omitempty"`
}

// ACLRule is one ACL of a KafkaUser's principal.
type ACLRule struct {
	// type is allow or deny; a matching deny beats every allow.
	// +optional
	// +kubebuilder:default=allow
	Type ACLPermission `json:"type,omitempty"`
	// resource the rule covers.
	// +required
	Resource ACLResource `json:"resource"`
	// operations the rule allows or denies.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=11
	Operations []ACLOperation `json:"operations"`
	// host the rule applies to connections from ("*" for any).
	// +optional
	// +kubebuilder:default="*"
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host,omitempty"`
}

// UserAuthorization lists a KafkaUser's ACLs.
type UserAuthorization struct {
	// type is simple (Apache's ACL authorizer).
	// +optional
	// +kubebuilder:default=simple
	Type AuthorizationType `json:"type,omitempty"`
	// acls of the user's principal.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	ACLs []ACLRule `json:"acls,omitempty"`
}

// UserQuotas bound what one user may cost a broker.
type UserQuotas struct {
	// producerByteRate is the most bytes a second the user may produce to one broker.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ProducerByteRate *int64 `json:"producerByteRate,omitempty"`
	// consumerByteRate is the most bytes a second the user may fetch from one broker.
	// +optional
	// +kubebuilder:validation:Minimum=1
	ConsumerByteRate *int64 `json:"consumerByteRate,omitempty"`
	// requestPercentage is the most of one request thread's time the user may take, in
	// percent.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	RequestPercentage *int32 `json:"requestPercentage,omitempty"`
}

// KafkaUserSpec is a principal of one cluster: how it authenticates, what it may do, what it
// may cost.
type KafkaUserSpec struct {
	// cluster is the name of the KafkaCluster (same namespace) the user belongs to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="cluster is immutable"
	Cluster string `json:"cluster"`
	// authentication is how the user proves who it is; without it the user is only ACLs
	// (for a principal authenticated elsewhere).
	// +optional
	Authentication *UserAuthentication `json:"authentication,omitempty"`
	// authorization lists the user's ACLs.
	// +optional
	Authorization *UserAuthorization `json:"authorization,omitempty"`
	// quotas bound the user's produce and fetch rates and request time per broker.
	// +optional
	Quotas *UserQuotas `json:"quotas,omitempty"`
}

// KafkaUserStatus is what the operator made for the user.
type KafkaUserStatus struct {
	// observedGeneration is the spec generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions are Ready (credentials issued and the user known to the brokers) and
	// Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// principal is the Kafka principal ACLs name: User:<name>, or User:CN=<name> for tls.
	// +optional
	Principal string `json:"principal,omitempty"`
	// secret is the Secret holding the user's password or certificate.
	// +optional
	Secret string `json:"secret,omitempty"`
	// acls is the number of ACL rules.
	// +optional
	ACLs int32 `json:"acls,omitempty"`
}

// KafkaUser is a principal of a KafkaCluster: its credentials, ACLs and quotas.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pku,categories={paddock,kafka}
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Authentication",type=string,JSONPath=`.spec.authentication.type`
// +kubebuilder:printcolumn:name="ACLs",type=integer,JSONPath=`.status.acls`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Principal",type=string,JSONPath=`.status.principal`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Kafka User",resources={{KafkaCluster,v1alpha1,<spec.cluster>},{Secret,v1,<user>}}
type KafkaUser struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the user.
	// +required
	Spec KafkaUserSpec `json:"spec"`

	// status is what the operator made for it.
	// +optional
	Status KafkaUserStatus `json:"status,omitempty"`
}

// KafkaUserList is a list of KafkaUsers.
// +kubebuilder:object:root=true
type KafkaUserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaUser `json:"items"`
}

func init() {
	register(&KafkaUser{}, &KafkaUserList{})
}

// Principal is the Kafka principal of u (Strimzi's mapping): User:CN=<name> for a tls user,
// User:<name> otherwise.
func (u *KafkaUser) Principal() string {
	if u.Spec.Authentication != nil && u.Spec.Authentication.Type == UserTLS {
		return "User:CN=" + u.Name
	}
	return "User:" + u.Name
}
