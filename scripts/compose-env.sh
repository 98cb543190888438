#!/usr/bin/env sh
# compose-env.sh writes .env for docker-compose.yml unless one exists: a fresh
# password (ROOKERY_REQUIREPASS) and gossip key (ROOKERY_GOSSIP_KEY), readable
# by the owner only, and the settings the tools on this host read
# (ROOKERY_PASSWORD, ROOKERY_CACERT, ROOKERY_ADDR). Keep it; every node of the
# cluster must use the same. An .env without the tools' settings gets them.
set -eu
cd "$(dirname "$0")/.."

# tools writes the tools' settings for the password $1.
tools() {
	printf '%s\n' \
		"# For rookery's tools and redis-cli on this host: set -a; . ./.env; set +a" \
		"# then: bin/rookery members, bin/rookery wait, redis-cli --tls --cacert \"\$ROOKERY_CACERT\" -p 6479 -a \"\$ROOKERY_PASSWORD\" ..." \
		"ROOKERY_PASSWORD=$1" \
		"ROOKERY_CACERT=certs/ca.pem" \
		"ROOKERY_ADDR=127.0.0.1:6480,127.0.0.1:6580,127.0.0.1:6680"
}

if [ -f .env ]; then
	if ! grep -q '^ROOKERY_PASSWORD=' .env; then
		pass=$(sed -n 's/^ROOKERY_REQUIREPASS=//p' .env | tail -n 1)
		tools "$pass" >>.env
		echo "added the tools' settings to .env (set -a; . ./.env; set +a)"
	fi
	exit 0
fi
umask 077
pass=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
key=$(head -c 32 /dev/urandom | base64)
{
	echo "# The cluster's secrets (docker compose reads this file). Keep them secret."
	printf 'ROOKERY_REQUIREPASS=%s\nROOKERY_GOSSIP_KEY=%s\n' "$pass" "$key"
	tools "$pass"
} >.env
echo "wrote .env: the cluster's password and gossip key (keep it secret), and the tools' settings (set -a; . ./.env; set +a)"
