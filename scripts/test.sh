#!/usr/bin/env bash
# Every test, as `make test` runs them: the race detector over every package
# but filters (see the Makefile), and beside it filters without it and its
# one test of concurrent readers with it. Everything go test prints goes to the
# terminal as it comes; when something fails, a short account of what
# failed follows at the very end (CI keeps only the tail of a long log, and
# a test that hangs until the package's timeout is otherwise named only at
# the top of its goroutine dump).
set -uo pipefail
GO="${GO:-go}"
log="$(mktemp "${TMPDIR:-/tmp}/rookery-test.XXXXXX")"
flog="$(mktemp "${TMPDIR:-/tmp}/rookery-test-filters.XXXXXX")"
trap 'rm -f "$log" "$flog"' EXIT

rc=0
run() {
	"$@" 2>&1 | tee -a "$log"
	local st=${PIPESTATUS[0]}
	if [ "$st" -ne 0 ]; then rc=$st; fi
}
# filters' half a minute of arithmetic runs beside the rest (whose end is
# cmd/node's nodes waiting on timers) rather than after it; its output
# follows the rest's.
(
	st=0
	"$GO" test -timeout 10m ./filters/ || st=$?
	"$GO" test -race -run 'ReadersShare' ./filters/ || st=$?
	exit "$st"
) >"$flog" 2>&1 &
fpid=$!
run "$GO" test -race -timeout 30m $("$GO" list ./... | grep -v '/filters$')
fst=0
wait "$fpid" || fst=$?
tee -a "$log" <"$flog"
if [ "$fst" -ne 0 ]; then rc=$fst; fi

if [ "$rc" -ne 0 ]; then
	echo
	echo "== what failed =="
	# A package that hit its timeout names the tests still running.
	awk '/^panic: test timed out/ {on = 1} on && /^$/ {on = 0} on' "$log"
	grep -E '^\s*--- FAIL|^FAIL|^panic:|DATA RACE|_test\.go:[0-9]+: ' "$log" | grep -v '^panic: test timed out' | head -60 || true
fi
exit "$rc"
