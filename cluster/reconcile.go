package cluster

import (
	"context"
	"errors"
	"fmt"
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
	if n.raft.LastIndex() > 0 || n.raft.CurrentTerm() > 0 {
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
	for _, m := range alive {
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
		servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(m.ID), Address: raft.ServerAddress(m.Raft)})
	}
	n.log.Info("bootstrapping cluster", "voters", len(servers))
	if err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
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
	servers, err := latestServers(n.raft)
	if err != nil {
		return
	}
	now := time.Now()
	v := membershipView{
		Self:      n.cfg.ID,
		Servers:   servers,
		Members:   n.members(),
		Unreached: n.reach.unreachable(now),
		Commit:    n.raft.CommitIndex(),
	}
	if n.clusterMap() != nil {
		v.MaxVoters = mapGroupVoters
	}
	n.recMu.Lock()
	acts := n.rec.plan(v, now)
	n.recMu.Unlock()
	n.membershipExec().run(acts)
	n.reconciled.Add(1)
}

// membershipExec is the node's executor of membership plans.
func (n *Node) membershipExec() membershipExec {
	return membershipExec{
		r:      n.raft,
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

// Leave removes this node from the cluster for good: a leader hands leadership
// over first, then the leader removes this node from the configuration, and only
// then does the node leave gossip. The node should shut down afterwards.
func (n *Node) Leave(ctx context.Context) error {
	// Set for good once the node has left: the removal it asks for is no news.
	n.heal.leaving.Store(true)
	if n.IsLeader() && n.voters() > 1 {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before leaving", "err", err)
		}
	}
	// Announce the departure first, so that no leader adds this node back
	// between its removal and its leaving gossip (reconcile skips members
	// that are leaving).
	n.announceLeaving(true)
	for {
		err := n.requestRemoval(ctx)
		if err == nil {
			break
		}
		n.log.Warn("leave: removal not yet confirmed", "err", err)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			n.heal.leaving.Store(false)
			n.announceLeaving(false)
			return fmt.Errorf("leave: %w", ctx.Err())
		}
	}
	// Remembered, so that started again on this data directory the node says
	// it left rather than waiting for a leader that no longer talks to it.
	if err := n.heal.book.update(func(m *membersFile) { m.Left = true }); err != nil {
		n.log.Warn("record the leave", "err", err)
	}
	// Announced again before leaving gossip, so the others record this node
	// as left rather than failed.
	n.announceLeaving(true)
	if err := n.ml.Leave(2 * time.Second); err != nil {
		n.log.Warn("leave gossip", "err", err)
	}
	n.leftOnce.Do(func() { close(n.left) })
	n.log.Info("left the cluster")
	return nil
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

func (n *Node) requestRemoval(ctx context.Context) error {
	if n.IsLeader() {
		if n.voters() <= 1 {
			return errors.New("the last voter cannot leave")
		}
		return n.removeServer(n.cfg.ID)
	}
	_, addr := n.Leader()
	if addr == "" {
		return ErrNoLeader
	}
	_, err := n.peer(addr).call(ctx, opRemove, []byte(n.cfg.ID))
	return err
}

// Nodes lists the members of the configuration and of gossip.
func (n *Node) Nodes() []NodeInfo {
	lid, _ := n.Leader()
	seen := make(map[string]bool)
	var out []NodeInfo
	health := make(map[string]member)
	for _, m := range n.members() {
		health[m.ID] = m
	}
	if f := n.raft.GetConfiguration(); f.Error() == nil {
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
