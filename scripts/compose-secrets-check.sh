#!/usr/bin/env bash
# compose-secrets-check.sh starts docker-compose.yml's cluster in a scratch
# copy (its own project, image tag and host ports, so that it disturbs no
# cluster already running here), waits until every node is healthy, and checks
# that each node's container holds only its own certificate, its own key and
# ca.pem: no ca-key.pem, no other node's key. It then removes the cluster and
# its volumes. Exit status 0 means the check passed.
#
#   scripts/compose-secrets-check.sh            (docker compose or docker-compose)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
work=$(mktemp -d /tmp/rookery-compose-check.XXXXXX)
project="rookerycheck$$"
image="rookery:check$$"

cleanup() {
	(cd "$work" && "${compose[@]}" -p "$project" down -v >/dev/null 2>&1) || true
	docker rmi "$image" >/dev/null 2>&1 || true
	rm -rf "$work" 2>/dev/null || true
}
trap cleanup EXIT

mkdir -p "$work/bin"
CGO_ENABLED=0 go build -o "$work/bin/rookery" ./cmd/node
cp Dockerfile "$work/"
# Host ports 6x7y -> 3x7y (RESP 6479 -> 3479, HTTP 6480 -> 3480, ...), and an image of our own.
sed -e 's/127\.0\.0\.1:6\([4-6][78][09]\):/127.0.0.1:3\1:/g' -e "s/image: rookery:local/image: $image/" \
	docker-compose.yml >"$work/docker-compose.yml"
printf 'ROOKERY_REQUIREPASS=%s\nROOKERY_GOSSIP_KEY=%s\n' "$(head -c 18 /dev/urandom | base64 | tr -d '/+=')" \
	"$(head -c 32 /dev/urandom | base64)" >"$work/.env"

cd "$work"
"${compose[@]}" -p "$project" up -d --build >/dev/null
nodes=(rookery1 rookery2 rookery3)
for i in $(seq 1 90); do
	healthy=0
	for n in "${nodes[@]}"; do
		id=$("${compose[@]}" -p "$project" ps -q "$n")
		[ "$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null)" = healthy ] && healthy=$((healthy + 1))
	done
	[ "$healthy" = 3 ] && break
	sleep 2
done
[ "$healthy" = 3 ] || { echo "FAIL: the cluster did not become healthy"; "${compose[@]}" -p "$project" logs --tail 20; exit 1; }

status=0
for n in "${nodes[@]}"; do
	id=$("${compose[@]}" -p "$project" ps -q "$n")
	files=$(docker cp "$id:/certs" - | tar -t | sed -n 's|^certs/\(..*\)|\1|p' | sort | tr '\n' ' ')
	want="ca.pem $n-key.pem $n.pem "
	echo "$n: /certs holds: $files"
	if docker cp "$id:/certs/ca-key.pem" - >/dev/null 2>&1; then
		echo "FAIL: $n holds ca-key.pem"
		status=1
	fi
	if [ "$files" != "$want" ]; then
		echo "FAIL: $n holds $files, want $want"
		status=1
	fi
done
[ -f certs/ca-key.pem ] || { echo "FAIL: the CA key is not on the host (certs/ca-key.pem)"; status=1; }
[ "$status" = 0 ] && echo "ok: no node container holds ca-key.pem or another node's key (repository: $repo)"
exit "$status"
