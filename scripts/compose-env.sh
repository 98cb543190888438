#!/usr/bin/env sh
# compose-env.sh writes .env for docker-compose.yml unless one exists: a fresh
# password (ROOKERY_REQUIREPASS) and gossip key (ROOKERY_GOSSIP_KEY), readable
# by the owner only. Keep it; every node of the cluster must use the same.
set -eu
cd "$(dirname "$0")/.."
if [ -f .env ]; then
	exit 0
fi
umask 077
pass=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
key=$(head -c 32 /dev/urandom | base64)
printf 'ROOKERY_REQUIREPASS=%s\nROOKERY_GOSSIP_KEY=%s\n' "$pass" "$key" >.env
echo "wrote .env: the cluster's password and gossip key (keep it secret)"
