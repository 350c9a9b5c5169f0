// Package devcluster is `paddock dev`: it starts a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) on this machine, runs the operator,
// and plays the kubelet for broker pods by running them as local processes.
//
// It is a development and test harness. Nothing in the operator or the broker may import it.
package devcluster
