package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// catchUpSlack is how far behind the leader's commit index a non-voter may be
// and still be promoted to voter.
const catchUpSlack = 64

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
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	for {
		select {
		case leader := <-n.raft.LeaderCh():
			if leader {
				// This term's replication starts afresh, and so does what
				// it learns of whom it reaches.
				n.heal.reach.reset()
				term := n.raft.CurrentTerm()
				if err := n.await(n.raft.Barrier(readRoundTimeout)); err == nil {
					n.barrierTerm.Store(term)
				}
				n.log.Info("leading", "term", term)
				n.kickExpiry() // its state is now current: deadlines due?
			}
			n.membershipChanged()
		case <-n.stop:
			return
		}
	}
}

// reconcile brings the Raft configuration in line with gossip: alive members
// join as non-voters and are promoted once caught up, unless they were members
// before and keep that state (removed or left: they are told so); members that gossip lists as gone and that raft's heartbeats have
// not reached, both for DeadServerTimeout, are removed while a healthy quorum
// remains. A member that answers raft stays whatever gossip says: gossip can be
// split or slow to heal while raft replicates (issue 10).
func (n *Node) reconcile() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	inConf := make(map[string]raft.Server, len(servers))
	for _, s := range servers {
		inConf[string(s.ID)] = s
	}
	byID := make(map[string]member)
	for _, m := range n.members() {
		byID[m.ID] = m
		if _, ok := inConf[m.ID]; !ok && m.state == memberlist.StateAlive {
			if m.Leaving || n.departing(m.ID) {
				// On its way out for good: it asked to be removed, and is
				// about to leave gossip. Adding it back would make it a
				// voter again that no one removes.
				continue
			}
			if m.Member {
				// A former member with its old state: removed (or left)
				// on purpose or as dead. It is told so, and joins again as
				// a new member once its data directory is moved aside.
				n.warnEvery("removed:"+m.ID, "not adding a removed member back with its old state; "+
					"it is told so and joins again once its data directory is moved aside", "id", m.ID)
				n.tellRemoved(m)
				continue
			}
			if _, err := n.verifyIdentity(m.ID, m.Raft); err != nil {
				n.warnEvery("add:"+m.ID, "not adding member: its raft address did not prove its identity",
					"id", m.ID, "raft", m.Raft, "err", err)
				continue
			}
			n.log.Info("adding member as non-voter", "id", m.ID, "raft", m.Raft)
			if err := n.raft.AddNonvoter(raft.ServerID(m.ID), raft.ServerAddress(m.Raft), 0, 5*time.Second).Error(); err != nil {
				n.log.Warn("add non-voter", "id", m.ID, "err", err)
			}
		}
	}
	now := time.Now()
	voters, healthy := 0, 0
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		id := string(s.ID)
		if m, ok := byID[id]; id == n.cfg.ID || ok && m.state == memberlist.StateAlive && n.heal.reach.unreachableFor(id, now) == 0 {
			healthy++
		}
	}
	for _, s := range servers {
		id := string(s.ID)
		if id == n.cfg.ID {
			continue
		}
		m, ok := byID[id]
		switch {
		case !ok || m.state == memberlist.StateDead || m.state == memberlist.StateLeft:
			// A member that leaves for good has itself removed before it
			// announces its departure (Leave); one that gossip merely reports
			// as gone is treated as failed, so no gossip message alone removes
			// a voter.
			dead := n.deadFor(id)
			if dead < n.cfg.DeadServerTimeout {
				continue
			}
			unreached := n.heal.reach.unreachableFor(id, now)
			if unreached == 0 {
				n.warnEvery("answers:"+id, "not removing a member gossip lists as gone: it answers raft",
					"id", id, "gossip_gone_for", dead.Round(time.Second))
			}
			if unreached < n.cfg.DeadServerTimeout {
				continue
			}
			if s.Suffrage == raft.Voter && healthy < (voters-1)/2+1 {
				n.log.Warn("not removing dead member: no healthy quorum would remain", "id", id)
				continue
			}
			n.log.Info("removing dead member", "id", id, "dead_for", dead.Round(time.Second),
				"raft_unreached_for", unreached.Round(time.Second))
			if n.removeServer(id) == nil {
				n.forgetDead(id)
				if s.Suffrage == raft.Voter {
					voters--
				}
			}
		case m.Raft != "" && m.Raft != string(s.Address):
			// Restarted at a new address: re-adding the same id updates it, once
			// the node at the new address has shown it is that member.
			if _, err := n.verifyIdentity(id, m.Raft); err != nil {
				n.warnEvery("move:"+id, "not moving member: its new raft address did not prove its identity",
					"id", id, "old", s.Address, "new", m.Raft, "err", err)
				continue
			}
			n.log.Info("updating member address", "id", id, "old", s.Address, "new", m.Raft)
			add := n.raft.AddVoter
			if s.Suffrage != raft.Voter {
				add = n.raft.AddNonvoter
			}
			if err := add(s.ID, raft.ServerAddress(m.Raft), 0, 5*time.Second).Error(); err != nil {
				n.log.Warn("update member address", "id", id, "err", err)
			}
		default:
			n.forgetDead(id)
			if s.Suffrage == raft.Nonvoter {
				n.maybePromote(s)
			}
		}
	}
}

func (n *Node) deadFor(id string) time.Duration {
	n.deadMu.Lock()
	defer n.deadMu.Unlock()
	t, ok := n.deadSince[id]
	if !ok {
		n.deadSince[id] = time.Now()
		return 0
	}
	return time.Since(t)
}

func (n *Node) forgetDead(id string) {
	n.deadMu.Lock()
	delete(n.deadSince, id)
	n.deadMu.Unlock()
}

// maybePromote makes a non-voter a voter once its log has caught up.
func (n *Node) maybePromote(s raft.Server) {
	ps, err := n.verifyIdentity(string(s.ID), string(s.Address))
	if err != nil {
		return
	}
	if ps.AppliedIndex+catchUpSlack < n.raft.CommitIndex() {
		return
	}
	n.log.Info("promoting caught-up member to voter", "id", s.ID, "applied", ps.AppliedIndex)
	if err := n.raft.AddVoter(s.ID, s.Address, 0, 5*time.Second).Error(); err != nil {
		n.log.Warn("promote", "id", s.ID, "err", err)
	}
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

// departingFor is how long the leader keeps from adding back a member that
// asked to be removed: longer than a member takes from its removal to
// announcing that it leaves, in case that announcement reaches the leader
// after the request.
const departingFor = 5 * time.Second

// noteDeparting records that member id asked to be removed.
func (n *Node) noteDeparting(id string) {
	n.deadMu.Lock()
	defer n.deadMu.Unlock()
	if n.departed == nil {
		n.departed = map[string]time.Time{}
	}
	n.departed[id] = time.Now()
}

// departing reports whether member id asked to be removed within departingFor.
func (n *Node) departing(id string) bool {
	n.deadMu.Lock()
	defer n.deadMu.Unlock()
	t, ok := n.departed[id]
	if ok && time.Since(t) > departingFor {
		delete(n.departed, id)
		return false
	}
	return ok
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
