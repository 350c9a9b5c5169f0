// Package groups is the consumer-group interop suite: real Kafka group consumers (franz-go
// with the cooperative-sticky and range balancers, sarama's ConsumerGroup, segmentio
// kafka-go's Reader with a GroupID, kcat -G) and admin clients (kadm, sarama ClusterAdmin)
// against paddock brokers run in-process on informer views of a real kube-apiserver
// (envtest, the test/kubebrokers harness), with the real assignment reconciler keeping the
// coordinator epoch the brokers' group coordinators follow.
//
// It must never skip: missing Kubernetes binaries or kcat fail it.
package groups
