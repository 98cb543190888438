#!/usr/bin/env bash
# fuzz.sh DURATION [PATTERN] runs every fuzz target of the module's packages (or
# those whose name matches the extended regexp PATTERN, such as 'LoadChunk'), one
# at a time, for DURATION each (a go test -fuzztime value such as 30s or 10000x).
# go test fuzzes one target per run, hence the loop. It stops at the first
# failure; the failing input is then under the package's testdata/fuzz/<Name>/. The
# corpus each run builds is copied there too, to be committed.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: $0 DURATION [PATTERN]" >&2
	exit 2
fi
duration=$1
pattern=${2:-.}
cd "$(dirname "$0")/.."

found=0
# One line per package with tests: import path, directory and test files, tab
# separated; only files the build includes are searched.
while IFS=$'\t' read -r pkg dir files; do
	names=$(cd "$dir" && for f in $files; do
		grep -hoE '^func Fuzz[A-Za-z0-9_]*\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\)' "$f" || true
	done | sed -E 's/^func (Fuzz[A-Za-z0-9_]*)\(.*/\1/' | { grep -E -- "$pattern" || true; } | sort -u)
	for name in $names; do
		found=$((found + 1))
		echo "== $pkg $name ($duration)"
		if ! go test -run '^$' -fuzz "^${name}\$" -fuzztime "$duration" "$pkg"; then
			echo "fuzz.sh: $pkg $name failed" >&2
			exit 1
		fi
		# Keep what the fuzzer found interesting next to the test, so every later
		# `go test` replays it and a later fuzzing run starts from it.
		found_dir="$(go env GOCACHE)/fuzz/$pkg/$name"
		if [ -d "$found_dir" ]; then
			mkdir -p "$dir/testdata/fuzz/$name"
			cp -n "$found_dir"/* "$dir/testdata/fuzz/$name/" 2>/dev/null || true
		fi
	done
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{join .TestGoFiles " "}} {{join .XTestGoFiles " "}}{{end}}' ./...)

if [ "$found" -eq 0 ]; then
	echo "fuzz.sh: no fuzz targets found" >&2
	exit 1
fi
echo "fuzz.sh: $found targets passed"
