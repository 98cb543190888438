package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// One answer to "is this node alive", read by every decider: group 0's
// membership plan (plan.go), placement (controller.go) and each group's
// leader (groupplan.go). It is fed by two independent signals:
//
//   - gossip: memberlist's view, with when each member was last seen alive;
//   - the Raft port: a report the peer pushed (reports.go) or heartbeats that
//     reach it from a group this node leads (heal.go's raftReach).
//
// A node is dead only when both have lost it; each for how long decides when
// its replicas are replaced or it is removed (--dead-server-timeout). A node
// that left on purpose (it gossips Leaving, or said so in its report) is gone
// at once; a node that is stopping (a restart) is alive but takes no
// leadership and no new replica.

// liveState is a node's state in the liveness view.
type liveState uint8

const (
	liveAlive    liveState = iota // gossip or the Raft port answers
	liveStopping                  // shutting down to restart: alive, takes nothing new
	liveDead                      // gossip and the Raft port have both lost it
	liveLeft                      // left the cluster on purpose
)

// nodeLiveness is what the view says of one node.
type nodeLiveness struct {
	State liveState
	// GossipGone is how long gossip has listed the node as gone (0: alive
	// to gossip); RaftSilent how long nothing has come from it over the Raft
	// port (0: it answers). A dead node's DeadFor is the shorter of the two.
	GossipGone, RaftSilent time.Duration
}

// DeadFor is how long the node has been dead to both signals.
func (l nodeLiveness) DeadFor() time.Duration {
	if l.State != liveDead {
		return 0
	}
	return min(l.GossipGone, l.RaftSilent)
}

// livenessInput is what the view is computed from: pure data, so that the
// rules have table tests (liveness_test.go).
type livenessInput struct {
	Self    string
	Now     time.Time
	Started time.Time // when this node started: silence is counted from then at most
	Members []member  // gossip, with when each changed state
	Reports map[string]received
	// Reached are the nodes a group this node leads replicates to now;
	// Unreached how long since raft last reached the others it has failed
	// to (raftReach of every group this node leads).
	Reached   map[string]bool
	Unreached map[string]time.Duration
}

// liveness computes the view of every node the input names.
func liveness(in livenessInput) map[string]nodeLiveness {
	out := map[string]nodeLiveness{}
	ids := map[string]bool{}
	for _, m := range in.Members {
		ids[m.ID] = true
	}
	for id := range in.Reports {
		ids[id] = true
	}
	gossip := map[string]member{}
	for _, m := range in.Members {
		gossip[m.ID] = m
	}
	for id := range ids {
		if id == in.Self {
			out[id] = nodeLiveness{State: liveAlive}
			continue
		}
		out[id] = judge(in, id, gossip[id])
	}
	return out
}

func judge(in livenessInput, id string, m member) nodeLiveness {
	var l nodeLiveness
	rep, hasRep := in.Reports[id]
	if m.ID != "" && m.state != memberlist.StateAlive {
		l.GossipGone = sinceOr(in.Now, m.since, in.Started)
	} else if m.ID == "" {
		// Never seen by gossip: gone since this node started, as far as it
		// knows.
		l.GossipGone = in.Now.Sub(in.Started)
	}
	// The Raft port: the newest of a report's arrival and raft's last
	// contact; a group that reaches the node now makes it answer.
	switch {
	case in.Reached[id]:
		l.RaftSilent = 0
	case hasRep && in.Now.Sub(rep.at) <= reportFresh:
		l.RaftSilent = 0
	default:
		silent := in.Now.Sub(in.Started)
		if hasRep {
			silent = in.Now.Sub(rep.at)
		}
		if u, ok := in.Unreached[id]; ok && u < silent {
			silent = u
		}
		l.RaftSilent = max(silent, 0)
	}
	left := m.state == memberlist.StateLeft || m.Leaving && m.state != memberlist.StateAlive ||
		hasRep && rep.r.Leaving && l.GossipGone > 0
	switch {
	case left:
		l.State = liveLeft
	case l.GossipGone > 0 && l.RaftSilent > 0:
		l.State = liveDead
	case hasRep && (rep.r.Stopping || rep.r.Leaving) && in.Now.Sub(rep.at) <= reportFresh+reportEvery:
		// Stopping to restart, or on its way out: alive, but it takes no
		// new replica and no leadership.
		l.State = liveStopping
	case hasRep && rep.r.Stopping && l.GossipGone > 0:
		// It said it was stopping and gossip lost it: a restart under way,
		// not yet a death (the timeouts decide that as for any node).
		l.State = liveStopping
	default:
		l.State = liveAlive
	}
	return l
}

// sinceOr is how long ago t was, counting from floor at most (a zero t is
// floor).
func sinceOr(now, t, floor time.Time) time.Duration {
	if t.IsZero() || t.Before(floor) {
		t = floor
	}
	return max(now.Sub(t), 1)
}

// liveness is this node's view of every node it knows, now.
func (n *Node) liveness() map[string]nodeLiveness {
	in := livenessInput{Self: n.cfg.ID, Now: time.Now(), Started: n.started, Members: n.members(),
		Reports: n.reports.snapshot(), Reached: map[string]bool{}, Unreached: map[string]time.Duration{}}
	for _, g := range n.openGroups() {
		if g.raft == nil || g.closed() || !g.IsLeader() {
			continue
		}
		down := g.reach.unreachable(in.Now)
		servers, err := latestServers(g.raft)
		if err != nil {
			continue
		}
		for _, s := range servers {
			id := string(s.ID)
			if d, ok := down[id]; ok {
				if old, seen := in.Unreached[id]; !seen || d < old {
					in.Unreached[id] = d
				}
			} else if id != n.cfg.ID {
				in.Reached[id] = true
			}
		}
	}
	return liveness(in)
}
