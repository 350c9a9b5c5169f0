// Package topics is the topics interop suite: real Kafka admin clients (franz-go kadm, sarama
// ClusterAdmin, kcat, a kgo producer) against paddock brokers run in-process on informer
// views of a real kube-apiserver (envtest), with the real assignment and provisioning
// reconcilers placing leaders and writing the broker Role. The brokers reach the API server as
// their own ServiceAccount (impersonated), so every admin write also proves the Role grants
// it. The registry is hand-made: each test writes the rows of its brokers.
//
// It must never skip: missing Kubernetes binaries or kcat fail it.
package topics
