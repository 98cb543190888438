#!/usr/bin/env bash
# write-cpu.sh measures the CPU time three nodes spend per leader write: it
# starts a three-node cluster with mutual TLS (certificates from the binary's
# own `rookery tls`, a gossip key) for each binary given, pinned to core 0,
# writes BF.ADD through the leader with redis-benchmark on core 1 (-c 50 -P 16,
# N writes, after 50,000 to warm up), and prints the nodes' utime + stime per
# write, read from /proc. Binaries are run in the order given; give them in
# ABBA order (old new new old) and repeat to see through a busy machine.
#
#   bench/write-cpu.sh /tmp/old-rookery /tmp/new-rookery /tmp/new-rookery /tmp/old-rookery
#   N=500000 bench/write-cpu.sh ...
set -euo pipefail
N=${N:-300000}
command -v redis-benchmark >/dev/null || { echo "needs redis-benchmark (apt-get install redis-tools)" >&2; exit 1; }

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
	while :; do
		local p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
}

run() {
	local bin=$1 w pids=() key i L
	w=$(mktemp -d)
	trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$w"' RETURN
	"$bin" tls ca --out "$w/certs" >/dev/null
	for id in t1 t2 t3; do "$bin" tls cert --ca "$w/certs" --name "$id" --out "$w/certs" >/dev/null; done
	key=$(head -c 32 /dev/urandom | base64)
	local resp=() http=() gossip1=""
	for id in t1 t2 t3; do
		local r h g join=()
		r=$(free_port) h=$(free_port) g=$(free_port)
		[ -n "$gossip1" ] && join=(--join "127.0.0.1:$gossip1")
		[ -z "$gossip1" ] && gossip1=$g
		taskset -c 0 "$bin" --id "$id" --data-dir "$w/$id" --bootstrap-expect 3 --gossip-key "$key" \
			--tls-ca "$w/certs/ca.pem" --tls-cert "$w/certs/$id.pem" --tls-key "$w/certs/$id-key.pem" \
			--resp-addr "127.0.0.1:$r" --http-addr "127.0.0.1:$h" --raft-addr "127.0.0.1:$(free_port)" \
			--gossip-addr "127.0.0.1:$g" "${join[@]}" >"$w/$id.log" 2>&1 &
		pids+=($!) resp+=("$r") http+=("$h")
	done
	for h in "${http[@]}"; do
		for _ in $(seq 150); do curl -sf "http://127.0.0.1:$h/readyz" >/dev/null && break; sleep 0.2; done
	done
	for i in 0 1 2; do
		curl -s "http://127.0.0.1:${http[$i]}/v1/status" | grep -q '"role": "leader"' && L=${resp[$i]}
	done
	cpu() { local t=0 p f; for p in "${pids[@]}"; do read -r -a f <"/proc/$p/stat"; t=$((t + f[13] + f[14])); done; echo "$t"; }
	taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$L" -c 50 -P 16 -n 50000 -r 1000000 -q BF.ADD warm __rand_int__ >/dev/null 2>&1
	local c0 c1 out
	c0=$(cpu)
	out=$(taskset -c 1 redis-benchmark -h 127.0.0.1 -p "$L" -c 50 -P 16 -n "$N" -r 1000000 -q BF.ADD k __rand_int__ 2>&1 |
		tr '\r' '\n' | grep "requests per second" | tail -1)
	c1=$(cpu)
	printf '%s\t%.2f µs CPU per write\t%s\n' "$bin" "$(echo "($c1 - $c0) * 1000000 / $(getconf CLK_TCK) / $N" | bc -l)" "$out"
}

for bin in "$@"; do run "$bin"; done
