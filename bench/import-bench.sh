#!/usr/bin/env bash
# import-bench.sh measures a bulk load, durable on both sides: `rookery import`
# of N 16-byte keys into a fresh three-node cluster (into a Bloom filter, then
# into a cuckoo filter, each on a cluster of its own), against `redis-cli
# --pipe` sending the same keys with one SADD each to a redis-server with
# appendonly yes and appendfsync always. It prints, per load, the seconds, the
# keys per second, the CPU time the servers and the loading client spent per
# key, and the ratio of each Rookery rate to the Redis rate of the same round.
#
#   bench/import-bench.sh                  # defaults: 10000000 keys, 1 round
#   KEYS=2000000 ROUNDS=3 bench/import-bench.sh
#   CHUNK=5000 INFLIGHT=16 bench/import-bench.sh   # rookery import's --chunk, --inflight
#   BASE=<commit> bench/import-bench.sh    # also nodes built from <commit>, for a before/after
#
# With BASE, each round also loads into a cluster of nodes built from that
# commit (the importing client is always this checkout's), right after the
# same load into this checkout's nodes, so that the two see the same machine.
#
# It installs redis-tools and redis-server with apt-get when they are missing,
# builds the rookery binary, generates the keys once (16 hex digits of
# /dev/urandom per line, and the same keys as SADD commands in RESP for
# redis-cli --pipe), starts every server on free 127.0.0.1 ports with data in
# a temporary directory on the same file system, and stops them when it ends.
# Nothing is pinned: three nodes and a client need both cores, and Redis uses
# one whatever it is given. Compare ratios from one run; absolute figures move
# with the machine and its load.
set -euo pipefail

KEYS=${KEYS:-10000000}
ROUNDS=${ROUNDS:-1}
CHUNK=${CHUNK:-5000}
INFLIGHT=${INFLIGHT:-16}
KINDS=${KINDS:-"bf cf"}

cd "$(dirname "$0")/.."

. bench/lib.sh
need redis-cli:redis-tools redis-server:redis-server curl:curl xxd:xxd
start_work

# cpu PID... prints the CPU seconds (user + system) the processes have used.
cpu() {
	local total=0 p f
	for p in "$@"; do
		# Fields after the command name: utime and stime are the 12th and 13th.
		f=$(sed 's/.*) //' "/proc/$p/stat")
		total=$((total + $(echo "$f" | awk '{ print $12 + $13 }')))
	done
	awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

echo "building rookery" >&2
CGO_ENABLED=0 go build -o "$work/rookery" ./cmd/node
if [ -n "${BASE:-}" ]; then
	echo "building rookery at $BASE" >&2
	mkdir -p "$work/base"
	git archive "$BASE" | tar -x -C "$work/base"
	(cd "$work/base" && CGO_ENABLED=0 go build -o "$work/rookery-base" ./cmd/node)
	base_name=$(git rev-parse --short "$BASE")
fi

echo "generating $KEYS keys" >&2
head -c $((KEYS * 8)) /dev/urandom | xxd -p -c 8 >"$work/keys.txt"
awk '{ printf "*3\r\n$4\r\nSADD\r\n$5\r\nbench\r\n$16\r\n%s\r\n", $1 }' "$work/keys.txt" >"$work/sadd.resp"

# node ID DIR EXTRA... starts a node of $nodebin on free ports and sets resp,
# http, gossip and pid to its addresses' ports and its process id.
nodebin=$work/rookery
node() {
	local id=$1 dir=$2 attempt
	shift 2
	for attempt in 1 2 3 4 5; do
		resp=$(free_port) http=$(free_port) gossip=$(free_port)
		"$nodebin" --id "$id" --data-dir "$dir" --log-level warn \
			--resp-addr "127.0.0.1:$resp" --http-addr "127.0.0.1:$http" \
			--raft-addr "127.0.0.1:$(free_port)" --gossip-addr "127.0.0.1:$gossip" "$@" >/dev/null 2>>"$work/$id.log" &
		pid=$!
		sleep 0.3
		if kill -0 "$pid" 2>/dev/null || ! grep -q "address already in use" "$work/$id.log"; then
			break
		fi
		: >"$work/$id.log"
	done
	pids+=("$pid")
}

# cluster NAME starts three nodes that bootstrap together and sets leader to
# the leader's RESP port and nodes to their process ids.
cluster() {
	local name=$1 g1 ports=() https=()
	nodes=()
	node "$name-1" "$work/$name-1" --bootstrap-expect 3
	g1=$gossip ports+=("$resp") https+=("$http") nodes+=("$pid")
	for i in 2 3; do
		node "$name-$i" "$work/$name-$i" --bootstrap-expect 3 --join "127.0.0.1:$g1"
		ports+=("$resp") https+=("$http") nodes+=("$pid")
	done
	for h in "${https[@]}"; do wait_for "$name to be ready" curl -sf "http://127.0.0.1:$h/readyz"; done
	wait_for "three voters" sh -c "curl -sf http://127.0.0.1:${https[0]}/v1/nodes | grep -c '\"voter\": true' | grep -qx 3"
	for i in 0 1 2; do
		if curl -sf "http://127.0.0.1:${https[$i]}/v1/status" | grep -q '"role": "leader"'; then leader=${ports[$i]}; fi
	done
}

# stop PID... stops processes and waits for them.
stop() {
	kill "$@" 2>/dev/null || true
	for p in "$@"; do wait "$p" 2>/dev/null || true; done
}

# timed OUT COMMAND... runs the command, writing "wall user sys" seconds to OUT.
timed() {
	local out=$1
	shift
	local TIMEFORMAT='%R %U %S'
	{ time "$@" >/dev/null 2>"$work/client.err"; } 2>"$out" || { cat "$work/client.err" >&2; exit 1; }
}

# row LOAD SECONDS SERVER_CPU CLIENT_CPU REDIS_RATE prints one row and sets rate.
row() {
	local load=$1 secs=$2 scpu=$3 ccpu=$4 ref=${5:-}
	rate=$(awk -v n="$KEYS" -v s="$secs" 'BEGIN { printf "%.0f", n / s }')
	local ratio="–"
	[ -n "$ref" ] && ratio=$(awk -v a="$rate" -v b="$ref" 'BEGIN { printf "%.2fx", a / b }')
	printf '| %s | %s | %s | %s | %s | %s | %s |\n' "$round" "$load" "$secs" "$rate" \
		"$(awk -v c="$scpu" -v n="$KEYS" 'BEGIN { printf "%.2f", c * 1e6 / n }')" \
		"$(awk -v c="$ccpu" -v n="$KEYS" 'BEGIN { printf "%.2f", c * 1e6 / n }')" "$ratio"
}

redis_round() {
	local port dir wall user sys before
	port=$(free_port) dir="$work/redis-$round"
	mkdir -p "$dir"
	redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --appendonly yes --appendfsync always \
		--save "" --daemonize no --logfile "$work/redis.log" &
	local rpid=$!
	pids+=("$rpid")
	wait_for "redis-server" redis-cli -p "$port" ping
	before=$(cpu "$rpid")
	timed "$work/t" redis-cli -p "$port" --pipe <"$work/sadd.resp"
	read -r wall user sys <"$work/t"
	local scpu
	scpu=$(awk -v a="$(cpu "$rpid")" -v b="$before" 'BEGIN { print a - b }')
	[ "$(redis-cli -p "$port" SCARD bench)" -ge $((KEYS * 99 / 100)) ] || { echo "redis lost keys" >&2; exit 1; }
	row "Redis: redis-cli --pipe, SADD (appendfsync always)" "$wall" "$scpu" "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')"
	redis_rate=$rate
	stop "$rpid"
	rm -rf "$dir"
}

# rookery_round KIND BINARY LABEL loads the keys into a fresh cluster of
# BINARY's nodes with this checkout's rookery import.
rookery_round() {
	local kind=$1 wall user sys before after
	nodebin=$2
	cluster "$kind$round"
	before=$(cpu "${nodes[@]}")
	timed "$work/t" "$work/rookery" import --resp "127.0.0.1:$leader" --key bench --kind "$kind" \
		--capacity "$KEYS" --chunk "$CHUNK" --inflight "$INFLIGHT" --progress none "$work/keys.txt"
	read -r wall user sys <"$work/t"
	after=$(cpu "${nodes[@]}")
	row "Rookery: rookery import --kind $kind, 3 nodes$3" "$wall" "$(awk -v a="$after" -v b="$before" 'BEGIN { print a - b }')" \
		"$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$redis_rate"
	stop "${nodes[@]}"
	rm -rf "$work/$kind$round"-*
}

printf '\n%s 16-byte keys, %s, rookery import --chunk %s --inflight %s, nothing pinned\n\n' "$KEYS" \
	"$(date -u +%Y-%m-%dT%H:%MZ)" "$CHUNK" "$INFLIGHT"
printf '| round | load | seconds | keys/s | server CPU µs/key | client CPU µs/key | vs Redis |\n'
printf '|---:|---|---:|---:|---:|---:|---:|\n'
for round in $(seq 1 "$ROUNDS"); do
	redis_round
	for kind in $KINDS; do
		rookery_round "$kind" "$work/rookery" ""
		if [ -n "${BASE:-}" ]; then
			rookery_round "$kind" "$work/rookery-base" " at $base_name"
		fi
	done
done
