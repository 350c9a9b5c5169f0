package v1alpha1

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
)

// KafkaName is the Kafka name of the topic: spec.topicName, or the object's name when that is
// empty. Every reader of a KafkaTopic (the assignment reconciler, the broker's view) takes the
// name from here.
func (t *KafkaTopic) KafkaName() string {
	if t.Spec.TopicName != "" {
		return t.Spec.TopicName
	}
	return t.Name
}

// KafkaUUID is a Kafka Uuid (a topic id, a cluster id): 16 bytes, written as unpadded
// base64url — 22 characters, as Kafka's tools print one. It is the form of KafkaTopic
// status.topicID and KafkaCluster status.clusterID. The zero KafkaUUID means "no id" to Kafka
// clients and is never minted. It is no API field (the API carries the string), so it has no
// generated deepcopy.
// +kubebuilder:object:generate=false
type KafkaUUID [16]byte

// NewKafkaUUID mints a KafkaUUID from random (crypto/rand.Reader in production): 16 random
// bytes, drawn again in the (astronomically unlikely) case they are all zero.
func NewKafkaUUID(random io.Reader) (KafkaUUID, error) {
	var u KafkaUUID
	for u.IsZero() {
		if _, err := io.ReadFull(random, u[:]); err != nil {
			return KafkaUUID{}, fmt.Errorf("read random bytes for a Kafka id: %w", err)
		}
	}
	return u, nil
}

// ParseKafkaUUID reads s as String writes it; trailing "=" padding is accepted too.
func ParseKafkaUUID(s string) (KafkaUUID, error) {
	var u KafkaUUID
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return KafkaUUID{}, fmt.Errorf("kafka id %q: %w", s, err)
	}
	if len(b) != len(u) {
		return KafkaUUID{}, fmt.Errorf("kafka id %q is %d bytes, want %d", s, len(b), len(u))
	}
	copy(u[:], b)
	return u, nil
}

// String is u as unpadded base64url.
func (u KafkaUUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// IsZero reports the zero id ("no id").
func (u KafkaUUID) IsZero() bool { return u == KafkaUUID{} }
