package main

import "runtime"

// minProcs is the fewest Ps the node runs with unless GOMAXPROCS says
// otherwise. Every Raft group's log store blocks its thread in fdatasync, and
// the Go runtime hands a P held by a blocked thread to another only when its
// monitor notices, after microseconds to milliseconds. With one or two CPUs (a
// container's quota, a pinned process) the default of one P per CPU makes a
// node with several shards commit their groups one after another instead of
// together: on one core, eight shards wrote 2.5x faster with four Ps than
// with one, and one group no slower (docs/BENCHMARKS.md, "Shards").
const minProcs = 4

// procs is the GOMAXPROCS the node sets: the current one if the environment
// chose it, else at least minProcs.
func procs(current int, envSet bool) int {
	if envSet {
		return current
	}
	return max(current, minProcs)
}

// raiseProcs applies procs and returns the count in force.
func raiseProcs(env func(string) (string, bool)) int {
	_, set := env("GOMAXPROCS")
	n := procs(runtime.GOMAXPROCS(0), set)
	runtime.GOMAXPROCS(n)
	return n
}
