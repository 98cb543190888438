package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

const testDeadTimeout = 10 * time.Second

// Configuration and gossip builders for the planner's tables.
func voter(id string) raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":raft")}
}

func nonvoter(id string) raft.Server {
	return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id), Address: raft.ServerAddress(id + ":raft")}
}

func alive(id string) member {
	return member{meta: meta{ID: id, Raft: id + ":raft"}, state: memberlist.StateAlive}
}

func dead(id string) member {
	m := alive(id)
	m.state = memberlist.StateDead
	return m
}

func with(m member, change func(*member)) member {
	change(&m)
	return m
}

// fmtActions renders a plan compactly: "add n4", "remove n3", "warn quorum:n3".
func fmtActions(acts []action) []string {
	var out []string
	for _, a := range acts {
		switch a.Kind {
		case actAddNonvoter:
			out = append(out, "add "+a.ID+" "+a.Addr)
		case actPromote:
			out = append(out, fmt.Sprintf("promote %s at %d", a.ID, a.MinApplied))
		case actMove:
			out = append(out, fmt.Sprintf("move %s %s->%s voter=%v", a.ID, a.Old, a.Addr, a.Voter))
		case actRemove:
			out = append(out, "remove "+a.ID)
		case actTellRemoved:
			out = append(out, "tell "+a.ID)
		case actWarn:
			out = append(out, "warn "+a.Key)
		case actDemote:
			out = append(out, "demote "+a.ID)
		}
	}
	return out
}

// TestPlanMembership: every membership rule of README "Running in production"
// (and cluster/DESIGN.md, Membership) is a row. goneSince says how long ago
// an earlier round first saw each server gone; unreached how long raft has
// failed to reach it.
func TestPlanMembership(t *testing.T) {
	for _, tc := range []struct {
		name      string
		servers   []raft.Server
		members   []member
		goneSince map[string]time.Duration
		unreached map[string]time.Duration
		departed  map[string]time.Duration // asked to be removed this long ago
		commit    uint64
		maxVoters int // a sharded cluster's map group caps its voters
		want      []string
	}{{
		name:    "steady: every voter alive, nothing to do",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []member{alive("n1"), alive("n2"), alive("n3")},
	}, {
		name:    "an alive member out of the configuration joins as a non-voter",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []member{alive("n1"), alive("n2"), alive("n3"), alive("n4")},
		want:    []string{"add n4 n4:raft"},
	}, {
		name:    "a dead member out of the configuration is not added",
		servers: []raft.Server{voter("n1")},
		members: []member{alive("n1"), dead("n4")},
	}, {
		name:    "a leaving member is not added back",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []member{alive("n1"), alive("n2"), alive("n3"), with(alive("n4"), func(m *member) { m.Leaving = true })},
	}, {
		name:     "a member that asked to be removed is not added back for a while",
		servers:  []raft.Server{voter("n1"), voter("n2")},
		members:  []member{alive("n1"), alive("n2"), alive("n3")},
		departed: map[string]time.Duration{"n3": departingFor - time.Second},
	}, {
		name:     "a member that asked to be removed long ago is added as new",
		servers:  []raft.Server{voter("n1"), voter("n2")},
		members:  []member{alive("n1"), alive("n2"), alive("n3")},
		departed: map[string]time.Duration{"n3": departingFor + time.Second},
		want:     []string{"add n3 n3:raft"},
	}, {
		name:    "a removed member with its old state is told, not added back",
		servers: []raft.Server{voter("n1"), voter("n2")},
		members: []member{alive("n1"), alive("n2"), with(alive("n3"), func(m *member) { m.Member = true })},
		want:    []string{"warn removed:n3", "tell n3"},
	}, {
		name:    "a non-voter is promoted once within catchUpSlack of the commit index",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		members: []member{alive("n1"), alive("n2"), alive("n3"), alive("n4")},
		commit:  1000,
		want:    []string{fmt.Sprintf("promote n4 at %d", 1000-catchUpSlack)},
	}, {
		name:    "a member restarted at a new address is moved, keeping its vote",
		servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members: []member{alive("n1"), alive("n2"), with(alive("n3"), func(m *member) { m.Raft = "10.0.0.9:6481" })},
		want:    []string{"move n3 n3:raft->10.0.0.9:6481 voter=true"},
	}, {
		name:    "a non-voter restarted at a new address stays a non-voter",
		servers: []raft.Server{voter("n1"), nonvoter("n2")},
		members: []member{alive("n1"), with(alive("n2"), func(m *member) { m.Raft = "10.0.0.9:6481" })},
		want:    []string{"move n2 n2:raft->10.0.0.9:6481 voter=false"},
	}, {
		name:      "gone to gossip for less than the timeout: kept",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n3": testDeadTimeout - time.Second},
		unreached: map[string]time.Duration{"n3": time.Hour},
	}, {
		name:      "gone to gossip for the timeout but answering raft: kept, and said so",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n3": time.Hour},
		want:      []string{"warn answers:n3"},
	}, {
		name:      "gone to gossip for the timeout, unreached by raft for less: kept",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n3": time.Hour},
		unreached: map[string]time.Duration{"n3": testDeadTimeout - time.Second},
	}, {
		name:      "unreached by raft for the timeout, gone to gossip for less: kept",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n3": testDeadTimeout - time.Second},
		unreached: map[string]time.Duration{"n3": time.Hour},
	}, {
		name:      "dead to gossip and raft for the whole timeout: removed",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n3": testDeadTimeout},
		unreached: map[string]time.Duration{"n3": testDeadTimeout},
		want:      []string{"remove n3"},
	}, {
		name:      "a left member counts as gone",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), with(dead("n3"), func(m *member) { m.state = memberlist.StateLeft })},
		goneSince: map[string]time.Duration{"n3": time.Hour},
		unreached: map[string]time.Duration{"n3": time.Hour},
		want:      []string{"remove n3"},
	}, {
		name:      "a server gossip has never listed counts as gone",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2")},
		goneSince: map[string]time.Duration{"n3": time.Hour},
		unreached: map[string]time.Duration{"n3": time.Hour},
		want:      []string{"remove n3"},
	}, {
		name:      "the first round that sees a server gone starts its clock",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), alive("n2"), dead("n3")},
		unreached: map[string]time.Duration{"n3": time.Hour},
	}, {
		name:      "never below quorum: two dead of three voters stay",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{alive("n1"), dead("n2"), dead("n3")},
		goneSince: map[string]time.Duration{"n2": time.Hour, "n3": time.Hour},
		unreached: map[string]time.Duration{"n2": time.Hour, "n3": time.Hour},
		want:      []string{"warn quorum:n2", "warn quorum:n3"},
	}, {
		name:      "healthy means alive to gossip and reached by raft",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), dead("n4"), dead("n5")},
		goneSince: map[string]time.Duration{"n4": time.Hour, "n5": time.Hour},
		unreached: map[string]time.Duration{"n3": time.Second, "n4": time.Hour, "n5": time.Hour},
		want:      []string{"warn quorum:n4", "warn quorum:n5"},
	}, {
		name:      "two dead of five voters are both removed while three stay healthy",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), dead("n4"), dead("n5")},
		goneSince: map[string]time.Duration{"n4": time.Hour, "n5": time.Hour},
		unreached: map[string]time.Duration{"n4": time.Hour, "n5": time.Hour},
		want:      []string{"remove n4", "remove n5"},
	}, {
		name:      "a dead non-voter goes without the quorum guard",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4")},
		members:   []member{alive("n1"), dead("n2"), dead("n3"), dead("n4")},
		goneSince: map[string]time.Duration{"n2": time.Hour, "n3": time.Hour, "n4": time.Hour},
		unreached: map[string]time.Duration{"n2": time.Hour, "n3": time.Hour, "n4": time.Hour},
		want:      []string{"warn quorum:n2", "warn quorum:n3", "remove n4"},
	}, {
		name:      "voters capped: a non-voter stays one while the cap's voters are alive",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), nonvoter("n6")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), alive("n5"), alive("n6")},
		maxVoters: 5,
	}, {
		name:      "voters capped: non-voters promoted up to the cap, in configuration order",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), nonvoter("n4"), nonvoter("n5"), nonvoter("n6")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), alive("n5"), alive("n6")},
		commit:    100,
		maxVoters: 5,
		want:      []string{"promote n4 at 36", "promote n5 at 36"},
	}, {
		name:      "voters capped: a surplus of voters is demoted, the highest ids first",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), voter("n6"), voter("n7")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), alive("n5"), alive("n6"), alive("n7")},
		maxVoters: 5,
		want:      []string{"demote n7", "demote n6"},
	}, {
		name:      "voters capped: an unhealthy voter is demoted before a healthy one",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), voter("n6")},
		members:   []member{alive("n1"), dead("n2"), alive("n3"), alive("n4"), alive("n5"), alive("n6")},
		goneSince: map[string]time.Duration{"n2": time.Second},
		unreached: map[string]time.Duration{"n2": time.Second},
		maxVoters: 5,
		want:      []string{"demote n2"},
	}, {
		name:      "voters capped: a dead voter within the timeout keeps its seat",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), nonvoter("n6")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), dead("n5"), alive("n6")},
		goneSince: map[string]time.Duration{"n5": time.Second},
		unreached: map[string]time.Duration{"n5": time.Hour},
		maxVoters: 5,
	}, {
		name:      "voters capped: a dead voter removed makes room for a non-voter",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3"), voter("n4"), voter("n5"), nonvoter("n6")},
		members:   []member{alive("n1"), alive("n2"), alive("n3"), alive("n4"), dead("n5"), alive("n6")},
		goneSince: map[string]time.Duration{"n5": time.Hour},
		unreached: map[string]time.Duration{"n5": time.Hour},
		commit:    100,
		maxVoters: 5,
		want:      []string{"remove n5", "promote n6 at 36"},
	}, {
		name:      "the leader never removes itself, whatever gossip says",
		servers:   []raft.Server{voter("n1"), voter("n2"), voter("n3")},
		members:   []member{dead("n1"), alive("n2"), alive("n3")},
		goneSince: map[string]time.Duration{"n1": time.Hour},
		unreached: map[string]time.Duration{"n1": time.Hour},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			r := newReconciler(testDeadTimeout)
			for id, ago := range tc.goneSince {
				r.deadFor(id, now.Add(-ago))
			}
			for id, ago := range tc.departed {
				r.noteDeparting(id, now.Add(-ago))
			}
			got := fmtActions(r.plan(membershipView{Self: "n1", Servers: tc.servers, Members: tc.members,
				Unreached: tc.unreached, Commit: tc.commit, MaxVoters: tc.maxVoters}, now))
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("plan:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A server that comes back alive starts its dead clock again: a removal needs
// the whole timeout of one continuous absence.
func TestPlanDeadClockRestartsWhenAlive(t *testing.T) {
	r := newReconciler(testDeadTimeout)
	t0 := time.Unix(1_000_000, 0)
	servers := []raft.Server{voter("n1"), voter("n2"), voter("n3")}
	unreached := map[string]time.Duration{"n3": time.Hour}
	view := func(m member) membershipView {
		return membershipView{Self: "n1", Servers: servers, Members: []member{alive("n1"), alive("n2"), m}, Unreached: unreached}
	}
	for _, step := range []struct {
		at   time.Duration
		n3   member
		want []string
	}{
		{0, dead("n3"), nil},
		{testDeadTimeout - time.Second, dead("n3"), nil},
		{testDeadTimeout - time.Second/2, alive("n3"), nil},
		{testDeadTimeout + time.Second, dead("n3"), nil},
		{2*testDeadTimeout + time.Second, dead("n3"), []string{"remove n3"}},
	} {
		if got := fmtActions(r.plan(view(step.n3), t0.Add(step.at))); !reflect.DeepEqual(got, step.want) {
			t.Fatalf("at %v: got %q, want %q", step.at, got, step.want)
		}
	}
}

// TestPlanIsPure: the planner calls nothing; planning twice from the same
// memory and view gives the same plan.
func TestPlanIsPure(t *testing.T) {
	view := membershipView{Self: "n1", Servers: []raft.Server{voter("n1"), nonvoter("n2")},
		Members: []member{alive("n1"), alive("n2"), alive("n3")}, Commit: 10}
	now := time.Unix(5, 0)
	a := newReconciler(testDeadTimeout).plan(view, now)
	b := newReconciler(testDeadTimeout).plan(view, now)
	if !reflect.DeepEqual(a, b) || len(a) != 2 {
		t.Fatalf("two plans differ or are wrong: %v / %v", fmtActions(a), fmtActions(b))
	}
}

// execHarness runs membership plans against a fake raft, with a table of
// what the node at each address answers when asked who it is.
type execHarness struct {
	r      *fakeRaft
	ids    map[string]peerStatus // by raft address
	warns  []string
	told   []string
	forgot []string
}

func newExecHarness(r *fakeRaft) *execHarness {
	return &execHarness{r: r, ids: map[string]peerStatus{}}
}

func (h *execHarness) exec() membershipExec {
	return membershipExec{
		r: h.r,
		verify: func(id, addr string) (peerStatus, error) {
			ps, ok := h.ids[addr]
			if !ok {
				return ps, errors.New("connection refused")
			}
			if ps.ID != id {
				return ps, errWrongIdentity
			}
			return ps, nil
		},
		tell:    func(id string) { h.told = append(h.told, id) },
		forget:  func(id string) { h.forgot = append(h.forgot, id) },
		warn:    func(key, msg string, args ...any) { h.warns = append(h.warns, key) },
		log:     discardLogger(),
		timeout: time.Second,
	}
}

// TestExecuteMembership: every change is gated by the identity the node at the
// address proves, a promotion by its applied index, and a failed change ends
// the round.
func TestExecuteMembership(t *testing.T) {
	t.Run("add only once the address answers as the member", func(t *testing.T) {
		h := newExecHarness(newFakeRaft("n1", "n1"))
		h.ids["n4:raft"] = peerStatus{ID: "n9"}
		h.exec().run([]action{{Kind: actAddNonvoter, ID: "n4", Addr: "n4:raft"}, {Kind: actAddNonvoter, ID: "n5", Addr: "n5:raft"}})
		if calls := h.r.callLog(); len(calls) != 0 {
			t.Fatalf("added a member whose address answered as another, or not at all: %q", calls)
		}
		if !reflect.DeepEqual(h.warns, []string{"add:n4", "add:n5"}) {
			t.Fatalf("warnings %q", h.warns)
		}
		h.ids["n4:raft"] = peerStatus{ID: "n4"}
		h.exec().run([]action{{Kind: actAddNonvoter, ID: "n4", Addr: "n4:raft"}})
		if calls := h.r.callLog(); !reflect.DeepEqual(calls, []string{"add-nonvoter n4 n4:raft"}) {
			t.Fatalf("calls %q", calls)
		}
	})
	t.Run("promote only once caught up", func(t *testing.T) {
		h := newExecHarness(newFakeRaft("n1", "n1"))
		h.ids["n2:raft"] = peerStatus{ID: "n2", AppliedIndex: 99}
		h.exec().run([]action{{Kind: actPromote, ID: "n2", Addr: "n2:raft", MinApplied: 100}})
		if calls := h.r.callLog(); len(calls) != 0 {
			t.Fatalf("promoted a member behind the slack: %q", calls)
		}
		h.ids["n2:raft"] = peerStatus{ID: "n2", AppliedIndex: 100}
		h.exec().run([]action{{Kind: actPromote, ID: "n2", Addr: "n2:raft", MinApplied: 100}})
		if calls := h.r.callLog(); !reflect.DeepEqual(calls, []string{"add-voter n2 n2:raft"}) {
			t.Fatalf("calls %q", calls)
		}
	})
	t.Run("a move keeps the suffrage and needs the new address to prove itself", func(t *testing.T) {
		h := newExecHarness(newFakeRaft("n1", "n1", "n2"))
		h.exec().run([]action{{Kind: actMove, ID: "n2", Addr: "new:1", Old: "n2:raft", Voter: true}})
		h.ids["new:1"] = peerStatus{ID: "n2"}
		h.exec().run([]action{{Kind: actMove, ID: "n2", Addr: "new:1", Old: "n2:raft", Voter: true},
			{Kind: actMove, ID: "n3", Addr: "new:1", Old: "n3:raft"}})
		if calls := h.r.callLog(); !reflect.DeepEqual(calls, []string{"add-voter n2 new:1"}) {
			t.Fatalf("calls %q", calls)
		}
		if !reflect.DeepEqual(h.warns, []string{"move:n2", "move:n3"}) {
			t.Fatalf("warnings %q", h.warns)
		}
	})
	t.Run("removal forgets the member; a refused change ends the round", func(t *testing.T) {
		h := newExecHarness(newFakeRaft("n1", "n1", "n2", "n3", "n4", "n5"))
		h.exec().run([]action{{Kind: actRemove, ID: "n4"}})
		h.r.changeErr = raft.ErrLeadershipLost
		h.exec().run([]action{{Kind: actRemove, ID: "n5"}, {Kind: actRemove, ID: "n3"}, {Kind: actTellRemoved, ID: "n6"}})
		if calls := h.r.callLog(); !reflect.DeepEqual(calls, []string{"remove n4", "remove n5"}) {
			t.Fatalf("calls %q", calls)
		}
		if !reflect.DeepEqual(h.forgot, []string{"n4"}) || len(h.told) != 0 {
			t.Fatalf("forgot %q told %q", h.forgot, h.told)
		}
	})
}

// TestReconcileRoundsAgainstFakeRaft drives observe-plan-execute rounds over a
// fake raft: a new member is added, then promoted once it has caught up; a
// failed voter is then removed after the timeout.
func TestReconcileRoundsAgainstFakeRaft(t *testing.T) {
	fr := newFakeRaft("n1", "n1", "n2", "n3")
	fr.commit = 500
	h := newExecHarness(fr)
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		h.ids[id+":raft"] = peerStatus{ID: id, AppliedIndex: 10}
	}
	rec := newReconciler(testDeadTimeout)
	members := []member{alive("n1"), alive("n2"), alive("n3"), alive("n4")}
	unreached := map[string]time.Duration{}
	t0 := time.Unix(1_000_000, 0)
	round := func(at time.Duration) {
		servers, err := latestServers(fr)
		if err != nil {
			t.Fatal(err)
		}
		h.exec().run(rec.plan(membershipView{Self: "n1", Servers: servers, Members: members, Unreached: unreached,
			Commit: fr.CommitIndex()}, t0.Add(at)))
	}
	round(0)
	round(time.Second) // not caught up: stays a non-voter
	h.ids["n4:raft"] = peerStatus{ID: "n4", AppliedIndex: 480}
	round(2 * time.Second)
	members[2] = dead("n3")
	unreached["n3"] = time.Minute
	round(3 * time.Second)
	round(3*time.Second + testDeadTimeout)
	want := []string{"add-nonvoter n4 n4:raft", "add-voter n4 n4:raft", "remove n3"}
	if calls := fr.callLog(); !reflect.DeepEqual(calls, want) {
		t.Fatalf("calls:\n got %q\nwant %q", calls, want)
	}
	servers, _ := latestServers(fr)
	var ids []string
	for _, s := range servers {
		ids = append(ids, fmt.Sprintf("%s:%v", s.ID, s.Suffrage))
	}
	if got := strings.Join(ids, " "); got != "n1:Voter n2:Voter n4:Voter" {
		t.Fatalf("configuration %s", got)
	}
}
