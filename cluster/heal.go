package cluster

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// healState is what a node keeps so that its membership heals: the members
// file it rejoins from (peers.go), whether the leader's Raft reaches each
// follower (for dead-server removal), and whether this node finds itself
// removed from the configuration.
type healState struct {
	book peerBook

	// removed says why this node is out of the configuration ("" while it is
	// a member); the membership loop sets it.
	removed atomic.Value // string
	// leaving is set while Leave runs: the removal it asks for is no news.
	leaving atomic.Bool
	// hint is the id of a leader that said over gossip that this node is not
	// in its configuration ("" when none has, or a leader replicates to it).
	hint atomic.Value // string
	// pendingIn is the last log index when this node first saw itself in its
	// latest configuration; once the commit index reaches it, the entry that
	// added the node is committed and the node has been a member.
	pendingIn uint64
}

// reachStale is how long a failed-heartbeat observation stands for a follower
// raft cannot reach. raft reports a failed heartbeat at least every few
// seconds while it keeps failing (its RPC timeout), so a follower with no
// report this long is taken as reached again, even if the report that it
// resumed was lost.
const reachStale = 15 * time.Second

// raftReach follows, on the leader, the followers raft's heartbeats fail to
// reach, from raft's FailedHeartbeatObservation and
// ResumedHeartbeatObservation. It is what keeps a voter that answers Raft in
// the configuration whatever gossip says about it.
type raftReach struct {
	mu   sync.Mutex
	down map[string]reachDown
}

type reachDown struct {
	since time.Time // raft's last contact with the follower
	seen  time.Time // the latest failed heartbeat
}

// failed records a failed heartbeat to id, whose last contact raft gives.
func (r *raftReach) failed(id string, lastContact, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down == nil {
		r.down = make(map[string]reachDown)
	}
	d, ok := r.down[id]
	switch {
	case !lastContact.IsZero() && !lastContact.After(now):
		d.since = lastContact
	case !ok:
		d.since = now
	}
	d.seen = now
	r.down[id] = d
}

// resumed records that heartbeats to id succeed again.
func (r *raftReach) resumed(id string) {
	r.mu.Lock()
	delete(r.down, id)
	r.mu.Unlock()
}

// reset forgets everything: a new term's leader starts replication afresh.
func (r *raftReach) reset() {
	r.mu.Lock()
	r.down = nil
	r.mu.Unlock()
}

// unreachableFor is how long raft has failed to reach id, 0 when it reaches it
// (or has said nothing of it lately).
func (r *raftReach) unreachableFor(id string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.down[id]
	if !ok || now.Sub(d.seen) > reachStale {
		return 0
	}
	return now.Sub(d.since)
}

// unreachable lists, for each follower raft has lately failed to reach, how
// long it has (unreachableFor of each).
func (r *raftReach) unreachable(now time.Time) map[string]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Duration, len(r.down))
	for id, d := range r.down {
		if now.Sub(d.seen) <= reachStale {
			out[id] = now.Sub(d.since)
		}
	}
	return out
}

// reachLoop feeds raftReach from raft's heartbeat observations.
func (g *group) reachLoop() {
	defer g.wg.Done()
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation:
			return true
		}
		return false
	})
	g.raft.RegisterObserver(obs)
	defer g.raft.DeregisterObserver(obs)
	for {
		select {
		case o := <-ch:
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				g.reach.failed(string(d.PeerID), d.LastContact, time.Now())
			case raft.ResumedHeartbeatObservation:
				g.reach.resumed(string(d.PeerID))
				if servers, err := latestServers(g.raft); err == nil {
					for _, s := range servers {
						if s.ID == d.PeerID {
							g.n.peerLog.resumed(g.raftLog(), string(s.Address))
						}
					}
				}
			}
		case <-g.stop:
			return
		}
	}
}

// tendMembership keeps the members file current and finds out whether this
// node has been removed from the configuration; the membership loop runs it
// on every event and once a second.
func (n *Node) tendMembership() {
	f := n.meta.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	in := false
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			in = true
		}
	}
	committed := false
	if !in {
		n.heal.pendingIn = 0
	} else {
		if n.heal.pendingIn == 0 {
			n.heal.pendingIn = max(n.meta.raft.LastIndex(), 1)
		}
		committed = n.meta.raft.CommitIndex() >= n.heal.pendingIn
	}
	lid, _ := n.meta.Leader()
	// A leader replicates only to the members of its configuration: a node
	// in its own configuration that hears from a leader is a member.
	led := in && lid != ""
	wasMember := n.heal.book.get().Member
	n.savePeers(servers, committed)
	if n.heal.leaving.Load() {
		// Still led for a moment after its removal: nothing to conclude.
		return
	}
	if led {
		n.heal.hint.Store("")
		if committed {
			if err := n.heal.book.update(func(m *membersFile) { m.Left = false }); err != nil {
				n.warnEvery("members-file", "cannot keep the members file", "err", err)
			}
		}
	}
	book := n.heal.book.get()
	if book.Member != wasMember {
		n.regossip()
	}
	hint, _ := n.heal.hint.Load().(string)
	if n.clusterMap() != nil {
		// Sharded: a node out of group 0 is one the map does not place
		// shard 0 on, not one removed from the cluster.
		if !book.Left {
			n.setRemoved("")
			return
		}
	}
	n.setRemoved(removedReason(selfView{In: in, Led: led, Servers: len(servers), Hint: hint, Member: book.Member, Left: book.Left}))
}

// selfView is what a node knows of its own place in the cluster.
type selfView struct {
	In      bool   // in its latest configuration
	Led     bool   // in it, and a leader is known (a leader replicates only to its configuration)
	Servers int    // servers of the latest configuration
	Hint    string // a leader that said over gossip this node is not in its configuration
	Member  bool   // has been in a committed configuration, with the state it holds
	Left    bool   // left the cluster for good
}

// removedReason says why the node is out of the cluster, "" while it is a
// member: it left and no leader replicates to it; or it was a committed member
// and its latest configuration lacks it; or a leader said so over gossip while
// no leader replicates to it (a leader stops replicating to a server it
// removes, often before the server has the entry that removes it). A gossip
// message never outweighs raft.
func removedReason(v selfView) string {
	switch {
	case v.Left && !v.Led:
		return "this node left the cluster for good"
	case v.Member && !v.In && v.Servers > 0:
		return "this node was removed from the cluster's configuration"
	case v.Member && v.Hint != "" && !v.Led:
		return "this node was removed from the cluster's configuration (leader " + v.Hint + " says so)"
	}
	return ""
}

// setRemoved records why the node is out of the configuration ("" when it is
// a member) and says so when that changes.
func (n *Node) setRemoved(why string) {
	old, _ := n.heal.removed.Load().(string)
	if old == why {
		return
	}
	n.heal.removed.Store(why)
	if why != "" {
		n.log.Error(why+"; it serves nothing until it joins again as a new member", "what_to_do", n.rejoinAdvice())
	} else if old != "" {
		n.log.Info("this node is a member of the configuration again")
	}
}

// regossip sends this node's metadata again after it changed. memberlist's
// UpdateNode must not run twice at once (it writes the node's own state
// unlocked), and the shard loop and the membership loop both call it.
func (n *Node) regossip() {
	n.regossipMu.Lock()
	defer n.regossipMu.Unlock()
	if n.closing() {
		return // gossip is shut down: UpdateNode would wait out its timeout
	}
	n.delegate.set(n.localMeta())
	if err := n.ml.UpdateNode(time.Second); err != nil {
		n.log.Debug("gossip metadata", "err", err)
	}
}

// removedWhy says why this node is out of the configuration, "" when it is not.
func (n *Node) removedWhy() string {
	s, _ := n.heal.removed.Load().(string)
	return s
}

func (n *Node) rejoinAdvice() string {
	return "stop the node, move its data directory " + n.cfg.DataDir +
		" aside, and start it again with --join naming a member: it joins as a new member and receives the data from the leader"
}

// removedMsg is what a leader tells, over gossip, a member that is alive but
// out of its configuration while it holds the state of a former member.
type removedMsg struct {
	Removed string `json:"removed"` // the id of the member told
	Leader  string `json:"leader"`
}

// tellRemoved tells member m, best effort, that it is not in the leader's
// configuration; the leader repeats it while m stays alive and out.
func (n *Node) tellRemoved(m member) {
	if m.gossip == "" {
		return
	}
	b, _ := json.Marshal(removedMsg{Removed: m.ID, Leader: n.cfg.ID})
	if err := n.ml.SendToAddress(memberlist.Address{Addr: m.gossip, Name: m.ID}, b); err != nil {
		n.log.Debug("tell a removed member", "id", m.ID, "err", err)
	}
}

// noteMessage hears a gossip user message: a leader saying this node is out of
// its configuration.
func (n *Node) noteMessage(b []byte) {
	var msg removedMsg
	if json.Unmarshal(b, &msg) != nil || msg.Removed != n.cfg.ID || msg.Leader == "" || msg.Leader == n.cfg.ID {
		return
	}
	n.heal.hint.Store(msg.Leader)
	n.membershipChanged()
}
