package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/internal/slot"
)

// testShards is four shards of three replicas over five nodes, as a
// /v1/shards answer; states gives each replica's state, "follower" unless
// said.
func testShards(states map[string]string) shardMap {
	place := [][]string{{"n1", "n2", "n3"}, {"n1", "n4", "n5"}, {"n2", "n3", "n4"}, {"n1", "n2", "n5"}}
	leaders := []string{"n1", "n4", "n2", "n5"}
	var sm shardMap
	for s, r := range slot.Ranges(4) {
		rep := shardJSON{ID: s, First: r.First, Last: r.Last, Leader: leaders[s], Created: true, Status: map[string]replicaJSON{}}
		for _, id := range place[s] {
			rep.Replicas = append(rep.Replicas, replicaJSON{ID: id})
			st := "follower"
			if id == leaders[s] {
				st = "leader"
			}
			if v, ok := states[id]; ok {
				st = v
			}
			rep.Status[id] = replicaJSON{State: st}
		}
		sm = append(sm, rep)
	}
	return sm
}

// TestWorkloadKeysSpreadOverShards: with four shards the workload's filters
// and short-lived keys land on every shard, so a sharded run writes to every
// group and forwards between nodes.
func TestWorkloadKeysSpreadOverShards(t *testing.T) {
	sm := testShards(nil)
	seen := map[int][]string{}
	for _, k := range []string{bloomKey, scalableKey, cuckooKey, countingKey, windowBloomKey, windowCuckooKey,
		"eph-0-0", "eph-1-0", "eph-2-0", "eph-3-0"} {
		s := sm.shardOf(k)
		if s < 0 {
			t.Fatalf("%s in no shard", k)
		}
		seen[s] = append(seen[s], k)
	}
	if len(seen) != 4 {
		t.Errorf("the workload's keys fall on %d shards of 4: %v", len(seen), seen)
	}
	long := map[int]bool{}
	for _, k := range []string{bloomKey, scalableKey, cuckooKey, countingKey} {
		long[sm.shardOf(k)] = true
	}
	if len(long) < 3 {
		t.Errorf("the long-lived filters fall on %d shards, want 3 or more", len(long))
	}
}

// TestReplicasToCheck: the final checks read exactly the replicas the map
// places a key's shard on, and compare each shard's replicas on that
// shard's keys only.
func TestReplicasToCheck(t *testing.T) {
	sm := testShards(nil)
	s := sm.shardOf(bloomKey)
	want := sm.replicas(s)
	if len(want) != 3 {
		t.Fatalf("replicas of shard %d: %v", s, want)
	}
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if got := sm.holder(id)(bloomKey); got != slices.Contains(want, id) {
			t.Errorf("%s holds %s: %v, the map says %v", id, bloomKey, got, !got)
		}
	}
	if !shardMap(nil).holder("n9")(bloomKey) {
		t.Error("without shards every node holds every key")
	}
	if sm.replicas(-1) != nil || sm.replicas(4) != nil {
		t.Error("replicas of a shard that does not exist")
	}

	// Every node answered with its state (keys of the shards it holds).
	states := map[string]map[string]string{}
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		states[id] = map[string]string{}
		for _, k := range []string{bloomKey, cuckooKey, countingKey} {
			if sm.holder(id)(k) {
				states[id][k] = "same"
			}
		}
	}
	groups := sm.replicaStates([]string{"n1", "n2", "n3", "n4", "n5"}, states)
	for sh, g := range groups {
		if !slices.Equal(g.ids, sm.replicas(sh)) {
			t.Errorf("shard %d compared on %v, want %v", sh, g.ids, sm.replicas(sh))
		}
		for id, st := range g.states {
			for k := range st {
				if sm.shardOf(k) != sh {
					t.Errorf("shard %d compares %s's key %s of shard %d", sh, id, k, sm.shardOf(k))
				}
			}
		}
	}
	rep := &Report{OK: true}
	for _, g := range groups {
		compareReplicas(g.ids, g.states, rep)
	}
	if !rep.OK {
		t.Fatalf("equal replicas reported as differing: %v", rep.Problems)
	}
	// One replica lacks the Bloom filter: its shard's comparison says so.
	miss := want[1]
	delete(states[miss], bloomKey)
	rep = &Report{OK: true}
	for _, g := range sm.replicaStates([]string{"n1", "n2", "n3", "n4", "n5"}, states) {
		compareReplicas(g.ids, g.states, rep)
	}
	if rep.OK || !strings.Contains(strings.Join(rep.Problems, "\n"), bloomKey) {
		t.Fatalf("a replica without %s went unnoticed: %v", bloomKey, rep.Problems)
	}
	// A node that did not answer is left out of its shards' groups.
	for sh, g := range sm.replicaStates([]string{"n1", "n2"}, states) {
		for _, id := range g.ids {
			if id != "n1" && id != "n2" {
				t.Errorf("shard %d compares %s, which did not answer", sh, id)
			}
		}
	}
}

// TestServesLocally: READONLY readers read only on a node with a voting
// replica of the key's shard.
func TestServesLocally(t *testing.T) {
	s := testShards(nil).shardOf(bloomKey)
	reps := testShards(nil).replicas(s)
	other := ""
	for _, id := range []string{"n1", "n2", "n3", "n4", "n5"} {
		if !slices.Contains(reps, id) {
			other = id
		}
	}
	for _, c := range []struct {
		name   string
		states map[string]string
		node   string
		want   bool
	}{
		{"a follower of the shard", nil, reps[0], true},
		{"not a replica", nil, other, false},
		{"a non-voter catching up", map[string]string{reps[0]: "nonvoter"}, reps[0], false},
		{"unreachable", map[string]string{reps[0]: "unreachable"}, reps[0], false},
	} {
		if got := testShards(c.states).servesLocally(bloomKey, c.node); got != c.want {
			t.Errorf("%s: servesLocally %v, want %v", c.name, got, c.want)
		}
	}
}

// TestShardsSettled: the run waits for a placement the controller is done
// with before it checks the replicas.
func TestShardsSettled(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	heldOf := func(sm shardMap) map[string]int { return sm.holds() }
	ok := testShards(nil)
	if why := ok.settled(3, nodes, heldOf(ok)); why != "" {
		t.Fatalf("a settled map: %s", why)
	}
	if got := ok.leaders(); !slices.Equal(got, []string{"n1", "n2", "n4", "n5"}) {
		t.Errorf("leaders %v", got)
	}
	if got := ok.leaderOf(bloomKey); got != ok[ok.shardOf(bloomKey)].Leader {
		t.Errorf("leader of %s: %s", bloomKey, got)
	}
	for _, c := range []struct {
		name string
		edit func(sm shardMap, held map[string]int) []string
		want string
	}{
		{"not created", func(sm shardMap, _ map[string]int) []string { sm[1].Created = false; return nodes }, "not created"},
		{"no leader", func(sm shardMap, _ map[string]int) []string { sm[2].Leader = ""; return nodes }, "no leader"},
		{"a fourth replica", func(sm shardMap, held map[string]int) []string {
			sm[0].Replicas = append(sm[0].Replicas, replicaJSON{ID: "n5"})
			sm[0].Status["n5"] = replicaJSON{State: "nonvoter"}
			return nodes
		}, "4 replicas"},
		{"a non-voter", func(sm shardMap, _ map[string]int) []string {
			sm[3].Status["n2"] = replicaJSON{State: "nonvoter"}
			return nodes
		}, "nonvoter"},
		{"placed on a node gone", func(sm shardMap, _ map[string]int) []string { return nodes[:4] }, "not a node of the cluster"},
		{"a replica not yet closed", func(sm shardMap, held map[string]int) []string { held["n3"]++; return nodes }, "n3 holds"},
	} {
		sm := testShards(nil)
		held := heldOf(sm)
		ns := c.edit(sm, held)
		if why := sm.settled(3, ns, held); !strings.Contains(why, c.want) {
			t.Errorf("%s: settled says %q, want %q", c.name, why, c.want)
		}
	}
	if why := shardMap(nil).settled(3, nodes, nil); why == "" {
		t.Error("no shards at all is not settled")
	}
}

// TestDefaultFaults: move and drain need shards; without them the faults
// are today's.
func TestDefaultFaults(t *testing.T) {
	if got := defaultFaults(1); slices.Contains(got, faultMove) || slices.Contains(got, faultDrain) || len(got) != len(allFaults)-2 {
		t.Errorf("one shard: %v", got)
	}
	if got := defaultFaults(4); !slices.Equal(got, allFaults) {
		t.Errorf("four shards: %v", got)
	}
}
