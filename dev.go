//go:build !nodev

package main

import "github.com/paddock-dev/paddock/internal/devcluster"

// devCommand is `paddock dev`: this build carries the dev environment (internal/devcluster,
// with envtest's control-plane wiring and the kustomize library).
var devCommand = command{"dev", "run etcd, kube-apiserver, controllers, the operator and broker processes locally", devcluster.Main}
