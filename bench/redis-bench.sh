#!/usr/bin/env bash
# redis-bench.sh measures Rookery against Redis in one run, with redis-benchmark:
# durable writes (BF.ADD against SADD on a redis-server with appendonly yes and
# appendfsync always) and reads (BF.EXISTS against SISMEMBER), at -c 50 with no
# pipelining (-P 1) and with -P 16, first on a single node, then on a three-node
# cluster: writes through the leader, linearizable reads on a follower, and
# stale (READONLY) reads on a follower. It prints req/s, p50 and p99 latency and
# the ratio Rookery/Redis of each pair, each Redis figure measured right after
# the Rookery one it is compared with. Then it runs a second three-node cluster
# with mutual TLS between the nodes (certificates from `rookery tls`, a gossip
# key) beside the first and prints, for leader writes and linearizable follower
# reads, the TLS figure against the plain-text one measured right before it
# (TLS=0 skips this).
#
#   bench/redis-bench.sh                 # defaults: 200000 requests per test
#   REQUESTS=500000 bench/redis-bench.sh
#
# It installs redis-tools and redis-server with apt-get when they are missing,
# builds the rookery binary, starts both servers on free 127.0.0.1 ports with
# data in a temporary directory, and stops them when it ends. Compare ratios
# from one run; absolute figures move with the machine and its load.
#
# On a machine with at least two cores the servers run on core 0 and
# redis-benchmark on core 1 (taskset), so that each server has one core to
# itself, as single-threaded Redis would, and the load generator never competes
# with the server it measures. PIN=0 turns this off.
set -euo pipefail

REQUESTS=${REQUESTS:-200000}
TLS=${TLS:-1}
CLIENTS=${CLIENTS:-50}
PIPELINES=${PIPELINES:-"1 16"}
KEYSPACE=${KEYSPACE:-1000000}

cd "$(dirname "$0")/.."

. bench/lib.sh
need redis-benchmark:redis-tools redis-server:redis-server curl:curl
pin
start_work

echo "building rookery" >&2
CGO_ENABLED=0 go build -o "$work/rookery" ./cmd/node

# node ID DIR EXTRA... starts a node on free ports and sets resp, http, gossip
# and pid to its addresses' ports and its process id.
node() {
	local id=$1 dir=$2 attempt
	shift 2
	for attempt in 1 2 3 4 5; do
		resp=$(free_port) http=$(free_port) gossip=$(free_port)
		"${server[@]}" "$work/rookery" --id "$id" --data-dir "$dir" --log-level warn \
			--resp-addr "127.0.0.1:$resp" --http-addr "127.0.0.1:$http" \
			--raft-addr "127.0.0.1:$(free_port)" --gossip-addr "127.0.0.1:$gossip" "$@" >/dev/null 2>>"$work/$id.log" &
		pid=$!
		# A port free when chosen may be taken before the node binds it (the
		# gossip port is UDP too): then the node exits at once; choose again.
		sleep 0.3
		if kill -0 "$pid" 2>/dev/null || ! grep -q "address already in use" "$work/$id.log"; then
			break
		fi
		: >"$work/$id.log"
	done
	pids+=("$pid")
}

redis_port=$(free_port)
mkdir -p "$work/redis-data"
"${server[@]}" redis-server --port "$redis_port" --bind 127.0.0.1 --dir "$work/redis-data" --appendonly yes \
	--appendfsync always --save "" --daemonize no --logfile "$work/redis.log" &
pids+=($!)
wait_for "redis-server" redis-cli -p "$redis_port" ping

# run PORT PIPELINE COMMAND... prints "rps p50 p99" from redis-benchmark's CSV.
run() {
	local port=$1 pipe=$2
	shift 2
	"${client[@]}" redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -P "$pipe" -n "$REQUESTS" -r "$KEYSPACE" --csv "$@" |
		awk -F'","' 'NR==2 { gsub(/"/, "", $2); gsub(/"/, "", $5); gsub(/"/, "", $7); print $2, $5, $7 }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# row SETUP PORT PIPELINE "OURS" "THEIRS" measures one pair and prints a row.
row() {
	local setup=$1 port=$2 pipe=$3 ours=$4 theirs=$5 arps a50 a99 brps b50 b99
	# shellcheck disable=SC2086
	read -r arps a50 a99 <<<"$(run "$port" "$pipe" $ours)"
	# shellcheck disable=SC2086
	read -r brps b50 b99 <<<"$(run "$redis_port" "$pipe" $theirs)"
	printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$setup" "${ours%% *}" "$pipe" \
		"$arps" "$a50" "$a99" "${theirs%% *}" "$brps" "$b50" "$b99" "$(ratio "$arps" "$brps")"
}

ADD="BF.ADD bench __rand_int__" SADD="SADD bench __rand_int__"
EXISTS="BF.EXISTS bench __rand_int__" SISMEMBER="SISMEMBER bench __rand_int__"

printf '\nredis-benchmark -c %s -n %s -r %s, one run, %s, pinned: %s\n\n' "$CLIENTS" "$REQUESTS" "$KEYSPACE" \
	"$(date -u +%Y-%m-%dT%H:%MZ)" "$([ ${#server[@]} -gt 0 ] && echo "servers on core 0, client on core 1" || echo no)"
printf '| Rookery | test | -P | req/s | p50 ms | p99 ms | Redis (appendfsync always) | req/s | p50 ms | p99 ms | ratio |\n'
printf '|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|\n'

# rps PORT PIPELINE COMMAND... prints req/s alone.
rps() { run "$@" | awk '{ print $1 }'; }

# One node.
node single "$work/single" --bootstrap-expect 1
rk_port=$resp rk_http=$http rk_pid=$pid
wait_for "rookery to be ready" curl -sf "http://127.0.0.1:$rk_http/readyz"
# A filter sized for the whole keyspace, as a service would reserve it.
redis-cli -p "$rk_port" BF.RESERVE bench 0.01 "$KEYSPACE" >/dev/null
for pipe in $PIPELINES; do
	row "single node" "$rk_port" "$pipe" "$ADD" "$SADD"
	row "single node" "$rk_port" "$pipe" "$EXISTS" "$SISMEMBER"
done
kill "$rk_pid"
wait "$rk_pid" 2>/dev/null || true

# Three nodes. n1 and n2 bootstrap, so one of them leads; n3 joins afterwards
# and starts its connections on stale reads (the READONLY level), which
# redis-benchmark cannot ask for per connection.
node n1 "$work/n1" --bootstrap-expect 2
p1=$resp h1=$http g1=$gossip
node n2 "$work/n2" --bootstrap-expect 2 --join "127.0.0.1:$g1"
p2=$resp h2=$http
wait_for "n1" curl -sf "http://127.0.0.1:$h1/readyz"
wait_for "n2" curl -sf "http://127.0.0.1:$h2/readyz"
node n3 "$work/n3" --join "127.0.0.1:$g1" --read-consistency stale
p3=$resp h3=$http
wait_for "n3" curl -sf "http://127.0.0.1:$h3/readyz"
wait_for "three voters" sh -c "curl -sf http://127.0.0.1:$h1/v1/nodes | grep -c '\"voter\": true' | grep -qx 3"
if curl -sf "http://127.0.0.1:$h1/v1/status" | grep -q '"role": "leader"'; then
	leader=$p1 follower=$p2
else
	leader=$p2 follower=$p1
fi
redis-cli -p "$leader" BF.RESERVE bench 0.01 "$KEYSPACE" >/dev/null
for pipe in $PIPELINES; do
	row "3 nodes, leader" "$leader" "$pipe" "$ADD" "$SADD"
	row "3 nodes, follower, linearizable" "$follower" "$pipe" "$EXISTS" "$SISMEMBER"
	row "3 nodes, follower, READONLY" "$p3" "$pipe" "$EXISTS" "$SISMEMBER"
done

if [ "$TLS" != 1 ]; then
	exit 0
fi

# Three more nodes, with mutual TLS between them (RESP stays plain text on
# loopback, as redis-benchmark speaks it), measured in turns with the
# plain-text cluster above so that both see the same machine.
"$work/rookery" tls ca --out "$work/certs" >/dev/null
for n in t1 t2 t3; do "$work/rookery" tls cert --ca "$work/certs" --name "$n" --out "$work/certs" >/dev/null; done
key=$(head -c 32 /dev/urandom | base64)
tls_node() {
	local id=$1
	shift
	node "$id" "$work/$id" --bootstrap-expect 3 --gossip-key "$key" --tls-ca "$work/certs/ca.pem" \
		--tls-cert "$work/certs/$id.pem" --tls-key "$work/certs/$id-key.pem" "$@"
}
tls_node t1
t1=$resp th1=$http tg1=$gossip
tls_node t2 --join "127.0.0.1:$tg1"
t2=$resp th2=$http
tls_node t3 --join "127.0.0.1:$tg1"
t3=$resp th3=$http
for h in $th1 $th2 $th3; do wait_for "TLS node" curl -sf "http://127.0.0.1:$h/readyz"; done
tleader=$t1 tfollower=$t2
for pair in "$t1 $th1" "$t2 $th2" "$t3 $th3"; do
	read -r p h <<<"$pair"
	if curl -sf "http://127.0.0.1:$h/v1/status" | grep -q '"role": "leader"'; then tleader=$p; fi
done
for p in $t1 $t2 $t3; do [ "$p" != "$tleader" ] && tfollower=$p && break; done
redis-cli -p "$tleader" BF.RESERVE bench 0.01 "$KEYSPACE" >/dev/null

printf '\nNode-to-node mutual TLS against plain text, three nodes each, measured in turns (plain, TLS, TLS, plain; the mean of each pair)\n\n'
printf '| test | -P | plain req/s | mTLS req/s | ratio |\n|---|---:|---:|---:|---:|\n'
mean() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (a + b) / 2 }'; }
# turns TEST PIPELINE PLAIN_PORT TLS_PORT COMMAND prints one row.
turns() {
	local test=$1 pipe=$2 pp=$3 tp=$4 p1 t1 t2 p2 plain tls
	shift 4
	p1=$(rps "$pp" "$pipe" "$@") t1=$(rps "$tp" "$pipe" "$@")
	t2=$(rps "$tp" "$pipe" "$@") p2=$(rps "$pp" "$pipe" "$@")
	plain=$(mean "$p1" "$p2") tls=$(mean "$t1" "$t2")
	printf '| %s | %s | %s | %s | %s |\n' "$test" "$pipe" "$plain" "$tls" "$(ratio "$tls" "$plain")"
}
for pipe in $PIPELINES; do
	# shellcheck disable=SC2086
	turns "leader BF.ADD" "$pipe" "$leader" "$tleader" $ADD
	# shellcheck disable=SC2086
	turns "follower BF.EXISTS, linearizable" "$pipe" "$follower" "$tfollower" $EXISTS
done
