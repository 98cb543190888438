# lib.sh holds what the benchmark scripts share; they source it from the
# repository root:
#
#   . bench/lib.sh
#   need redis-benchmark:redis-tools curl:curl    # installs what is missing
#   start_work                                    # $work, $pids, cleaned up on exit
#   pin                                           # ${server[@]}, ${client[@]}
#
# free_port and wait_for as below.

# need COMMAND:PACKAGE... installs with apt-get the package of each command
# that is missing.
need() {
	local missing=() cp
	for cp in "$@"; do
		command -v "${cp%%:*}" >/dev/null || missing+=("${cp#*:}")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "installing ${missing[*]}" >&2
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
	fi
}

# start_work makes the temporary directory $work and kills every process in
# $pids and removes $work when the script ends.
start_work() {
	work=$(mktemp -d)
	pids=()
	trap cleanup EXIT
}

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}

# pin sets server=(taskset -c 0) and client=(taskset -c 1) on a machine with
# at least two cores, so that the servers and the load generator never
# compete; PIN=0 leaves both empty.
pin() {
	server=() client=()
	if [ "${PIN:-1}" = 1 ] && command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ]; then
		server=(taskset -c 0) client=(taskset -c 1)
	fi
}

# free_port prints a TCP port on 127.0.0.1 that nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# wait_for DESCRIPTION COMMAND... runs COMMAND every 0.1 s until it succeeds,
# at most WAIT_TRIES times (300), else prints the servers' last log lines
# and exits.
wait_for() {
	local what=$1
	shift
	for _ in $(seq 1 "${WAIT_TRIES:-300}"); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.1
	done
	echo "timed out waiting for $what" >&2
	for f in "$work"/*.log; do
		[ -f "$f" ] && { echo "== $f" >&2; grep -v 'join failed, retrying' "$f" | tail -n 5 >&2; }
	done
	exit 1
}
