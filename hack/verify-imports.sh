#!/usr/bin/env bash
# Enforces the import rules of docs/architecture.md ("Import rules"). The rules are the rows of
# the table between the import-rules markers there: this script holds none of its own, so the
# document and the check cannot disagree. Each package of the module is checked against every
# row whose part names it, over its transitive dependencies (`go list -deps`: a rule cannot be
# dodged through a helper package) or its own import lines (reach "imports"). Fails listing
# every violation, and when the table cannot be read.
#
#   hack/verify-imports.sh [doc]    doc defaults to docs/architecture.md
set -euo pipefail
cd "$(dirname "$0")/.."
doc=${1:-docs/architecture.md}
mod=$(go list -m)

# The table's rows as "part|must not import|except|reach|why", backticks and padding removed.
rules=$(awk '
	/<!-- import-rules/ { inside = 1; next }
	/<!-- \/import-rules -->/ { inside = 0 }
	inside && /^\|/ && !/^\|[ -]*\|/ && !/^\| *part *\|/ {
		line = $0
		gsub(/`/, "", line)
		n = split(line, cell, "|")
		out = ""
		for (i = 2; i < n; i++) {
			c = cell[i]
			gsub(/^ +| +$/, "", c)
			out = out (i > 2 ? "|" : "") c
		}
		print out
	}' "$doc")
if [ -z "$rules" ]; then
	echo "verify-imports: no import-rules table in $doc" >&2
	exit 1
fi

# One line per package of the module: import path, its own imports, everything it depends on.
go list -deps=false -f '{{.ImportPath}}|{{join .Imports " "}}|{{join .Deps " "}}' ./... | RULES="$rules" awk -v mod="$mod" '
function ours(p) { return p == mod || index(p, mod "/") == 1 }
# matches reports whether import path p is named by pattern pat (see the table legend).
function matches(p, pat,   base, first) {
	if (pat == "./...") return ours(p)
	first = pat; sub(/\/.*/, "", first)
	base = (first ~ /\./) ? pat : mod "/" pat
	if (base ~ /\/\.\.\.$/) {
		base = substr(base, 1, length(base) - 4)
		return p == base || index(p, base "/") == 1
	}
	return p == base
}
# any reports whether p matches one of the comma-separated patterns in list.
function any(p, list,   k, n, pats, pat) {
	n = split(list, pats, ",")
	for (k = 1; k <= n; k++) {
		pat = pats[k]; gsub(/^ +| +$/, "", pat)
		if (pat != "" && matches(p, pat)) return 1
	}
	return 0
}
# inPart reports whether package p is in a part: a listed pattern names it and no "!" one does.
function inPart(p, list,   k, n, pats, pat, in_) {
	n = split(list, pats, ",")
	in_ = 0
	for (k = 1; k <= n; k++) {
		pat = pats[k]; gsub(/^ +| +$/, "", pat)
		if (pat ~ /^!/) { if (matches(p, substr(pat, 2))) return 0 }
		else if (matches(p, pat)) in_ = 1
	}
	return in_
}
BEGIN {
	nr = split(ENVIRON["RULES"], row, "\n")
	for (r = 1; r <= nr; r++) {
		if (split(row[r], f, "|") != 5 || f[1] == "" || f[2] == "" || (f[4] != "deps" && f[4] != "imports")) {
			printf "verify-imports: unreadable rule row %d: %s\n", r, row[r]; broken = 1
		}
		part[r] = f[1]; forbid[r] = f[2]; except[r] = f[3]; reach[r] = f[4]; why[r] = f[5]
	}
	FS = "|"
}
{
	pkg = $1
	for (r = 1; r <= nr; r++) {
		if (!inPart(pkg, part[r])) continue
		used[r] = 1
		n = split(reach[r] == "deps" ? $3 : $2, dep, " ")
		for (i = 1; i <= n; i++) {
			if (any(dep[i], forbid[r]) && !any(dep[i], except[r])) {
				printf "verify-imports: %s imports %s: %s\n", pkg, dep[i], why[r]; failed = 1
			}
		}
	}
	pkgs++
}
END {
	if (broken) exit 1
	if (pkgs == 0) { print "verify-imports: go list returned no packages"; exit 1 }
	for (r = 1; r <= nr; r++) if (!used[r]) printf "verify-imports: no package is %s yet; its rule holds vacuously\n", part[r]
	if (failed) { print "verify-imports: import rules broken (docs/architecture.md, \"Import rules\")"; exit 1 }
	printf "verify-imports: %d packages follow the %d import rules of docs/architecture.md\n", pkgs, nr
}'
