package cluster

import (
	"errors"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// maybeBootstrap runs until this node has Raft state. With --bootstrap-expect N,
// once N members are known the member with the lowest id, and only it, bootstraps
// the configuration with all of them as voters, after asking every other member
// whether a cluster already exists (then it waits to be added instead).
func (n *Node) maybeBootstrap() {
	if n.bootstrapped.Load() || n.cfg.BootstrapExpect == 0 {
		return
	}
	if n.meta.raft.LastIndex() > 0 || n.meta.raft.CurrentTerm() > 0 {
		n.bootstrapped.Store(true)
		return
	}
	var alive []member
	for _, m := range n.members() {
		if m.state == memberlist.StateAlive {
			alive = append(alive, m)
		}
	}
	if len(alive) < n.cfg.BootstrapExpect || alive[0].ID != n.cfg.ID {
		return
	}
	var servers []raft.Server
	for i, m := range alive {
		if m.ID != n.cfg.ID {
			ps, err := n.verifyIdentity(m.ID, m.Raft)
			if err != nil {
				n.log.Debug("bootstrap: peer not reachable yet", "peer", m.ID, "err", err)
				return
			}
			if ps.HasState {
				n.log.Info("bootstrap: a cluster exists already; waiting to be added", "peer", m.ID)
				n.bootstrapped.Store(true)
				return
			}
		}
		suffrage := raft.Voter
		if max := n.maxMetaVoters(); max > 0 && i >= max {
			// A sharded cluster's group 0 votes with five; the rest hold
			// the map as non-voters from the start.
			suffrage = raft.Nonvoter
		}
		servers = append(servers, raft.Server{Suffrage: suffrage, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Raft)})
	}
	n.log.Info("bootstrapping cluster", "servers", len(servers), "voters", countVoters(servers))
	if err := n.meta.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		n.log.Error("bootstrap", "err", err)
		return
	}
	n.bootstrapped.Store(true)
}

// leaderLoop commits a Barrier at the start of every term, so the commit index
// the read path hands out covers all earlier terms, and wakes reconciliation.
func (g *group) leaderLoop() {
	defer g.wg.Done()
	for {
		select {
		case leader := <-g.raft.LeaderCh():
			if leader {
				// This term's replication starts afresh, and so does what
				// it learns of whom it reaches.
				g.reach.reset()
				term := g.raft.CurrentTerm()
				if err := g.await(g.raft.Barrier(readRoundTimeout)); err == nil {
					g.reads.barrierTerm.Store(term)
				}
				g.log.Info("leading", "term", term)
				g.kickExpiry() // its state is now current: deadlines due?
			}
			g.n.membershipChanged()
			g.n.leadershipChanged()
		case <-g.stop:
			return
		}
	}
}

// reconcile brings the Raft configuration in line with gossip: it observes
// the configuration, gossip's members and raft's reachability, plans with the
// pure rules of plan.go, and carries the plan out (membershipExec).
func (n *Node) reconcile() {
	servers, err := latestServers(n.meta.raft)
	if err != nil {
		return
	}
	now := time.Now()
	v := membershipView{
		Self:      n.cfg.ID,
		Servers:   servers,
		Members:   n.members(),
		Unreached: map[string]time.Duration{},
		Commit:    n.meta.raft.CommitIndex(),
		MaxVoters: n.maxMetaVoters(),
	}
	// Raft reachability from the one liveness view: reports pushed over the
	// Raft port and the heartbeats of every group this node leads.
	for id, l := range n.liveness() {
		if l.RaftSilent > 0 {
			v.Unreached[id] = l.RaftSilent
		}
	}
	n.recMu.Lock()
	acts := n.rec.plan(v, now)
	n.recMu.Unlock()
	n.membershipExec().run(acts)
	n.reconciled.Add(1)
}

// maxMetaVoters caps group 0's voters (0: no cap): on a sharded cluster,
// or one started with --shards, every node holds the map but only
// mapGroupVoters vote on it.
func (n *Node) maxMetaVoters() int {
	if n.clusterMap() != nil || n.cfg.Shards > 0 {
		return mapGroupVoters
	}
	return 0
}

// membershipExec is the node's executor of membership plans.
func (n *Node) membershipExec() membershipExec {
	return membershipExec{
		r:      n.meta.raft,
		verify: n.verifyIdentity,
		tell: func(id string) {
			n.memMu.Lock()
			m, ok := n.memTable[id]
			n.memMu.Unlock()
			if ok {
				n.tellRemoved(m)
			}
		},
		forget: func(id string) {
			n.recMu.Lock()
			n.rec.forget(id)
			n.recMu.Unlock()
		},
		warn:    n.warnEvery,
		log:     n.log,
		timeout: 5 * time.Second,
	}
}

// noteDeparting records that member id asked to be removed.
func (n *Node) noteDeparting(id string) {
	n.recMu.Lock()
	n.rec.noteDeparting(id, time.Now())
	n.recMu.Unlock()
}

// forgetDead drops the dead-since record of member id.
func (n *Node) forgetDead(id string) {
	n.recMu.Lock()
	n.rec.forget(id)
	n.recMu.Unlock()
}

// announceLeaving gossips this node's metadata with Leaving set or cleared.
func (n *Node) announceLeaving(leaving bool) {
	m := n.localMeta()
	m.Leaving = leaving
	n.delegate.set(m)
	if err := n.ml.UpdateNode(time.Second); err != nil {
		n.log.Warn("announce leave", "leaving", leaving, "err", err)
	}
}

// Nodes lists the members of the configuration and of gossip.
func (n *Node) Nodes() []NodeInfo {
	lid, _ := n.meta.Leader()
	seen := make(map[string]bool)
	var out []NodeInfo
	health := make(map[string]member)
	for _, m := range n.members() {
		health[m.ID] = m
	}
	if f := n.meta.raft.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			id := string(s.ID)
			seen[id] = true
			ni := NodeInfo{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Role: "follower", Health: "unknown"}
			if id == lid {
				ni.Role = "leader"
			} else if s.Suffrage != raft.Voter {
				ni.Role = "nonvoter"
			}
			if m, ok := health[id]; ok {
				ni.RESPAddr, ni.HTTPAddr, ni.Health = m.RESP, m.HTTP, healthOf(m.state)
			}
			out = append(out, ni)
		}
	}
	for _, m := range n.members() {
		if !seen[m.ID] && m.state == memberlist.StateAlive {
			out = append(out, NodeInfo{ID: m.ID, RESPAddr: m.RESP, HTTPAddr: m.HTTP, RaftAddr: m.Raft, Role: "none", Health: healthOf(m.state)})
		}
	}
	return out
}

func healthOf(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}
