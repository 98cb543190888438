package cluster

import (
	"reflect"
	"testing"

	"github.com/hashicorp/raft"
)

// TestPlanGroup: a group's leader moves its configuration towards the map,
// adding before it removes, so a move never takes the group below its
// replicas or its quorum.
func TestPlanGroup(t *testing.T) {
	addrs := map[string]string{"n1": "n1:raft", "n2": "n2:raft", "n3": "n3:raft", "n4": "n4:raft"}
	caught := map[string]uint64{"n1": 100, "n2": 100, "n3": 100, "n4": 100}
	for _, tc := range []struct {
		name    string
		servers []raft.Server
		want    []string
		leader  string
		applied map[string]uint64
		plan    []string
	}{{
		name:    "settled: nothing to do",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		want:    []string{"n1", "n2", "n3"}, leader: "n1",
	}, {
		name:    "a move starts by adding the new replica as a non-voter",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		want:    []string{"n1", "n2", "n4"},
		plan:    []string{"add n4 n4:raft"},
	}, {
		name:    "then promotes it once caught up, keeping the replica it replaces",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		want:    []string{"n1", "n2", "n4"},
		plan:    []string{"promote n4 at 36"},
	}, {
		name:    "and removes the replaced one only once the new one votes",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
		want:    []string{"n1", "n2", "n4"},
		plan:    []string{"remove n3"},
	}, {
		name:    "surplus voters go one per round",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
		want:    []string{"n1", "n2"},
		plan:    []string{"remove n3"},
	}, {
		name:    "a leader the map moves away hands leadership to a placed voter first",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
		want:    []string{"n2", "n3", "n4"}, leader: "n3",
		plan: []string{"transfer n3"},
	}, {
		name:    "... to a caught-up one",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4")},
		want:    []string{"n2", "n3", "n4"}, leader: "n3",
		applied: map[string]uint64{"n2": 100, "n3": 10, "n4": 100},
		plan:    []string{"transfer n2"},
	}, {
		name:    "a non-voter the map no longer places goes at once",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		want:    []string{"n1", "n2", "n3"},
		plan:    []string{"remove n4"},
	}, {
		name:    "leadership moves to the preferred leader once it is a caught-up voter",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		want:    []string{"n1", "n2", "n3"}, leader: "n2",
		plan: []string{"transfer n2"},
	}, {
		name:    "not to one behind",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		want:    []string{"n1", "n2", "n3"}, leader: "n2",
		applied: map[string]uint64{"n2": 1},
	}, {
		name:    "not while the configuration is still moving",
		servers: []raft.Server{voter("n1"), voter("n2"), nonvoter("n3")},
		want:    []string{"n1", "n2", "n3"}, leader: "n2",
		plan: []string{"promote n3 at 36"},
	}, {
		name:    "a replica whose address is unknown is not added yet",
		servers: []raft.Server{voter("n1")},
		want:    []string{"n1", "n9"},
	}, {
		name:    "a map with no replicas for the group changes nothing",
		servers: []raft.Server{voter("n1"), voter("n2")},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			applied := tc.applied
			if applied == nil {
				applied = caught
			}
			got := fmtGroupActions(planGroup(groupView{Self: "n1", Servers: tc.servers, Want: tc.want, Leader: tc.leader,
				Raft: addrs, Applied: applied, Commit: 100}))
			if !reflect.DeepEqual(got, tc.plan) {
				t.Fatalf("plan:\n got %q\nwant %q", got, tc.plan)
			}
		})
	}
}

func fmtGroupActions(acts []action) []string {
	var out []string
	for _, a := range acts {
		if a.Kind == actTransfer {
			out = append(out, "transfer "+a.ID)
			continue
		}
		out = append(out, fmtActions([]action{a})...)
	}
	return out
}

// TestGroupMovesAgainstFakeRaft runs plan and executor rounds of a move (n3 to
// n4) on a fake raft: never fewer than three voters, and the end is the map's.
func TestGroupMovesAgainstFakeRaft(t *testing.T) {
	fr := newFakeRaft("n1", "n1", "n2", "n3")
	fr.commit = 100
	h := newExecHarness(fr)
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		h.ids[id+":raft"] = peerStatus{ID: id, AppliedIndex: 100}
	}
	want := []string{"n1", "n2", "n4"}
	for round := 0; round < 10; round++ {
		servers, _ := latestServers(fr)
		if v := countVoters(servers); v < 3 {
			t.Fatalf("round %d: %d voters", round, v)
		}
		acts := planGroup(groupView{Self: "n1", Servers: servers, Want: want, Raft: map[string]string{"n4": "n4:raft"},
			Applied: map[string]uint64{"n2": 100, "n3": 100, "n4": 100}, Commit: 100})
		if len(acts) == 0 {
			break
		}
		h.exec().run(acts)
	}
	if calls := fr.callLog(); !reflect.DeepEqual(calls, []string{"add-nonvoter n4 n4:raft", "add-voter n4 n4:raft", "remove n3"}) {
		t.Fatalf("calls %q", calls)
	}
}
