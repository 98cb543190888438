package cluster

import (
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
)

// membershipExec carries out a membership plan (plan.go): the effects, kept
// thin. Every add, promotion and move first asks the node at the Raft address
// who it is (verify), so gossip alone never makes a voter or moves an
// address. A membership change raft refuses ends the round: the rest of the
// plan assumed it, and the next round plans afresh.
type membershipExec struct {
	r       raftAPI
	verify  func(id, addr string) (peerStatus, error)
	tell    func(id string) // tell a former member it is out (gossip)
	forget  func(id string) // a removed member's dead-since record
	warn    func(key, msg string, args ...any)
	log     *slog.Logger
	timeout time.Duration
}

// run takes the actions in order, stopping at the first failed change.
func (e membershipExec) run(acts []action) {
	for _, a := range acts {
		if !e.do(a) {
			return
		}
	}
}

// do takes one action; false when raft refused a membership change.
func (e membershipExec) do(a action) bool {
	id := raft.ServerID(a.ID)
	switch a.Kind {
	case actWarn:
		args := []any{"id", a.ID}
		if a.Dead > 0 {
			args = append(args, "gossip_gone_for", a.Dead.Round(time.Second))
		}
		if a.Unreached > 0 {
			args = append(args, "raft_unreached_for", a.Unreached.Round(time.Second))
		}
		e.warn(a.Key, a.Msg, args...)
	case actTellRemoved:
		e.tell(a.ID)
	case actAddNonvoter:
		if _, err := e.verify(a.ID, a.Addr); err != nil {
			e.warn("add:"+a.ID, "not adding member: its raft address did not prove its identity",
				"id", a.ID, "raft", a.Addr, "err", err)
			return true
		}
		e.log.Info("adding member as non-voter", "id", a.ID, "raft", a.Addr)
		if err := e.r.AddNonvoter(id, raft.ServerAddress(a.Addr), 0, e.timeout).Error(); err != nil {
			e.log.Warn("add non-voter", "id", a.ID, "err", err)
			return false
		}
	case actPromote:
		ps, err := e.verify(a.ID, a.Addr)
		if err != nil || ps.AppliedIndex < a.MinApplied {
			return true // not reachable or not caught up yet: next round
		}
		e.log.Info("promoting caught-up member to voter", "id", a.ID, "applied", ps.AppliedIndex)
		if err := e.r.AddVoter(id, raft.ServerAddress(a.Addr), 0, e.timeout).Error(); err != nil {
			e.log.Warn("promote", "id", a.ID, "err", err)
			return false
		}
	case actMove:
		if _, err := e.verify(a.ID, a.Addr); err != nil {
			e.warn("move:"+a.ID, "not moving member: its new raft address did not prove its identity",
				"id", a.ID, "old", a.Old, "new", a.Addr, "err", err)
			return true
		}
		e.log.Info("updating member address", "id", a.ID, "old", a.Old, "new", a.Addr)
		add := e.r.AddNonvoter
		if a.Voter {
			add = e.r.AddVoter
		}
		if err := add(id, raft.ServerAddress(a.Addr), 0, e.timeout).Error(); err != nil {
			e.log.Warn("update member address", "id", a.ID, "err", err)
			return false
		}
	case actDemote:
		e.log.Info("demoting a voter beyond the group's cap to non-voter", "id", a.ID)
		if err := e.r.DemoteVoter(id, 0, e.timeout).Error(); err != nil {
			e.log.Warn("demote", "id", a.ID, "err", err)
			return false
		}
	case actTransfer:
		e.log.Info("handing leadership over", "to", a.ID)
		if err := e.r.LeadershipTransferToServer(id, raft.ServerAddress(a.Addr)).Error(); err != nil {
			e.log.Warn("leadership transfer", "to", a.ID, "err", err)
			return false
		}
	case actRemove:
		if a.Dead > 0 || a.Unreached > 0 {
			e.log.Info("removing dead member", "id", a.ID, "dead_for", a.Dead.Round(time.Second),
				"raft_unreached_for", a.Unreached.Round(time.Second))
		} else {
			e.log.Info("removing a member the map no longer places here", "id", a.ID)
		}
		if err := e.r.RemoveServer(id, 0, e.timeout).Error(); err != nil {
			e.log.Warn("remove member", "id", a.ID, "err", err)
			return false
		}
		e.forget(a.ID)
	}
	return true
}
