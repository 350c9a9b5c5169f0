#!/usr/bin/env bash
# Enforces the import rules of docs/architecture.md ("Import rules") over `go list -deps`: each
# package's transitive imports, not only the ones its files name, so a rule cannot be dodged
# through a helper package. Fails listing every violation.
#
#   api/...                      imports no other paddock package
#   internal/{registry,coordinator,balance,topicname,kafkaconfig,install}/...
#                                pure rules: no paddock package but api/...
#   broker/...                   never controllers/...
#   controllers/...              never broker/...
#   broker/storage/..., broker/groups/...
#                                no Kubernetes (k8s.io/, sigs.k8s.io/; k8s.io/utils/clock, a clock
#                                seam with no API code, is allowed) and no other broker package,
#                                except that broker/groups uses broker/storage (its fence and FS)
#
# A rule whose packages do not exist yet (internal/balance, broker/storage, broker/groups while
# they are being built) holds vacuously.
set -euo pipefail
cd "$(dirname "$0")/.."
mod=$(go list -m)

# One line per package of the module: its import path, then every package it depends on.
go list -deps=false -f '{{.ImportPath}}{{range .Deps}} {{.}}{{end}}' ./... | awk -v mod="$mod" '
function under(p, dir) { return p == mod "/" dir || index(p, mod "/" dir "/") == 1 }
function ours(p) { return p == mod || index(p, mod "/") == 1 }
function bad(pkg, dep, rule) { printf "verify-imports: %s imports %s: %s\n", pkg, dep, rule; failed = 1 }
{
	pkg = $1
	for (i = 2; i <= NF; i++) {
		dep = $i
		if (under(pkg, "api") && ours(dep) && !under(dep, "api"))
			bad(pkg, dep, "api/ imports no other paddock package")
		if ((under(pkg, "internal/registry") || under(pkg, "internal/coordinator") || under(pkg, "internal/balance") || under(pkg, "internal/topicname") || under(pkg, "internal/kafkaconfig") || under(pkg, "internal/install")) && ours(dep) && !under(dep, "api"))
			bad(pkg, dep, "a pure rule package imports api/ at most")
		if (under(pkg, "broker") && under(dep, "controllers"))
			bad(pkg, dep, "the broker never imports controllers/")
		if (under(pkg, "controllers") && under(dep, "broker"))
			bad(pkg, dep, "controllers/ never import the broker")
		if (under(pkg, "broker/storage") || under(pkg, "broker/groups")) {
			own = under(pkg, "broker/storage") ? "broker/storage" : "broker/groups"
			if (dep ~ /^(k8s\.io|sigs\.k8s\.io)\// && dep !~ /^k8s\.io\/utils\/clock(\/|$)/)
				bad(pkg, dep, own " holds no Kubernetes code")
			if (under(dep, "broker") && !under(dep, own) && !(own == "broker/groups" && under(dep, "broker/storage")))
				bad(pkg, dep, own " imports no other broker package")
		}
	}
	n++
}
END {
	if (n == 0) { print "verify-imports: go list returned no packages"; exit 1 }
	if (failed) { print "verify-imports: import rules broken (docs/architecture.md, \"Import rules\")"; exit 1 }
	printf "verify-imports: %d packages follow the import rules\n", n
}'
