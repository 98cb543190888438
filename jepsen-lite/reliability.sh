#!/usr/bin/env bash
# Runs jepsen-lite RUNS times for DURATION each with every fault, seeds 1 to
# RUNS, keeping each run's artifacts in OUT/seed-N, and prints the table of
# docs/RELIABILITY.md. A failed run does not stop the others.
#
#   bash jepsen-lite/reliability.sh [RUNS [DURATION [OUT]]]
set -u
runs=${1:-20}
duration=${2:-60s}
out=${3:-jepsen-runs}
cd "$(dirname "$0")/.."
mkdir -p "$out"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go build -o "$bin/rookery" ./cmd/node
go build -o "$bin/jepsen-lite" ./jepsen-lite
failed=0
dirs=()
for seed in $(seq 1 "$runs"); do
	dir="$out/seed-$seed"
	rm -rf "$dir"
	"$bin/jepsen-lite" -bin "$bin/rookery" -duration "$duration" -seed "$seed" -out "$dir" >"$dir.log" 2>&1
	code=$?
	echo "seed $seed: exit $code ($(tail -n 2 "$dir.log" | head -n 1))"
	[ "$code" -eq 0 ] || failed=$((failed + 1))
	dirs+=("$dir")
done
"$bin/jepsen-lite" table "${dirs[@]}"
echo "$failed of $runs runs failed"
[ "$failed" -eq 0 ]
