#!/usr/bin/env bash
# Builds the control-plane binaries paddock's tests and `paddock dev` run — etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler — from source through the Go module
# proxy, into bin/k8s/<version>/. No Docker, no download sites: only `go build`.
#
# Idempotent: a binary already present is left alone, so a warm run costs nothing and prints
# nothing. Prints the directory (usable as KUBEBUILDER_ASSETS) on stdout; progress goes to
# stderr: a line when a binary starts building and one with its time and size when it is done
# (on a terminal the first line counts the seconds while it builds).
#
# `hack/k8s-bins.sh kubectl` builds only kubectl, the same version, into bin/kubectl-v<version>
# (the e2e suite runs it from the host's network), links bin/kubectl to it (the command
# `paddock dev` tells people to type once .paddock/dev/env put bin/ on their PATH) and prints
# its path.
#
# `hack/k8s-bins.sh coredns` builds only the cluster DNS of `paddock dev` — CoreDNS with the
# plugins hack/coredns/main.go names — into bin/coredns-v<version> and prints its path.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=$(grep -oE "k8s.io/kubernetes v[0-9.]+" "$root/hack/k8s-bins/go.mod" | head -1 | cut -dv -f2)
COREDNS_VERSION=$(grep -oE "github.com/coredns/coredns v[0-9.]+" "$root/hack/coredns/go.mod" | head -1 | cut -dv -f2)
ETCD_VERSION=$(grep -oE "go.etcd.io/etcd/server/v3 v[0-9.]+" "$root/hack/etcd/go.mod" | head -1 | cut -d" " -f2)
out="$root/bin/k8s/$K8S_VERSION"
mkdir -p "$out"

export CGO_ENABLED=0 GOFLAGS=-mod=readonly
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=${K8S_VERSION%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2) -X k8s.io/component-base/version.gitTreeState=clean"

# step is "<n> of <missing> " while several binaries are built in one run, for the lines below.
step=""

build() { # build <module dir> <output name> <package> <ldflags>
	local dir=$1 name=$2 pkg=$3 flags=$4
	if [ -x "$out/$name" ]; then return 0; fi
	echo "k8s-bins: building ${step}$name ($pkg) into $out" >&2
	local start=$SECONDS
	(cd "$root/hack/$dir" && go build -trimpath -ldflags "$flags" -o "$out/$name.tmp" "$pkg") &
	local pid=$!
	if [ -t 2 ]; then
		while kill -0 "$pid" 2>/dev/null; do
			printf '\r  %s: %ds ' "$name" $((SECONDS - start)) >&2
			sleep 1
		done
		printf '\r\033[K' >&2
	fi
	if ! wait "$pid"; then
		echo "k8s-bins: building $name failed after $((SECONDS - start))s (go build's error is above)" >&2
		exit 1
	fi
	mv "$out/$name.tmp" "$out/$name"
	echo "k8s-bins: $name built in $((SECONDS - start))s ($(($(stat -c %s "$out/$name") / 1000000)) MB)" >&2
}

if [ "${1:-}" = kubectl ]; then
	out="$root/bin"
	build k8s-bins "kubectl-v$K8S_VERSION" k8s.io/kubernetes/cmd/kubectl "$ldflags"
	ln -sfn "kubectl-v$K8S_VERSION" "$out/kubectl"
	echo "$out/kubectl-v$K8S_VERSION"
	exit 0
fi

if [ "${1:-}" = coredns ]; then
	out="$root/bin"
	build coredns "coredns-v$COREDNS_VERSION" . "-s -w"
	echo "$out/coredns-v$COREDNS_VERSION"
	exit 0
fi

missing=0
for name in etcd kube-apiserver kube-controller-manager kube-scheduler; do
	[ -x "$out/$name" ] || missing=$((missing + 1))
done
if [ "$missing" -gt 0 ]; then
	echo "k8s-bins: $missing control-plane binaries to build from source into $out; the first time (empty Go build cache) this takes about 5 minutes on an idle 2-core machine, later runs reuse them" >&2
fi
started=$SECONDS
n=0
next() { # next <name>: count the binary if it is to be built
	if [ ! -x "$out/$1" ]; then n=$((n + 1)); step="$n of $missing: "; fi
}
next etcd && build etcd etcd go.etcd.io/etcd/server/v3 "-s -w"
next kube-apiserver && build k8s-bins kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
next kube-controller-manager && build k8s-bins kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
next kube-scheduler && build k8s-bins kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"
echo "$ETCD_VERSION" >"$out/etcd.version"
if [ "$missing" -gt 0 ]; then
	echo "k8s-bins: $missing control-plane binaries built in $((SECONDS - started))s" >&2
fi
echo "$out"
