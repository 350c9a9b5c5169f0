package topicname

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxLength is the longest Kafka topic name (Apache's Topic.MAX_NAME_LENGTH).
const MaxLength = 249

// Validate applies Kafka's topic name rules (Apache Topic.validate): 1 to 249 ASCII
// alphanumerics, '.', '_' and '-', and neither "." nor "..". The error says which rule failed,
// in the words Apache's InvalidTopicException uses.
func Validate(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("topic name is invalid: the empty string is not allowed")
	case name == ".":
		return fmt.Errorf("topic name is invalid: '.' is not allowed")
	case name == "..":
		return fmt.Errorf("topic name is invalid: '..' is not allowed")
	case len(name) > MaxLength:
		return fmt.Errorf("topic name is invalid: the length of '%s' is longer than the max allowed length %d", name, MaxLength)
	}
	for i := 0; i < len(name); i++ {
		if !legal(name[i]) {
			return fmt.Errorf("topic name is invalid: '%s' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'", name)
		}
	}
	return nil
}

func legal(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Kafka's internal topics (Apache's Topic.GROUP_METADATA_TOPIC_NAME and
// TRANSACTION_STATE_TOPIC_NAME). Their names are reserved: the broker serves them itself
// (docs/wire.md, "Internal topics"), and no KafkaTopic is ever served under them.
const (
	ConsumerOffsets  = "__consumer_offsets"
	TransactionState = "__transaction_state"
)

// IsInternal reports whether name is one of Kafka's internal topics (Apache Topic.isInternal).
func IsInternal(name string) bool { return name == ConsumerOffsets || name == TransactionState }

// CollisionKey is name with every '.' turned into '_'. Kafka refuses a topic whose key equals
// another topic's (metric names cannot tell them apart).
func CollisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// hashLen is how many hex digits of the name's SHA-256 an object name carries: 40 bits, so
// two Kafka names of one namespace share an object name only by a 1-in-10^12 accident (and
// then the create fails with AlreadyExists rather than serve the wrong topic).
const hashLen = 10

// maxPrefix keeps prefix + "-" + hash within the 253 characters of an object name.
const maxPrefix = validation.DNS1123SubdomainMaxLength - 1 - hashLen

// ObjectNameIn is the KafkaTopic object name a broker of cluster gives the Kafka topic name
// (which must be valid) when a Kafka client creates it: "<cluster>.<name>" when that is a
// valid object name (a DNS-1123 subdomain), otherwise "<cluster>." followed by a sanitized
// prefix of name, '-' and the first 10 hex digits of name's SHA-256 — "Orders_V2" of cluster
// "prod" is "prod.orders-v2-<hash>". The cluster comes first, so two clusters of one
// namespace never derive the same object name for any topic: a cluster's name is a DNS label
// (its Services carry it), which has no '.', so the first '.' always ends it. Every broker of
// a cluster derives the same name, so two brokers creating one topic at once collide on it
// instead of creating two (docs/topics.md, "Names").
func ObjectNameIn(cluster, name string) string {
	if candidate := cluster + "." + name; len(validation.IsDNS1123Subdomain(candidate)) == 0 {
		return candidate
	}
	sum := sha256.Sum256([]byte(name))
	return cluster + "." + sanitize(name, maxPrefix-len(cluster)-1) + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// ObjectName is the KafkaTopic object name for Kafka name name (which must be valid): the
// name itself when it is a valid object name (a DNS-1123 subdomain: lower case alphanumerics,
// '-' and '.', starting and ending alphanumeric), otherwise a sanitized prefix, '-' and the
// first 10 hex digits of the name's SHA-256. "Orders" and "orders" therefore get different
// objects ("orders-<hash>" and "orders"), and every broker derives the same name, so two
// brokers creating one topic at once collide on the object name instead of creating two.
//
// It is the mapping of the brokers of paddock 0.1, which two clusters of one namespace share
// (both map "orders" to "orders"): the brokers move to ObjectNameIn (docs/topics.md, "Names",
// says how objects named either way keep being found).
func ObjectName(name string) string {
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return sanitize(name, maxPrefix) + "-" + hex.EncodeToString(sum[:])[:hashLen]
}

// sanitize lowercases name, turns every character an object name cannot have into '-',
// collapses runs of non-alphanumerics to one '-', and trims them from both ends so the result
// is a valid prefix of at most limit characters; "topic" when nothing is left.
func sanitize(name string, limit int) string {
	var b strings.Builder
	lastDash := true // suppresses a leading separator
	for i := 0; i < len(name) && b.Len() < limit; i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			b.WriteByte(c - 'A' + 'a')
			lastDash = false
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			b.WriteByte(c)
			lastDash = false
		case !lastDash:
			b.WriteByte('-')
			lastDash = true
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" {
		return "topic"
	}
	return s
}

// Claim is one KafkaTopic's claim on a Kafka name.
type Claim struct {
	// Object is the KafkaTopic object name (unique in the namespace).
	Object string
	// Name is the Kafka name it asks for.
	Name string
	// Created is the object's creationTimestamp.
	Created time.Time
}

// Conflicts decides which claims are served when several claim one Kafka name, or names that
// collide ('.' against '_'): the oldest claim (earliest Created, then lowest Object) of each
// collision class is served, and every other one yields to it. The result maps each yielding
// Object to the Object it yields to; served claims are absent. Leave out topics being deleted:
// they are served by nobody, and the next claim in line takes over.
//
// Operator and brokers both call it on the same objects, so they agree on which KafkaTopic a
// Kafka name means without talking to each other.
func Conflicts(claims []Claim) map[string]string {
	byKey := map[string][]Claim{}
	for _, c := range claims {
		k := CollisionKey(c.Name)
		byKey[k] = append(byKey[k], c)
	}
	out := map[string]string{}
	for _, group := range byKey {
		if len(group) < 2 {
			continue
		}
		first := slices.MinFunc(group, older)
		for _, c := range group {
			if c.Object != first.Object {
				out[c.Object] = first.Object
			}
		}
	}
	return out
}

// older orders claims by age, then by object name.
func older(a, b Claim) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.Object, b.Object)
}
