// Package interop is the data-plane interop suite: real Kafka clients of other ecosystems —
// sarama (sync and async producers, a partition consumer), segmentio/kafka-go (a Writer and a
// partition Reader), kcat (librdkafka; -P and -C) and kafkajs (node; js/) — each writing its
// own records through paddock brokers and reading them back byte-exact (keys, values,
// headers). franz-go's own tests are in broker/ (produce_test.go). security_test.go runs
// franz-go, sarama and kcat over TLS with SCRAM-SHA-512, SCRAM-SHA-256, PLAIN and mutual TLS
// against clusters whose certificates the real certificates reconciler issues, and has each
// refused with bad credentials.
//
// The brokers run in-process on informer views of a real kube-apiserver (envtest) with the
// real assignment and provisioning reconcilers, as the broker ServiceAccount (impersonated),
// on one shared data directory: test/kubebrokers, the harness test/topics and test/groups
// share. Each test has its own two-broker cluster.
//
// It must never skip: missing Kubernetes binaries, kcat, node or kafkajs fail it (`make
// interop` installs kcat and kafkajs; `make kafkajs` runs hack/install-kafkajs.sh, npm ci from
// js/package-lock.json).
package interop
