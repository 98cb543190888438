package cluster

import (
	"slices"

	"github.com/hashicorp/raft"
)

// Each group's leader moves its configuration towards the map's placement of
// the group (docs/SHARDING.md, "Placement"): add what the map places and the
// configuration lacks, promote it once caught up, and only once every placed
// replica votes, remove what the map no longer places, one at a time; a
// leader the map moves away hands leadership over first. planGroup decides;
// membershipExec carries it out, as for membership (plan.go).

// groupView is what a group's leader observed when it plans.
type groupView struct {
	Self    string        // the leader's id
	Servers []raft.Server // the group's latest configuration
	Want    []string      // the replicas the map places
	Leader  string        // the leader the map prefers ("" none)
	// Raft is each node's Raft address (gossip), for the servers to add.
	Raft map[string]string
	// Applied is each server's applied index, as far as the leader knows
	// (absent: not heard of); CaughtUp compares it with Commit.
	Applied map[string]uint64
	Commit  uint64
	// Away are the nodes not to hand leadership to: stopping, dead, left.
	Away map[string]bool
}

// caughtUp reports whether server id has applied within catchUpSlack of the
// leader's commit index.
func (v groupView) caughtUp(id string) bool {
	if id == v.Self {
		return true
	}
	a, ok := v.Applied[id]
	return ok && a+catchUpSlack >= v.Commit
}

// planGroup decides the next membership steps of a group.
func planGroup(v groupView) []action {
	voter := map[string]bool{}
	in := map[string]raft.Server{}
	for _, s := range v.Servers {
		in[string(s.ID)] = s
		voter[string(s.ID)] = s.Suffrage == raft.Voter
	}
	var acts []action
	settled := true
	for _, id := range v.Want {
		s, ok := in[id]
		switch {
		case !ok:
			settled = false
			if addr := v.Raft[id]; addr != "" && !v.Away[id] {
				acts = append(acts, action{Kind: actAddNonvoter, ID: id, Addr: addr})
			}
		case !voter[id]:
			settled = false
			acts = append(acts, action{Kind: actPromote, ID: id, Addr: string(s.Address), MinApplied: sub0(v.Commit, catchUpSlack)})
		}
	}
	// A non-voter the map does not place goes at once: it holds no vote.
	for _, s := range v.Servers {
		if id := string(s.ID); !voter[id] && !slices.Contains(v.Want, id) {
			acts = append(acts, action{Kind: actRemove, ID: id})
		}
	}
	if !settled || len(v.Want) == 0 {
		return acts
	}
	// Every placed replica votes: surplus voters go, one per round, the
	// leader last (it hands leadership to a placed voter first).
	var surplus []string
	for _, s := range v.Servers {
		if id := string(s.ID); voter[id] && !slices.Contains(v.Want, id) {
			surplus = append(surplus, id)
		}
	}
	slices.Sort(surplus)
	for _, id := range surplus {
		if id != v.Self {
			return append(acts, action{Kind: actRemove, ID: id})
		}
	}
	if len(surplus) > 0 {
		// Only the leader itself is surplus.
		if to := v.transferTarget(in); to != "" {
			return append(acts, action{Kind: actTransfer, ID: to, Addr: string(in[to].Address)})
		}
		return acts
	}
	if l := v.Leader; l != "" && l != v.Self && voter[l] && v.caughtUp(l) && !v.Away[l] {
		acts = append(acts, action{Kind: actTransfer, ID: l, Addr: string(in[l].Address)})
	}
	return acts
}

// transferTarget is the placed voter leadership should go to: the preferred
// leader if it is a caught-up voter, else the first caught-up placed voter.
func (v groupView) transferTarget(in map[string]raft.Server) string {
	ok := func(id string) bool {
		s, there := in[id]
		return there && s.Suffrage == raft.Voter && id != v.Self && v.caughtUp(id) && !v.Away[id]
	}
	if ok(v.Leader) {
		return v.Leader
	}
	for _, id := range v.Want {
		if ok(id) {
			return id
		}
	}
	return ""
}
