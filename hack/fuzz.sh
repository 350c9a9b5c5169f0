#!/usr/bin/env bash
# Runs every Go fuzz target in the module for a bounded time ($1, default 20s) each, on top of
# its committed seed corpus (testdata/fuzz/<Target>/). `go test` already replays the corpus
# as ordinary tests; this adds fresh coverage-guided inputs on every `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-20s}
found=0
while IFS=: read -r file _ line; do
	target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]+)\(.*/\1/' <<<"$line")
	pkg="./$(dirname "$file")"
	found=1
	echo "fuzz: $target in $pkg for $fuzztime"
	go test -run='^$' -fuzz="^${target}\$" -fuzztime="$fuzztime" "$pkg"
done < <(git grep -n -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' -- '*_test.go' || true)
[ "$found" -eq 1 ] || echo "fuzz: no fuzz targets yet"
