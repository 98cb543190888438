package main

import "testing"

// TestProcs: the node runs with at least minProcs Ps, never fewer than the
// CPUs it has, and exactly what GOMAXPROCS says when it is set.
func TestProcs(t *testing.T) {
	for _, c := range []struct {
		current int
		envSet  bool
		want    int
	}{
		{1, false, minProcs},
		{2, false, minProcs},
		{minProcs, false, minProcs},
		{16, false, 16},
		{1, true, 1},
		{2, true, 2},
	} {
		if got := procs(c.current, c.envSet); got != c.want {
			t.Errorf("procs(%d, env set %v) = %d, want %d", c.current, c.envSet, got, c.want)
		}
	}
}
