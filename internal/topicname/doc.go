// Package topicname holds the rules about topic names that the operator and the brokers must
// apply identically: Kafka's name rules, the '.'/'_' collision, which of several KafkaTopics
// claiming one Kafka name is served, and the deterministic object name of a Kafka name that
// is no valid Kubernetes object name (docs/topics.md, "Names").
//
// It is pure: no client, no I/O, no clock. It must never import anything but the standard
// library and apimachinery's validation helpers.
package topicname
