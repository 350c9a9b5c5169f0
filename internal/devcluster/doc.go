// Package devcluster is `paddock dev`: it starts a real Kubernetes control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) on this machine, installs the
// operator from the repository's kustomize config (what dist/install.yaml holds), and plays
// the kubelet for every pod — the manager Deployment's and the brokers' — by running them as
// local processes.
//
// Everything runs in a private network namespace where pods get 198.18.x.y addresses, not the
// 127.0.x.y the issue first proposed: the apiserver rejects loopback addresses in
// EndpointSlices, and the registry is built on EndpointSlices (netns.go says more).
// .paddock/dev/shell enters that namespace from another terminal. The host's terminal reaches
// it without entering: the process left in the host's network hands the environment host
// sockets over the host link (hostlink.go), and the service proxy (proxy.go), playing
// kube-proxy, forwards the apiserver and every nodePort from a host loopback address and
// makes ClusterIPs answer inside. The host link must never be inherited by a pod process.
//
// Pods get their ServiceAccount's identity as from a kubelet: a bound token from the
// TokenRequest API, with the CA and namespace, at the in-cluster paths of their own mount
// namespace (projected.go, sandbox.go). Only paddock dev's own process — control plane, node
// agents, tests — may use the admin credentials; a pod process must never be given them, and
// a pod whose sandbox cannot be made must fail to start rather than run with them.
//
// It is a development and test harness. Nothing in the operator or the broker may import it,
// and it imports neither: it runs them as processes.
package devcluster
