#!/usr/bin/env bash
# Builds the control-plane binaries paddock's tests and `paddock dev` run — etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler — from source through the Go module
# proxy, into bin/k8s/<version>/. No Docker, no download sites: only `go build`.
#
# Idempotent: a binary already present is left alone, so a warm run costs nothing.
# Prints the directory (usable as KUBEBUILDER_ASSETS) on stdout; progress goes to stderr.
#
# `hack/k8s-bins.sh kubectl` builds only kubectl, the same version, into bin/kubectl-v<version>
# (the e2e suite runs it from the host's network) and prints its path.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=$(grep -oE "k8s.io/kubernetes v[0-9.]+" "$root/hack/k8s-bins/go.mod" | head -1 | cut -dv -f2)
ETCD_VERSION=$(grep -oE "go.etcd.io/etcd/server/v3 v[0-9.]+" "$root/hack/etcd/go.mod" | head -1 | cut -d" " -f2)
out="$root/bin/k8s/$K8S_VERSION"
mkdir -p "$out"

export CGO_ENABLED=0 GOFLAGS=-mod=readonly
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"

build() { # build <module dir> <output name> <package> <ldflags>
	local dir=$1 name=$2 pkg=$3 flags=$4
	if [ -x "$out/$name" ]; then return 0; fi
	echo "k8s-bins: building $name ($pkg) into $out" >&2
	local start=$SECONDS
	(cd "$root/hack/$dir" && go build -trimpath -ldflags "$flags" -o "$out/$name.tmp" "$pkg")
	mv "$out/$name.tmp" "$out/$name"
	echo "k8s-bins: $name built in $((SECONDS - start))s" >&2
}

if [ "${1:-}" = kubectl ]; then
	out="$root/bin"
	build k8s-bins "kubectl-v$K8S_VERSION" k8s.io/kubernetes/cmd/kubectl "$ldflags"
	echo "$out/kubectl-v$K8S_VERSION"
	exit 0
fi

build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
build k8s-bins kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build k8s-bins kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build k8s-bins kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
echo "$ETCD_VERSION" >"$out/etcd.version"
echo "$out"
