package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func nodeIDs(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("n%d", i))
	}
	return out
}

// checkPlacement asserts what every placement keeps: each shard on distinct
// available nodes, R of them when enough exist, a leader among them; and
// returns the replicas and leaders per node.
func checkPlacement(t *testing.T, gs []groupPlacement, r int, nodes []string) (replicas, leads map[string]int) {
	t.Helper()
	replicas, leads = map[string]int{}, map[string]int{}
	for s, g := range gs {
		if want := min(r, len(nodes)); len(g.Replicas) != want {
			t.Fatalf("shard %d has %d replicas %v, want %d", s, len(g.Replicas), g.Replicas, want)
		}
		seen := map[string]bool{}
		for _, n := range g.Replicas {
			if seen[n] || !slices.Contains(nodes, n) {
				t.Fatalf("shard %d: replicas %v repeat a node or use an unavailable one", s, g.Replicas)
			}
			seen[n] = true
			replicas[n]++
		}
		if !seen[g.Leader] {
			t.Fatalf("shard %d: preferred leader %q is not a replica of %v", s, g.Leader, g.Replicas)
		}
		leads[g.Leader]++
	}
	return replicas, leads
}

// spread is the largest difference between two available nodes' counts.
func spread(counts map[string]int, nodes []string) int {
	lo, hi := -1, 0
	for _, n := range nodes {
		c := counts[n]
		if lo < 0 || c < lo {
			lo = c
		}
		hi = max(hi, c)
	}
	return hi - lo
}

// settle plans rounds until the placement stops changing, as the controller
// does once each round's moves have finished.
func settle(t *testing.T, v placementView) []groupPlacement {
	t.Helper()
	for round := 0; round < 100; round++ {
		next, changed := planPlacement(v)
		if !changed {
			return next
		}
		v.Groups = next
	}
	t.Fatal("the placement never settled")
	return nil
}

func TestInitialPlacementIsBalanced(t *testing.T) {
	for _, c := range []struct{ shards, r, nodes int }{{6, 3, 6}, {1, 3, 3}, {1, 3, 1}, {8, 3, 5}, {4, 3, 2}, {12, 5, 7}} {
		nodes := nodeIDs(c.nodes)
		gs := initialPlacement(c.shards, c.r, nodes)
		reps, leads := checkPlacement(t, gs, c.r, nodes)
		if spread(reps, nodes) > 1 || spread(leads, nodes) > 1 && c.shards >= c.nodes {
			t.Errorf("%+v: replicas %v, leaders %v", c, reps, leads)
		}
		if next, changed := planPlacement(placementView{Replicas: c.r, Groups: gs, Nodes: nodes}); changed {
			t.Errorf("%+v: a balanced placement was changed to %v", c, next)
		}
	}
	// The README's six nodes, six shards, three replicas: three replicas and one
	// leader each.
	reps, leads := checkPlacement(t, initialPlacement(6, 3, nodeIDs(6)), 3, nodeIDs(6))
	for _, n := range nodeIDs(6) {
		if reps[n] != 3 || leads[n] != 1 {
			t.Fatalf("%s holds %d replicas and leads %d", n, reps[n], leads[n])
		}
	}
}

// TestPlacementRules: each rule of docs/SHARDING.md, "Placement".
func TestPlacementRules(t *testing.T) {
	t.Run("a node that joins receives replicas until balanced", func(t *testing.T) {
		gs := initialPlacement(6, 3, nodeIDs(3))
		nodes := nodeIDs(4)
		final := settle(t, placementView{Replicas: 3, Groups: gs, Nodes: nodes})
		reps, leads := checkPlacement(t, final, 3, nodes)
		if spread(reps, nodes) > 1 || spread(leads, nodes) > 1 || reps["n4"] < 4 {
			t.Fatalf("after n4 joined: replicas %v, leaders %v", reps, leads)
		}
	})
	t.Run("a seventh node joins six", func(t *testing.T) {
		nodes := nodeIDs(7)
		final := settle(t, placementView{Replicas: 3, Groups: initialPlacement(6, 3, nodeIDs(6)), Nodes: nodes})
		reps, _ := checkPlacement(t, final, 3, nodes)
		if spread(reps, nodes) > 1 || reps["n7"] < 2 {
			t.Fatalf("replicas %v", reps)
		}
	})
	t.Run("a gone node's replicas go to the others, one per shard at a time", func(t *testing.T) {
		gs := initialPlacement(6, 3, nodeIDs(6))
		v := placementView{Replicas: 3, Groups: gs, Nodes: nodeIDs(5), Gone: map[string]bool{"n6": true}}
		next, changed := planPlacement(v)
		if !changed {
			t.Fatal("nothing planned for a gone node")
		}
		for s := range next {
			if slices.Contains(next[s].Replicas, "n6") {
				t.Fatalf("shard %d still on the gone node: %v", s, next[s].Replicas)
			}
			diff := 0
			for i := range next[s].Replicas {
				if next[s].Replicas[i] != gs[s].Replicas[i] {
					diff++
				}
			}
			if diff > 1 {
				t.Fatalf("shard %d changed %d replicas at once: %v -> %v", s, diff, gs[s].Replicas, next[s].Replicas)
			}
		}
		reps, _ := checkPlacement(t, settle(t, v), 3, nodeIDs(5))
		if spread(reps, nodeIDs(5)) > 1 {
			t.Fatalf("replicas %v", reps)
		}
	})
	t.Run("with no node to take them, a gone node's replicas stay", func(t *testing.T) {
		gs := initialPlacement(2, 3, nodeIDs(3))
		if next, changed := planPlacement(placementView{Replicas: 3, Groups: gs, Nodes: nodeIDs(2), Gone: map[string]bool{"n3": true}}); changed {
			for s := range next {
				if !slices.Contains(next[s].Replicas, "n3") || len(next[s].Replicas) != 3 {
					t.Fatalf("shard %d lost a replica with nowhere to put it: %v", s, next[s].Replicas)
				}
			}
		}
	})
	t.Run("a draining node is emptied like a gone one", func(t *testing.T) {
		nodes := []string{"n1", "n2", "n3", "n4"}
		final := settle(t, placementView{Replicas: 3, Groups: initialPlacement(4, 3, nodeIDs(4)), Nodes: nodes[:3],
			Gone: map[string]bool{"n4": true}})
		for s, g := range final {
			if slices.Contains(g.Replicas, "n4") || g.Leader == "n4" {
				t.Fatalf("shard %d still on the draining node: %+v", s, g)
			}
		}
	})
	t.Run("shards short of R are filled as nodes appear", func(t *testing.T) {
		gs := initialPlacement(4, 3, nodeIDs(1))
		final := settle(t, placementView{Replicas: 3, Groups: gs, Nodes: nodeIDs(3)})
		reps, leads := checkPlacement(t, final, 3, nodeIDs(3))
		if reps["n2"] != 4 || spread(leads, nodeIDs(3)) > 1 {
			t.Fatalf("replicas %v, leaders %v", reps, leads)
		}
	})
	t.Run("shards moving are left alone, and the number moving is bounded", func(t *testing.T) {
		gs := initialPlacement(6, 3, nodeIDs(3))
		v := placementView{Replicas: 3, Groups: gs, Nodes: nodeIDs(6), Moving: map[int]bool{0: true}, MaxMoving: 3}
		next, _ := planPlacement(v)
		changed := 0
		for s := range next {
			if !slices.Equal(next[s].Replicas, gs[s].Replicas) {
				if s == 0 {
					t.Fatal("a moving shard was changed again")
				}
				changed++
			}
		}
		if changed != 2 {
			t.Fatalf("%d shards changed with one moving and a bound of 3, want 2", changed)
		}
	})
	t.Run("a preferred leader within the cap is kept", func(t *testing.T) {
		gs := initialPlacement(6, 3, nodeIDs(6))
		gs[0].Leader = gs[0].Replicas[1] // n2 leads shards 0 and 1 now
		next, _ := planPlacement(placementView{Replicas: 3, Groups: gs, Nodes: nodeIDs(6)})
		_, leads := checkPlacement(t, next, 3, nodeIDs(6))
		if spread(leads, nodeIDs(6)) > 1 {
			t.Fatalf("leaders %v", leads)
		}
	})
}
