#!/usr/bin/env bash
# shard-bench.sh measures what shards buy, in one run, with redis-benchmark:
#
#   1. Bytes per node for the same filters (FILTERS Bloom filters of CAPACITY
#      items at 1%) on three nodes with one shard against six nodes with six
#      shards of three replicas (from each node's /v1/status memory_bytes).
#   2. Durable BF.ADD at -c 50, -P 1 and -P 16, on one node with 1, 4 and 8
#      shards and on three nodes with 1 and 6 shards, each against a
#      redis-server with appendonly yes and appendfsync always doing SADD,
#      measured right after it. With S shards the load is S filters, one per
#      shard, each written by its own redis-benchmark sending to the shard's
#      leader (as a cluster client routes), the 50 connections split between
#      them; Redis gets the same S keys and the same split. req/s is the
#      requests of all of them over the wall time; p50 and p99 are the worst
#      of them. CPU per write is the nodes' utime+stime (all of them, followers
#      too) over the writes, from /proc; the Redis column is redis-server's.
#   3. One writer writing one key after another (redis-benchmark -c 1), on
#      one node and on three: the latency of a single write.
#   4. Idle CPU: three nodes with six shards and six nodes with six shards
#      of three, all nodes' CPU over IDLE (60) seconds after a write to every
#      shard and WARM (10) seconds of rest.
#
#   bench/shard-bench.sh                      # defaults: 100000 requests per test
#   REQUESTS=300000 PIPELINES=16 bench/shard-bench.sh
#   ONLY="idle" bench/shard-bench.sh          # sections: bytes writes sequential idle
#   BIN=/path/to/older/rookery bench/shard-bench.sh   # that build instead of this tree's
#
# It installs redis-tools, redis-server, curl and jq with apt-get when they are
# missing, builds the rookery binary, starts every server on free 127.0.0.1
# ports with data in a temporary directory, and stops them when it ends.
# On a machine with at least two cores the servers run on core 0 and
# redis-benchmark on core 1 (taskset), as in bench/redis-bench.sh; PIN=0 turns
# this off. Compare ratios from one run; absolute figures move with the machine.
set -euo pipefail

REQUESTS=${REQUESTS:-100000}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
KEYSPACE=${KEYSPACE:-1000000}
FILTERS=${FILTERS:-48}
CAPACITY=${CAPACITY:-200000}
SEQUENTIAL=${SEQUENTIAL:-5000}
WARM=${WARM:-10}
IDLE=${IDLE:-60}

cd "$(dirname "$0")/.."

. bench/lib.sh
need redis-benchmark:redis-tools redis-server:redis-server curl:curl jq:jq
pin
start_work
WAIT_TRIES=600

if [ -n "${BIN:-}" ]; then
	cp "$BIN" "$work/rookery" # another build, to compare side by side
else
	echo "building rookery" >&2
	CGO_ENABLED=0 go build -o "$work/rookery" ./cmd/node
fi

# The cluster under test: its nodes' RESP and HTTP ports and process ids.
resp=() http=() npids=()

# cluster NAME NODES SHARDS starts NODES nodes that bootstrap together with
# SHARDS shards of min(3, NODES) replicas, and waits until every shard has its
# replicas and a leader.
cluster() {
	local name=$1 n=$2 shards=$3 i id r h g p dir join=() attempt
	resp=() http=() npids=()
	for i in $(seq 1 "$n"); do
		id="$name-$i" dir="$work/$name-$i"
		for attempt in 1 2 3 4 5; do
			r=$(free_port) h=$(free_port) g=$(free_port)
			"${server[@]}" "$work/rookery" --id "$id" --data-dir "$dir" --log-level warn \
				--bootstrap-expect "$n" --shards "$shards" \
				--resp-addr "127.0.0.1:$r" --http-addr "127.0.0.1:$h" \
				--raft-addr "127.0.0.1:$(free_port)" --gossip-addr "127.0.0.1:$g" "${join[@]}" \
				>/dev/null 2>>"$work/$id.log" &
			p=$!
			# A port free when chosen may be taken before the node binds it:
			# then the node exits at once; choose again.
			sleep 0.3
			if kill -0 "$p" 2>/dev/null || ! grep -q "address already in use" "$work/$id.log"; then
				break
			fi
			: >"$work/$id.log"
		done
		[ ${#join[@]} -eq 0 ] && join=(--join "127.0.0.1:$g")
		pids+=("$p") npids+=("$p") resp+=("$r") http+=("$h")
	done
	for h in "${http[@]}"; do wait_for "$name to be ready" curl -sf "http://127.0.0.1:$h/readyz"; done
	local want=$((n < 3 ? n : 3))
	wait_for "$name's shards to be placed" sh -c "curl -sf http://127.0.0.1:${http[0]}/v1/shards |
		jq -e 'length == $shards and all(.[]; .created and .leader != \"\" and ([.replicas[] | select(.voter)] | length) == $want)'"
}

stop_cluster() {
	local p
	for p in "${npids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${npids[@]}"; do wait "$p" 2>/dev/null || true; done
}

# shard_keys PREFIX prints, for every shard of the cluster, "KEY PORT": a key
# of that shard's slots and the RESP port of its leader.
shard_keys() {
	local prefix=$1 shards i slot port shard
	shards=$(curl -sf "http://127.0.0.1:${http[0]}/v1/shards")
	local n
	n=$(jq length <<<"$shards")
	declare -A have=()
	for i in $(seq 0 100000); do
		[ ${#have[@]} -eq "$n" ] && break
		slot=$(redis-cli -p "${resp[0]}" CLUSTER KEYSLOT "$prefix$i")
		port=$(jq -r --argjson s "$slot" '.[] | select(.first_slot <= $s and $s <= .last_slot) |
			"\(.id) \(.leader as $l | .replicas[] | select(.id == $l) | .resp_addr | split(":") | last)"' <<<"$shards")
		read -r shard port <<<"$port"
		if [ -z "${have[$shard]:-}" ]; then
			have[$shard]=1
			echo "$prefix$i $port"
		fi
	done
}

cpu_ticks() { # cpu_ticks PID... prints their utime+stime in clock ticks
	local t=0 p f
	for p in "$@"; do
		read -r -a f <"/proc/$p/stat"
		t=$((t + f[13] + f[14]))
	done
	echo "$t"
}

# load PIPE PIDS COMMAND KEYS runs redis-benchmark COMMAND KEY __rand_int__
# against each "KEY PORT" line of KEYS at once, CLIENTS connections split
# between them, and prints "req/s worst-p50 worst-p99 µs-CPU-per-write" where
# the CPU is that of the processes PIDS (comma-separated).
load() {
	local pipe=$1 pidlist=$2 cmd=$3 keys=$4 k i=0 key port c n start end c0 c1 out=() lines
	local -a ps
	IFS=, read -r -a ps <<<"$pidlist"
	k=$(wc -l <<<"$keys")
	n=$((REQUESTS / k))
	c0=$(cpu_ticks "${ps[@]}")
	start=$(date +%s.%N)
	while read -r key port; do
		c=$((CLIENTS / k + (i < CLIENTS % k ? 1 : 0)))
		"${client[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c "$c" -P "$pipe" -n "$n" -r "$KEYSPACE" --csv \
			"$cmd" "$key" __rand_int__ >"$work/load.$i" &
		out+=($!)
		i=$((i + 1))
	done <<<"$keys"
	wait "${out[@]}"
	end=$(date +%s.%N)
	c1=$(cpu_ticks "${ps[@]}")
	lines=$(cat "$work"/load.*)
	rm -f "$work"/load.*
	awk -F'","' -v total=$((n * k)) -v wall="$(echo "$end - $start" | bc -l)" \
		-v cpu="$(echo "($c1 - $c0) * 1000000 / $(getconf CLK_TCK) / ($n * $k)" | bc -l)" '
		/^"[A-Z]/ && $1 !~ /test/ { gsub(/"/, "", $5); gsub(/"/, "", $7); if ($5 > p50) p50 = $5; if ($7 > p99) p99 = $7 }
		END { printf "%.0f %.3f %.3f %.1f\n", total / wall, p50, p99, cpu }' <<<"$lines"
}

# want SECTION: whether ONLY (a list of sections) is unset or names it.
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

redis_port=$(free_port)
mkdir -p "$work/redis-data"
"${server[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work/redis-data" --appendonly yes \
	--appendfsync always --save "" --daemonize no --logfile "$work/redis.log" &
redis_pid=$!
pids+=("$redis_pid")
wait_for "redis-server" redis-cli -p "$redis_port" ping

printf '\nbench/shard-bench.sh, one run, %s, %s cores, pinned: %s\n' "$(date -u +%Y-%m-%dT%H:%MZ)" "$(nproc)" \
	"$([ ${#server[@]} -gt 0 ] && echo "servers on core 0, client on core 1" || echo no)"

# 1. Bytes per node.
want bytes && printf '\n%s Bloom filters of %s items at 1%%, bytes held per node (/v1/status memory_bytes)\n\n' "$FILTERS" "$CAPACITY"
want bytes && printf '| setup | node | bytes | share of the filters'"'"' bytes |\n|---|---|---:|---:|\n'
bytes_rows() { # bytes_rows SETUP REPLICAS
	local setup=$1 replicas=$2 f i total=0 b=()
	for f in $(seq 0 $((FILTERS - 1))); do
		redis-cli -p "${resp[0]}" BF.RESERVE "filter:$f" 0.01 "$CAPACITY" >/dev/null
	done
	# Every replica applies the reserves: wait until the nodes' sum settles.
	local prev=-1
	for _ in $(seq 1 100); do
		total=0 b=()
		for i in "${!http[@]}"; do
			b+=("$(curl -sf "http://127.0.0.1:${http[$i]}/v1/status" | jq .memory_bytes)")
			total=$((total + b[i]))
		done
		[ "$total" = "$prev" ] && break
		prev=$total
		sleep 0.5
	done
	for i in "${!b[@]}"; do
		printf '| %s | %s | %s | %s%% |\n' "$setup" "n$((i + 1))" "${b[$i]}" \
			"$(awk -v a="${b[$i]}" -v t="$total" -v r="$replicas" 'BEGIN { printf "%.0f", 100 * a * r / t }')"
	done
}
if want bytes; then
	cluster bytes1 3 1
	bytes_rows "3 nodes, 1 shard" 3
	stop_cluster
	cluster bytes6 6 6
	bytes_rows "6 nodes, 6 shards of 3" 3
	stop_cluster
fi

# 2. Durable writes.
want writes && printf '\nDurable BF.ADD against SADD on Redis (appendfsync always): redis-benchmark -c %s -n %s -r %s\n\n' \
	"$CLIENTS" "$REQUESTS" "$KEYSPACE"
want writes && printf '| Rookery | -P | req/s | p50 ms | p99 ms | µs CPU/write | Redis req/s | p50 ms | p99 ms | µs CPU/write | ratio |\n'
want writes && printf '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n'
writes() { # writes SETUP NODES SHARDS
	local setup=$1 keys rkeys pipe a b
	cluster "w$2x$3" "$2" "$3"
	keys=$(shard_keys "bench:")
	while read -r key _; do
		redis-cli -p "${resp[0]}" BF.RESERVE "$key" 0.01 "$KEYSPACE" >/dev/null
	done <<<"$keys"
	rkeys=$(awk -v p="$redis_port" '{ print $1, p }' <<<"$keys")
	for pipe in $PIPELINES; do
		read -r -a a <<<"$(load "$pipe" "$(
			IFS=,
			echo "${npids[*]}"
		)" BF.ADD "$keys")"
		read -r -a b <<<"$(load "$pipe" "$redis_pid" SADD "$rkeys")"
		printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$setup" "$pipe" \
			"${a[0]}" "${a[1]}" "${a[2]}" "${a[3]}" "${b[0]}" "${b[1]}" "${b[2]}" "${b[3]}" "$(ratio "${a[0]}" "${b[0]}")"
	done
	stop_cluster
}
if want writes; then
	writes "1 node, 1 shard" 1 1
	writes "1 node, 4 shards" 1 4
	writes "1 node, 8 shards" 1 8
	writes "3 nodes, 1 shard" 3 1
	writes "3 nodes, 6 shards" 3 6
fi

# 3. One client writing one key after another (redis-benchmark -c 1): the
# latency of one write, on one node and on three.
want sequential && printf '\nOne writer, one write at a time: redis-benchmark -c 1 -n %s BF.ADD (one shard)\n\n' "$SEQUENTIAL"
want sequential && printf '| setup | req/s | p50 ms | p99 ms |\n|---|---:|---:|---:|\n'
sequential() { # sequential SETUP NODES
	local a keys
	cluster "c1x$2" "$2" 1
	keys=$(shard_keys "seq:")
	redis-cli -p "${resp[0]}" BF.RESERVE "$(awk '{ print $1 }' <<<"$keys")" 0.01 "$KEYSPACE" >/dev/null
	read -r -a a <<<"$(CLIENTS=1 REQUESTS=$SEQUENTIAL load 1 "${npids[0]}" BF.ADD "$keys")"
	printf '| %s | %s | %s | %s |\n' "$1" "${a[0]}" "${a[1]}" "${a[2]}"
	stop_cluster
}
if want sequential; then
	sequential "1 node" 1
	sequential "3 nodes" 3
fi

# 4. Idle: what the nodes of a cluster spend doing nothing, IDLE seconds
# after a warm-up of writes to every shard and WARM seconds of rest.
want idle && printf '\nIdle: CPU of all nodes together over %s s, after writes to every shard and %s s of rest\n\n' "$IDLE" "$WARM"
want idle && printf '| setup | groups per node | CPU, share of one core |\n|---|---:|---:|\n'
idle() { # idle SETUP NODES SHARDS
	local keys c0 c1
	cluster "idle$2x$3" "$2" "$3"
	keys=$(shard_keys "idle:")
	while read -r key port; do
		redis-cli -p "$port" BF.ADD "$key" warm >/dev/null
	done <<<"$keys"
	sleep "$WARM"
	c0=$(cpu_ticks "${npids[@]}")
	sleep "$IDLE"
	c1=$(cpu_ticks "${npids[@]}")
	printf '| %s | %s | %s%% |\n' "$1" "$(($3 * ($2 < 3 ? $2 : 3) / $2 + 1))" \
		"$(echo "scale=1; 100 * ($c1 - $c0) / $(getconf CLK_TCK) / $IDLE" | bc -l)"
	stop_cluster
}
if want idle; then
	idle "3 nodes, 6 shards" 3 6
	idle "6 nodes, 6 shards of 3" 6 6
fi
