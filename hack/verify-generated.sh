#!/usr/bin/env bash
# Fails when `make generate manifests` would change a generated file: it snapshots the
# generated files, regenerates them, and diffs. Works on a dirty tree too, so a developer can
# run it before committing; on drift the regenerated files are left in place.
set -euo pipefail
cd "$(dirname "$0")/.."

generated() { git ls-files --cached --others --exclude-standard -- 'config/crd/bases' 'config/rbac/role.yaml' 'config/rbac/cluster_role.yaml' 'config/helm/paddock/crds' 'config/helm/paddock/files' '*zz_generated*.go' 'bundle' 'bundle.Dockerfile'; }

snap=$(mktemp -d)
trap 'rm -rf "$snap"' EXIT
generated | while read -r f; do mkdir -p "$snap/$(dirname "$f")"; cp "$f" "$snap/$f"; done

make --no-print-directory -s generate manifests bundle >/dev/null

fail=0
while read -r f; do
	if [ ! -f "$snap/$f" ]; then echo "verify: $f is generated but was missing"; fail=1; continue; fi
	if ! diff -u "$snap/$f" "$f"; then echo "verify: $f was stale (regenerated now)"; fail=1; fi
done < <(generated)
for f in $(cd "$snap" && find . -type f | sed 's|^\./||'); do
	[ -f "$f" ] || { echo "verify: $f is no longer generated"; fail=1; }
done
if [ "$fail" -ne 0 ]; then
	echo "verify: generated files were out of date; run 'make generate manifests' and commit the result" >&2
	exit 1
fi
echo "verify: generated files are up to date"
