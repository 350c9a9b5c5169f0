// Package devcluster is `paddock dev`: it starts a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) on this machine, runs the operator,
// and plays the kubelet for broker pods by running them as local processes.
//
// Everything runs in a private network namespace where pods get 198.18.x.y addresses, not the
// 127.0.x.y the issue first proposed: the apiserver rejects loopback addresses in
// EndpointSlices, and the registry is built on EndpointSlices (netns.go says more).
// .paddock/dev/shell enters that namespace from another terminal.
//
// It is a development and test harness. Nothing in the operator or the broker may import it.
package devcluster
