#!/usr/bin/env bash
# `make test-under-load`: runs `make $LOAD_TARGETS` (default: test) $LOAD_PASSES times in a row
# (default 3) beside hack/cpuhog, which keeps every core busy, and ends with one summary of
# all passes: each pass's status and time, every failed test by pass, package and name, and
# the slowest tests. A test that bounds wall time tighter than its behaviour needs fails here
# first. Exits non-zero when any pass failed.
set -uo pipefail
cd "$(dirname "$0")/.."
passes=${LOAD_PASSES:-3}
targets=${LOAD_TARGETS:-test}
results=${LOAD_RESULTS:-bin/test-under-load}
rm -rf "$results" && mkdir -p "$results"
go build -o bin/cpuhog ./hack/cpuhog || exit 1
GOMAXPROCS=$(nproc) bin/cpuhog >"$results/cpuhog.log" 2>&1 &
hog=$!
trap 'kill "$hog" 2>/dev/null; wait "$hog" 2>/dev/null' EXIT
sleep 1
cat "$results/cpuhog.log"

declare -a status took
for i in $(seq 1 "$passes"); do
	echo "test-under-load: pass $i of $passes: make $targets, beside cpuhog on $(nproc) cores"
	start=$SECONDS
	# shellcheck disable=SC2086 # LOAD_TARGETS is a list of make targets
	make --no-print-directory $targets TEST_RESULTS="$PWD/$results/pass-$i"
	status[i]=$?
	took[i]=$((SECONDS - start))
done
kill "$hog" && wait "$hog"
trap - EXIT

echo
echo "=== test-under-load: $passes passes of make $targets beside cpuhog ($(tail -1 "$results/cpuhog.log" | sed 's/^cpuhog: //'))"
failed=0
for i in $(seq 1 "$passes"); do
	verdict=passed
	if [ "${status[i]}" -ne 0 ]; then verdict="FAILED (exit ${status[i]})" failed=1; fi
	printf 'pass %d: %s in %dm%02ds\n' "$i" "$verdict" $((took[i] / 60)) $((took[i] % 60))
done
go run ./hack/testsummary -slowest 15 "$results"/pass-*
exit "$failed"
