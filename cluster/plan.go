package cluster

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// Membership decisions. The leader reconciles the Raft configuration with
// gossip in three steps (reconcile.go): observe (read the configuration,
// gossip's members and raft's reachability), plan (this file: a pure
// function of what was observed and the time, no raft, no network, no
// clock), then execute the plan's actions, stopping at the first membership
// change that fails. The rules, as README "Running in production" states
// them, each a row of plan_test.go:
//
//   - An alive member out of the configuration joins as a non-voter, once the
//     node at its Raft address proves it is that member.
//   - A member on its way out (it gossips Leaving, or asked to be removed in
//     the last departingFor) is not added back.
//   - A former member that still holds the state it had as a member (removed,
//     or left) is not added back; it is told so.
//   - A non-voter is promoted once its applied index is within catchUpSlack of
//     the leader's commit index, while the group has fewer voters than
//     MaxVoters (when set: a sharded cluster's map group, whose every node
//     holds the map but only a few vote on it).
//   - A member restarted at a new Raft address is re-added at it, with the
//     same suffrage, once the node there proves who it is.
//   - A member is removed as dead only when gossip has listed it as gone AND
//     raft has not reached it, each for the whole DeadServerTimeout; a member
//     that answers raft stays whatever gossip says.
//   - A dead voter is removed only while a healthy quorum remains (healthy:
//     alive to gossip and reached by raft); the leader itself is never
//     removed by reconciliation.
//   - A group with more voters than MaxVoters demotes the surplus to
//     non-voters, the unhealthy first, then the highest ids; never the
//     leader.

// catchUpSlack is how far behind the leader's commit index a non-voter may be
// and still be promoted to voter.
const catchUpSlack = 64

// departingFor is how long the leader keeps from adding back a member that
// asked to be removed: longer than a member takes from its removal to
// announcing that it leaves, in case that announcement reaches the leader
// after the request.
const departingFor = 5 * time.Second

// actionKind is what an action does.
type actionKind uint8

const (
	// actAddNonvoter adds ID at Addr as a non-voter, once the node at Addr
	// answers as ID.
	actAddNonvoter actionKind = iota + 1
	// actPromote makes non-voter ID a voter, once the node at Addr answers as
	// ID with an applied index of at least MinApplied.
	actPromote
	// actMove re-adds ID at its new Addr with the same suffrage (Voter), once
	// the node there answers as ID.
	actMove
	// actRemove removes ID, dead to gossip and to raft.
	actRemove
	// actTellRemoved tells the former member ID, over gossip, that it is out
	// of the configuration.
	actTellRemoved
	// actWarn says why the planner did not act (at most once a minute per Key).
	actWarn
	// actTransfer hands leadership of the group to voter ID at Addr.
	actTransfer
	// actDemote makes voter ID a non-voter: the group has more voters than
	// its cap.
	actDemote
)

// action is one step of a membership plan.
type action struct {
	Kind       actionKind
	ID         string
	Addr       string // raft address to verify and use (add, promote, move)
	Old        string // the configuration's address, for a move
	Voter      bool   // a move keeps the member a voter
	MinApplied uint64 // a promotion needs the member's applied index at least this
	// Dead and Unreached say, for a removal, how long gossip has listed the
	// member as gone and raft has failed to reach it.
	Dead, Unreached time.Duration
	// Key and Msg are the warning of actWarn.
	Key, Msg string
}

// membershipView is what the leader observed when it plans.
type membershipView struct {
	Self    string        // the leader's own id
	Servers []raft.Server // the latest configuration
	Members []member      // gossip's members, by id
	// Unreached is how long raft has failed to reach each server (absent: it
	// reaches it, or has said nothing of it lately).
	Unreached map[string]time.Duration
	Commit    uint64 // the leader's commit index
	// MaxVoters caps the voters promotion makes (0: no cap). Members beyond
	// it stay non-voters: they apply every entry, and one is promoted when a
	// voter goes.
	MaxVoters int
}

// reconciler holds what membership decisions remember between rounds: since
// when gossip has listed each server as gone, and which members asked to be
// removed. It reads no clock: the time comes with each call.
type reconciler struct {
	deadTimeout time.Duration
	deadSince   map[string]time.Time
	departed    map[string]time.Time
}

func newReconciler(deadTimeout time.Duration) *reconciler {
	return &reconciler{deadTimeout: deadTimeout, deadSince: map[string]time.Time{}, departed: map[string]time.Time{}}
}

// noteDeparting records that member id asked to be removed at now.
func (r *reconciler) noteDeparting(id string, now time.Time) { r.departed[id] = now }

// departing reports whether member id asked to be removed within departingFor.
func (r *reconciler) departing(id string, now time.Time) bool {
	t, ok := r.departed[id]
	if ok && now.Sub(t) > departingFor {
		delete(r.departed, id)
		return false
	}
	return ok
}

// forget drops what is remembered of server id (it was removed).
func (r *reconciler) forget(id string) { delete(r.deadSince, id) }

// deadFor is how long gossip has listed server id as gone, counting from the
// first round that saw it so.
func (r *reconciler) deadFor(id string, now time.Time) time.Duration {
	t, ok := r.deadSince[id]
	if !ok {
		r.deadSince[id] = now
		return 0
	}
	return now.Sub(t)
}

// plan decides the round's membership actions, in the order to take them.
func (r *reconciler) plan(v membershipView, now time.Time) []action {
	inConf := make(map[string]bool, len(v.Servers))
	for _, s := range v.Servers {
		inConf[string(s.ID)] = true
	}
	byID := make(map[string]member, len(v.Members))
	var acts []action
	for _, m := range v.Members {
		byID[m.ID] = m
		if !inConf[m.ID] && m.state == memberlist.StateAlive {
			acts = append(acts, r.planJoin(m, now)...)
		}
	}
	voters, healthy, promoted := 0, 0, 0
	for _, s := range v.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		id := string(s.ID)
		if m, ok := byID[id]; id == v.Self || ok && m.state == memberlist.StateAlive && v.Unreached[id] == 0 {
			healthy++
		}
	}
	for _, s := range v.Servers {
		id := string(s.ID)
		if id == v.Self {
			continue
		}
		m, ok := byID[id]
		switch {
		case !ok || m.state == memberlist.StateDead || m.state == memberlist.StateLeft:
			// A member that leaves for good has itself removed before it
			// announces its departure (Leave); one that gossip merely reports
			// as gone is treated as failed, so no gossip message alone removes
			// a voter.
			a, ok := r.planRemoval(s, v.Unreached[id], healthy, voters, now)
			if ok {
				acts = append(acts, a)
				if a.Kind == actRemove && s.Suffrage == raft.Voter {
					voters--
				}
			}
		case m.Raft != "" && m.Raft != string(s.Address):
			r.forget(id)
			acts = append(acts, action{Kind: actMove, ID: id, Addr: m.Raft, Old: string(s.Address), Voter: s.Suffrage == raft.Voter})
		default:
			r.forget(id)
			if s.Suffrage == raft.Nonvoter && (v.MaxVoters == 0 || voters+promoted < v.MaxVoters) {
				acts = append(acts, action{Kind: actPromote, ID: id, Addr: string(s.Address), MinApplied: sub0(v.Commit, catchUpSlack)})
				promoted++
			}
		}
	}
	return append(acts, planDemotions(v, byID, voters)...)
}

// planDemotions demotes the voters beyond v.MaxVoters, the unhealthy first,
// then the highest ids; never the leader.
func planDemotions(v membershipView, byID map[string]member, voters int) []action {
	if v.MaxVoters == 0 || voters <= v.MaxVoters {
		return nil
	}
	var cand []raft.Server
	for _, s := range v.Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != v.Self {
			cand = append(cand, s)
		}
	}
	healthy := func(id string) bool {
		m, ok := byID[id]
		return ok && m.state == memberlist.StateAlive && v.Unreached[id] == 0
	}
	slices.SortFunc(cand, func(a, b raft.Server) int {
		ha, hb := healthy(string(a.ID)), healthy(string(b.ID))
		if ha != hb {
			if ha {
				return 1
			}
			return -1
		}
		return strings.Compare(string(b.ID), string(a.ID))
	})
	var acts []action
	for _, s := range cand[:min(voters-v.MaxVoters, len(cand))] {
		acts = append(acts, action{Kind: actDemote, ID: string(s.ID), Addr: string(s.Address)})
	}
	return acts
}

// planJoin decides for an alive member out of the configuration.
func (r *reconciler) planJoin(m member, now time.Time) []action {
	switch {
	case m.Leaving || r.departing(m.ID, now):
		// On its way out for good: it asked to be removed, and is about to
		// leave gossip. Adding it back would make it a voter again that no
		// one removes.
		return nil
	case m.Member:
		// A former member with its old state: removed (or left) on purpose
		// or as dead. It is told so, and joins again as a new member once
		// its data directory is moved aside.
		return []action{
			{Kind: actWarn, ID: m.ID, Key: "removed:" + m.ID, Msg: "not adding a removed member back with its old state; " +
				"it is told so and joins again once its data directory is moved aside"},
			{Kind: actTellRemoved, ID: m.ID},
		}
	}
	return []action{{Kind: actAddNonvoter, ID: m.ID, Addr: m.Raft}}
}

// planRemoval decides for a server gossip lists as gone (or does not list):
// removed once gossip and raft have both lost it for the whole timeout, and a
// voter only while a healthy quorum of the others remains.
func (r *reconciler) planRemoval(s raft.Server, unreached time.Duration, healthy, voters int, now time.Time) (action, bool) {
	id := string(s.ID)
	dead := r.deadFor(id, now)
	if dead < r.deadTimeout {
		return action{}, false
	}
	if unreached == 0 {
		return action{Kind: actWarn, ID: id, Key: "answers:" + id, Dead: dead,
			Msg: "not removing a member gossip lists as gone: it answers raft"}, true
	}
	if unreached < r.deadTimeout {
		return action{}, false
	}
	if s.Suffrage == raft.Voter && healthy < (voters-1)/2+1 {
		return action{Kind: actWarn, ID: id, Key: "quorum:" + id, Dead: dead, Unreached: unreached,
			Msg: "not removing dead member: no healthy quorum would remain"}, true
	}
	return action{Kind: actRemove, ID: id, Dead: dead, Unreached: unreached}, true
}

func sub0(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}
