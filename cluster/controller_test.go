package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// mapOf is a map of shards with the replicas given (the first of each its
// preferred leader and creator), created unless said otherwise.
func mapOf(r int, created bool, replicas ...[]string) *fsm.Map {
	m := &fsm.Map{Version: 7, Replicas: r}
	for s, reps := range replicas {
		first, last := s*16384/len(replicas), (s+1)*16384/len(replicas)-1
		g := fsm.MapGroup{First: first, Last: last, Replicas: slices.Clone(reps), Created: created}
		if len(reps) > 0 {
			g.Leader, g.Creator = reps[0], reps[0]
		}
		m.Groups = append(m.Groups, g)
	}
	return m
}

// led is what a shard's leader reports when its voters are exactly voters.
func led(leader string, voters ...string) shardObs {
	return shardObs{Leader: leader, Voters: voters}
}

func liveSet(ids ...string) map[string]nodeLiveness {
	out := map[string]nodeLiveness{}
	for _, id := range ids {
		out[id] = nodeLiveness{State: liveAlive}
	}
	return out
}

func setDead(l map[string]nodeLiveness, id string, d time.Duration) {
	l[id] = nodeLiveness{State: liveDead, GossipGone: d, RaftSilent: d}
}

// TestPlanMap: one row per rule of the controller (planMap's comment).
func TestPlanMap(t *testing.T) {
	const timeout = 10 * time.Second
	t.Run("a settled, balanced map is left alone", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"}, []string{"n2", "n3", "n1"}, []string{"n3", "n1", "n2"})
		v := controlView{Map: m, Self: "n1", Live: liveSet("n1", "n2", "n3"), DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3"), led("n2", "n1", "n2", "n3"), led("n3", "n1", "n2", "n3")}}
		if next := planMap(v); next != nil {
			t.Fatalf("changed to %+v", next.Groups)
		}
	})
	t.Run("a shard is created once its creator leads with the map's voters", func(t *testing.T) {
		m := mapOf(3, false, []string{"n1", "n2", "n3"})
		v := controlView{Map: m, Self: "n1", Live: liveSet("n1", "n2", "n3"), DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{{Leader: "n1", Voters: []string{"n1", "n2"}, Nonvoters: []string{"n3"}}}}
		if next := planMap(v); next != nil {
			t.Fatalf("created with a non-voter left: %+v", next.Groups)
		}
		v.Shards[0] = led("n2", "n1", "n2", "n3")
		if next := planMap(v); next != nil {
			t.Fatalf("created while another node than its creator leads: %+v", next.Groups)
		}
		v.Shards[0] = led("n1", "n1", "n2", "n3")
		next := planMap(v)
		if next == nil || !next.Groups[0].Created || next.Version != m.Version+1 {
			t.Fatalf("not created: %+v", next)
		}
	})
	t.Run("a node dead to both for the timeout is replaced, not before", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"})
		live := liveSet("n1", "n2", "n4")
		setDead(live, "n3", timeout-time.Second)
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3")}}
		if next := planMap(v); next != nil {
			t.Fatalf("replaced before the timeout: %+v", next.Groups)
		}
		setDead(live, "n3", timeout)
		next := planMap(v)
		if next == nil || !slices.Equal(next.Groups[0].Replicas, []string{"n1", "n2", "n4"}) {
			t.Fatalf("dead n3 not replaced by n4: %+v", next)
		}
	})
	t.Run("dead to gossip alone is not dead", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"})
		live := liveSet("n1", "n2", "n4")
		live["n3"] = nodeLiveness{State: liveAlive, GossipGone: time.Hour}
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3")}}
		if next := planMap(v); next != nil && !slices.Equal(next.Groups[0].Replicas, m.Groups[0].Replicas) {
			t.Fatalf("moved a replica off a node Raft still reaches: %+v", next.Groups)
		}
	})
	t.Run("a node that left is gone at once, and dropped when no node can take its replica", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"})
		live := liveSet("n1", "n2")
		live["n3"] = nodeLiveness{State: liveLeft}
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3")}}
		next := planMap(v)
		if next == nil || !slices.Equal(next.Groups[0].Replicas, []string{"n1", "n2"}) {
			t.Fatalf("left n3 not dropped: %+v", next)
		}
		live["n4"] = nodeLiveness{State: liveAlive}
		next = planMap(v)
		if next == nil || !slices.Equal(next.Groups[0].Replicas, []string{"n1", "n2", "n4"}) {
			t.Fatalf("left n3 not replaced by n4: %+v", next)
		}
	})
	t.Run("a stopping node keeps its replicas, takes none and leads nothing", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"}, []string{"n3", "n1", "n2"})
		m.Groups[1].Replicas = []string{"n3", "n1"}
		live := liveSet("n1", "n2")
		live["n3"] = nodeLiveness{State: liveStopping}
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3"), led("n3", "n1", "n3")}}
		next := planMap(v)
		if next == nil {
			t.Fatal("nothing changed")
		}
		if !slices.Contains(next.Groups[0].Replicas, "n3") || !slices.Contains(next.Groups[1].Replicas, "n3") {
			t.Fatalf("a stopping node lost its replicas: %+v", next.Groups)
		}
		if !slices.Equal(next.Groups[1].Replicas, []string{"n3", "n1", "n2"}) {
			t.Fatalf("shard 1 short of a replica got %v, want n2 added (n3 is stopping)", next.Groups[1].Replicas)
		}
		for s, g := range next.Groups {
			if g.Leader == "n3" {
				t.Fatalf("shard %d prefers stopping n3 as its leader", s)
			}
		}
	})
	t.Run("a draining node's replicas move, paced", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"}, []string{"n2", "n3", "n1"}, []string{"n3", "n1", "n2"})
		m.Draining = []string{"n3"}
		live := liveSet("n1", "n2", "n3", "n4")
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3"), led("n2", "n1", "n2", "n3"), led("n3", "n1", "n2", "n3")}}
		next := planMap(v)
		moved := 0
		for s, g := range next.Groups {
			if !slices.Contains(g.Replicas, "n3") {
				moved++
				if !slices.Contains(g.Replicas, "n4") {
					t.Fatalf("shard %d: n3 replaced by %v, want n4", s, g.Replicas)
				}
			}
		}
		if moved != 2 {
			t.Fatalf("%d shards moved at once, want MaxMoving 2: %+v", moved, next.Groups)
		}
	})
	t.Run("a change in flight is not changed again", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n4"})
		live := liveSet("n1", "n2", "n4", "n5")
		setDead(live, "n3", time.Hour)
		setDead(live, "n4", time.Hour)
		// n4 was placed for n3, which the group still counts; now n4 dies too.
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{{Leader: "n1", Voters: []string{"n1", "n2", "n3"}}}}
		if next := planMap(v); next == nil || !slices.Equal(next.Groups[0].Replicas, []string{"n1", "n2", "n5"}) {
			t.Fatalf("a replica the group can never add is no change in flight: %+v", next)
		}
		live["n4"] = nodeLiveness{State: liveAlive}
		if next := planMap(v); next != nil && !slices.Equal(next.Groups[0].Replicas, m.Groups[0].Replicas) {
			t.Fatalf("changed a shard whose move is under way: %+v", next.Groups)
		}
	})
	t.Run("a recovered shard heals: its fenced replicas go, live nodes fill it", func(t *testing.T) {
		// Recovery left n5 alone in shard 0's group and fenced n4 and n7.
		m := mapOf(3, true, []string{"n5"})
		m.Groups[0].Fenced = []string{"n4", "n7"}
		live := liveSet("n1", "n4", "n5", "n6", "n7")
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n5", "n5")}}
		for round := 0; round < 4; round++ {
			next := planMap(v)
			if next == nil {
				break
			}
			g := next.Groups[0]
			for _, f := range g.Fenced {
				if slices.Contains(g.Replicas, f) {
					t.Fatalf("round %d: fenced %s placed again: %v", round, f, g.Replicas)
				}
			}
			v.Map, v.Shards[0] = next, led(g.Replicas[0], g.Replicas...)
		}
		g := v.Map.Groups[0]
		if len(g.Replicas) != 3 || slices.Contains(g.Replicas, "n4") || slices.Contains(g.Replicas, "n7") {
			t.Fatalf("shard 0 healed to %v, want three replicas off n4 and n7", g.Replicas)
		}
	})
	t.Run("a fence lifts once its node holds nothing of the shard, or left", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"})
		m.Groups[0].Fenced = []string{"n4", "n5", "n6"}
		live := liveSet("n1", "n2", "n3", "n4", "n5")
		live["n6"] = nodeLiveness{State: liveLeft}
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3")},
			// n4 still holds shard 0's files; n5 reports it holds none.
			Holding: map[string][]int{"n4": {1}, "n5": nil}}
		next := planMap(v)
		if next == nil || !slices.Equal(next.Groups[0].Fenced, []string{"n4"}) {
			t.Fatalf("fences after: %+v", next)
		}
		v.Holding = map[string][]int{}
		if next := planMap(v); next == nil || !slices.Equal(next.Groups[0].Fenced, []string{"n4", "n5"}) {
			t.Fatalf("a node that has not reported keeps its fence: %+v", next)
		}
	})
	t.Run("only a fresh report read against this map can lift a fence", func(t *testing.T) {
		m := mapOf(3, true, []string{"n1", "n2", "n3"})
		m.Groups[0].Fenced = []string{"n4", "n5", "n6"}
		m.Version = 9
		now := time.Now()
		tab := map[string]received{
			// Killed just before the recovery fenced it: its last report,
			// still fresh, was read against the map before the fence.
			"n4": {r: nodeReport{ID: "n4", Map: 8}, at: now.Add(-reportEvery)},
			// Alive, its files gone, read against this map.
			"n5": {r: nodeReport{ID: "n5", Map: 9}, at: now},
			// Read against this map, but long ago.
			"n6": {r: nodeReport{ID: "n6", Map: 9}, at: now.Add(-2 * reportFresh)},
		}
		holding := holdingFenced(tab, m, now)
		if _, ok := holding["n4"]; ok {
			t.Fatalf("a report from before the fence counts: %v", holding)
		}
		if _, ok := holding["n6"]; ok {
			t.Fatalf("a stale report counts: %v", holding)
		}
		live := liveSet("n1", "n2", "n3", "n5")
		live["n4"], live["n6"] = nodeLiveness{State: liveDead}, nodeLiveness{State: liveDead}
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2,
			Shards: []shardObs{led("n1", "n1", "n2", "n3")}, Holding: holding}
		next := planMap(v)
		if next == nil || !slices.Equal(next.Groups[0].Fenced, []string{"n4", "n6"}) {
			t.Fatalf("fences after: %+v", next)
		}
	})
	t.Run("an uncreated shard waits for its creator", func(t *testing.T) {
		m := mapOf(3, false, []string{"n1", "n2", "n3"})
		live := liveSet("n1", "n2", "n4")
		setDead(live, "n3", time.Hour)
		v := controlView{Map: m, Self: "n1", Live: live, DeadAfter: timeout, MaxMoving: 2, Shards: []shardObs{{}}}
		if next := planMap(v); next != nil && !slices.Equal(next.Groups[0].Replicas, m.Groups[0].Replicas) {
			t.Fatalf("moved a shard not yet created: %+v", next.Groups)
		}
	})
}
