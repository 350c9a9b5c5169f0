//go:build tools

// Package tools pins the etcd server built by hack/k8s-bins.sh.
package tools

import _ "go.etcd.io/etcd/server/v3"
