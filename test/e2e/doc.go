// Package e2e is the end-to-end suite: it starts a whole `paddock dev` environment in-process
// (real etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the operator, broker
// processes run by the node agent) inside a private network namespace, and checks the fencing
// scenarios the way a user would: Kubernetes reads, franz-go (Metadata, DescribeCluster v2,
// FindCoordinator) and kcat. It prints every measured delay in a summary table.
//
// It must never skip: a missing kcat or missing Kubernetes binaries fail the suite.
package e2e
