// Package kafkaconfig is paddock's one table of Kafka configuration keys — topic keys
// (KafkaTopic spec.config, CreateTopics, AlterConfigs) and broker keys (KafkaCluster
// spec.config) — with each key's type, Apache Kafka 3.7 default, documentation and what
// paddock does with it; and the rules built on it: validating a config map, resolving a
// topic's effective values through its broker synonyms (topic value, else the cluster's,
// else Apache's default), and the values and sources DescribeConfigs reports.
//
// The operator validates with it (conditions), the brokers validate and answer with it, and
// broker/storage is fed from TopicConfig. It is pure: no client, no I/O. It must never
// import anything but the standard library.
package kafkaconfig
