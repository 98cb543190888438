#!/usr/bin/env bash
# acl-bench.sh measures what users (ACLs) cost: one node, redis-benchmark at
# -c 50, BF.ADD and BF.EXISTS at -P 1 and -P 16, each run twice side by side:
# as the default user (every command, every key: the check is skipped) and as
# a user with rules to check on every command (+@bloom, a key pattern, a
# password), alternating, and prints the ratio restricted/default of each
# pair. Compare ratios from one run; absolute figures move with the machine.
#
#   bench/acl-bench.sh                   # 200000 requests per test
#   REQUESTS=500000 ROUNDS=3 bench/acl-bench.sh
#   BIN=/path/to/rookery bench/acl-bench.sh   # that build instead of this tree's
#
# Servers run on core 0 and redis-benchmark on core 1 (PIN=0: no pinning).
set -euo pipefail

REQUESTS=${REQUESTS:-200000}
ROUNDS=${ROUNDS:-2}
CLIENTS=${CLIENTS:-50}

cd "$(dirname "$0")/.."
. bench/lib.sh
need redis-benchmark:redis-tools redis-cli:redis-tools
pin
start_work

if [ -n "${BIN:-}" ]; then
	cp "$BIN" "$work/rookery"
else
	echo "building rookery" >&2
	CGO_ENABLED=0 go build -o "$work/rookery" ./cmd/node
fi

resp=$(free_port)
"${server[@]}" "$work/rookery" --id n1 --data-dir "$work/n1" --log-level warn --bootstrap-expect 1 --requirepass pw \
	--resp-addr "127.0.0.1:$resp" --http-addr "127.0.0.1:$(free_port)" \
	--raft-addr "127.0.0.1:$(free_port)" --gossip-addr "127.0.0.1:$(free_port)" >/dev/null 2>>"$work/n1.log" &
pids+=($!)
cli() { redis-cli --no-auth-warning -p "$resp" -a pw "$@"; }
wait_for "the node" sh -c "redis-cli --no-auth-warning -p $resp -a pw BF.RESERVE warm 0.01 100 | grep -q OK"
cli BF.RESERVE key:bench 0.01 10000000 >/dev/null
cli ACL SETUSER bencher on '>benchpw' '~key:*' '~other:*' +@bloom -bf.debug >/dev/null

# run USER PASS CMD PIPELINE prints requests per second.
run() {
	"${client[@]}" redis-benchmark -p "$resp" --user "$1" -a "$2" -c "$CLIENTS" -n "$REQUESTS" -P "$4" \
		-r 1000000 -q --csv "$3" key:bench item:__rand_int__ 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"'
}

printf '%-10s %3s %14s %14s %7s\n' command P default restricted ratio
for cmd in "BF.ADD" "BF.EXISTS"; do
	for p in 1 16; do
		for r in $(seq 1 "$ROUNDS"); do
			d=$(run default pw "$cmd" "$p")
			u=$(run bencher benchpw "$cmd" "$p")
			printf '%-10s %3s %14s %14s %7s\n' "$cmd" "$p" "$d" "$u" "$(awk -v a="$u" -v b="$d" 'BEGIN{printf "%.3f", a/b}')"
		done
	done
done
