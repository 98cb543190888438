package cluster

import (
	"errors"
	"strings"
	"testing"
)

// held is a replica of shard s held here: created, leader lead (one of the
// shard's replicas unless lead is ""), applied and commit as given, the log
// held at start applied.
func held(s int, role, lead string, applied, commit uint64) ShardReadiness {
	return ShardReadiness{Shard: s, Held: true, Role: role, Leader: lead, Applied: applied, Commit: commit,
		created: true, leaderIsReplica: lead != "", appliedFromStart: true}
}

// TestReadyOf: the readiness rule, case by case. A node that serves one of
// its shards stays ready while another of its shards has no leader; one that
// serves none of those it holds, or whose own part is broken, is not.
func TestReadyOf(t *testing.T) {
	mapOK := held(-1, "follower", "n3", 10, 10)
	notHeld := ShardReadiness{Shard: 3, Leader: "n5"}
	sick := held(1, "candidate", "", 40, 40)
	behind := held(2, "follower", "n2", 10, 500)
	starting := held(2, "follower", "n2", 10, 10)
	starting.appliedFromStart = false
	halted := held(2, "follower", "n2", 10, 10)
	halted.halted = "corrupt log entry at index 11"
	uncreated := held(2, "follower", "n2", 10, 10)
	uncreated.created = false
	foreign := held(2, "follower", "n9", 10, 10) // its leader is not one of the map's replicas
	foreign.leaderIsReplica = false
	adding := held(2, "nonvoter", "n2", 10, 900) // catching up by snapshot
	adding.adding = true
	for _, c := range []struct {
		name    string
		v       readyView
		ready   bool
		problem string // a part of it
	}{
		{"unsharded, fine", readyView{}, true, ""},
		{"unsharded, no leader", readyView{NodeProblem: "no leader"}, false, "no leader"},
		{"sharded, holds nothing: it forwards every key", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{notHeld}}, true, ""},
		{"leads one shard, another has no leader", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9), sick, notHeld}}, true, ""},
		{"every shard held has no leader", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{sick, notHeld}}, false, "no shard held here serves yet: shard 1 has no leader"},
		{"its one replica is far behind", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{behind}}, false, "catching up (applied 10, commit 500)"},
		{"its one replica has not applied its own log yet", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{starting}}, false, "catching up"},
		{"a leader that is no replica of the map's", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{foreign}}, false, "shard 2 has no leader among its replicas"},
		{"a halted replica fails the node even when another serves", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9), halted},
			Advice: func(s int) string { return "run recover --shard 2" }}, false, "corrupt log entry at index 11; run recover --shard 2"},
		{"a shard being created", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9), uncreated}}, false, "shard 2 is being created"},
		{"a replica not open yet", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9), {Shard: 1, Held: true, Role: "not open", created: true}}},
			false, "shard 1 is not open here yet"},
		{"its only replica is being added: as a node holding none", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{adding}}, true, ""},
		{"a replica being added does not serve for the others", readyView{Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{adding, sick}}, false, "shard 1 has no leader"},
		{"no leader of the map group comes first", readyView{NodeProblem: "no leader", Sharded: true, Map: mapOK,
			Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9)}}, false, "no leader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := readyOf(c.v)
			if r.Ready != c.ready || !strings.Contains(r.Problem, c.problem) || r.Ready && r.Problem != "" {
				t.Fatalf("ready %v %q, want %v %q", r.Ready, r.Problem, c.ready, c.problem)
			}
			if c.v.Sharded && (r.Map == nil || len(r.Shards) != len(c.v.Shards)) {
				t.Fatalf("shards not reported: %+v", r)
			}
		})
	}
}

// TestReadinessLinesAndShardReady: the body names every shard with its
// leader, this node's role and how far it has applied; the per-shard answer
// is yes only for a shard with a leader and a caught-up replica here.
func TestReadinessLinesAndShardReady(t *testing.T) {
	r := readyOf(readyView{Sharded: true, Map: held(-1, "follower", "n3", 10, 10),
		Shards: []ShardReadiness{held(0, "leader", "n1", 9, 9), held(1, "candidate", "", 40, 41), {Shard: 2, Leader: "n5"},
			{Shard: 3, Role: "removed", Problem: "a recovery cut this node off the shard"}}})
	want := []string{
		"map: leader n3; this node: follower, applied 10, commit 10, caught up",
		"shard 0: leader n1; this node: leader, applied 9, commit 9, caught up",
		"shard 1: no leader; this node: candidate, applied 40, commit 41, caught up",
		"shard 2: leader n5; not held here",
		"shard 3: no leader; this node: removed (a recovery cut this node off the shard)",
	}
	if got := r.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err := r.ShardReady(0); err != nil {
		t.Errorf("shard 0: %v", err)
	}
	if err := r.ShardReady(1); err == nil || !strings.Contains(err.Error(), "shard 1 has no leader") {
		t.Errorf("shard 1: %v", err)
	}
	if err := r.ShardReady(2); err == nil || !strings.Contains(err.Error(), "holds no replica of shard 2") {
		t.Errorf("shard 2: %v", err)
	}
	for _, s := range []int{-1, 4} {
		if err := r.ShardReady(s); !errors.Is(err, ErrNoSuchShard) {
			t.Errorf("shard %d: %v", s, err)
		}
	}
	one := readyOf(readyView{})
	if err := one.ShardReady(0); err != nil || !errors.Is(one.ShardReady(1), ErrNoSuchShard) || len(one.Lines()) != 0 {
		t.Errorf("a cluster of one group: shard 0 %v, shard 1 %v, lines %q", err, one.ShardReady(1), one.Lines())
	}
	down := readyOf(readyView{NodeProblem: "no leader"})
	if err := down.ShardReady(0); err == nil || err.Error() != "no leader" {
		t.Errorf("a cluster of one group without a leader: shard 0 %v", err)
	}
}
