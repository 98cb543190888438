package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// The operator's view of the Raft configuration and the two changes an
// operator makes by hand (`rookery raft list-peers|remove-peer|transfer-leader`,
// as Consul's `consul operator raft`). Everything else about membership the
// leader does by itself from gossip (reconcile.go).

// Errors of the operator commands; each is definitely-not-done.
var (
	// ErrUnknownPeer: the id is not in the Raft configuration.
	ErrUnknownPeer = errors.New("no such server in the raft configuration")
	// ErrLastVoter: removing the server would leave no voter.
	ErrLastVoter = errors.New("refusing to remove the last voter")
	// ErrNoOtherVoter: there is no voter to hand leadership to.
	ErrNoOtherVoter = errors.New("no other voter to transfer leadership to")
	// ErrNotVoter: leadership can go only to a voter.
	ErrNotVoter = errors.New("not a voter")
)

// peerStatusTimeout bounds the question to each server while listing peers.
const peerStatusTimeout = time.Second

// RaftPeer is one server of the Raft configuration as a node sees it.
type RaftPeer struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// State is leader, follower or nonvoter; unreachable when the server did
	// not answer this node.
	State string `json:"state"`
	Voter bool   `json:"voter"`
	// LastIndex and AppliedIndex are the server's own, as it answered now.
	LastIndex    uint64 `json:"last_index"`
	AppliedIndex uint64 `json:"applied_index"`
	// LastContact is how long ago the server was last heard from: for the
	// node answering, when it last heard from the leader (as raft counts it);
	// for another server, when it last answered this node. Empty for the
	// leader itself and for a server never heard from.
	LastContact string `json:"last_contact,omitempty"`
	Reachable   bool   `json:"reachable"`
}

// RaftPeers is the configuration and the leader as a node sees them.
type RaftPeers struct {
	Node        string     `json:"node"` // the node answering
	Leader      string     `json:"leader"`
	Term        uint64     `json:"term"`
	CommitIndex uint64     `json:"commit_index"`
	Servers     []RaftPeer `json:"servers"`
}

// heard remembers when each server last answered a node's status question,
// keyed by heardKey, so that a server gone quiet shows for how long.
var heard sync.Map

type heardKey struct {
	n     *Node
	group int
	id    string
}

// opsGroup is the group an operator's raft command acts on: group 0 for
// shard -1 (the cluster's membership; on a cluster of one group its only
// shard too), else this node's replica of the shard (ErrNotHosted when it
// holds none).
func (n *Node) opsGroup(shard int) (*group, error) {
	if shard < 0 {
		return n.meta, nil
	}
	r, err := n.Replica(shard)
	if err != nil {
		return nil, err
	}
	return r.g, nil
}

// RaftPeers lists the servers of the latest configuration of group 0 (shard
// -1) or of shard's group, asking each one (in parallel, up to a second) for
// its log and applied index.
func (n *Node) RaftPeers(ctx context.Context, shard int) (RaftPeers, error) {
	g, err := n.opsGroup(shard)
	if err != nil {
		return RaftPeers{}, err
	}
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return RaftPeers{}, fmt.Errorf("read the raft configuration: %w", err)
	}
	lid, _ := g.Leader()
	out := RaftPeers{Node: n.cfg.ID, Leader: lid, Term: g.raft.CurrentTerm(), CommitIndex: g.raft.CommitIndex()}
	servers := f.Configuration().Servers
	out.Servers = make([]RaftPeer, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		p := &out.Servers[i]
		p.ID, p.Address, p.Voter = string(s.ID), string(s.Address), s.Suffrage == raft.Voter
		switch {
		case p.ID == lid:
			p.State = "leader"
		case !p.Voter:
			p.State = "nonvoter"
		default:
			p.State = "follower"
		}
		if p.ID == n.cfg.ID {
			ps := g.peerStatus()
			p.LastIndex, p.AppliedIndex, p.Reachable = ps.LastIndex, ps.AppliedIndex, true
			if lc := g.raft.LastContact(); !lc.IsZero() && p.ID != lid {
				p.LastContact = time.Since(lc).Round(time.Millisecond).String()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, peerStatusTimeout)
			defer cancel()
			key := heardKey{n, g.id, p.ID}
			ps, err := g.statusOf(ctx, p.ID, p.Address)
			if err == nil && ps.ID == p.ID {
				p.LastIndex, p.AppliedIndex, p.Reachable = ps.LastIndex, ps.AppliedIndex, true
				heard.Store(key, time.Now())
			} else {
				p.State = "unreachable"
			}
			if t, ok := heard.Load(key); ok && p.ID != lid {
				p.LastContact = time.Since(t.(time.Time)).Round(time.Millisecond).String()
			}
		}()
	}
	wg.Wait()
	sort.SliceStable(out.Servers, func(i, j int) bool { return out.Servers[i].ID < out.Servers[j].ID })
	return out, nil
}

// RemovePeer removes server id from the Raft configuration. Only the leader
// can (ErrNotLeader elsewhere); it refuses an id not in the configuration and
// the last voter. A removed member that is still running is not added back:
// the leader tells it over gossip that it was removed, and it reports so
// (heal.go) until it is started again on an empty data directory.
func (n *Node) RemovePeer(ctx context.Context, shard int, id string) error {
	g, err := n.opsGroup(shard)
	if err != nil {
		return err
	}
	if g.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	s, voters, err := g.serverOf(id)
	if err != nil {
		return err
	}
	if s.Suffrage == raft.Voter && voters <= 1 {
		return fmt.Errorf("%w (%s)", ErrLastVoter, id)
	}
	g.log.Info("removing server at the operator's request", "id", id, "address", s.Address)
	timeout := n.cfg.ApplyTimeout
	if d, ok := ctx.Deadline(); ok && time.Until(d) < timeout {
		timeout = time.Until(d)
	}
	if err := g.await(g.raft.RemoveServer(s.ID, 0, timeout)); err != nil {
		return translate(err)
	}
	if g == n.meta {
		n.forgetDead(id)
	}
	return nil
}

// TransferLeader hands leadership to server id, or to the most up-to-date
// other voter when id is "". Only the leader can (ErrNotLeader elsewhere). It
// returns the id of the new leader once this node has stepped down.
func (n *Node) TransferLeader(ctx context.Context, shard int, id string) (string, error) {
	g, err := n.opsGroup(shard)
	if err != nil {
		return "", err
	}
	if g.raft.State() != raft.Leader {
		return "", ErrNotLeader
	}
	var fut raft.Future
	if id == "" {
		if g.voters() <= 1 {
			return "", ErrNoOtherVoter
		}
		fut = g.raft.LeadershipTransfer()
	} else {
		if id == n.cfg.ID {
			return id, nil // leads already
		}
		s, _, err := g.serverOf(id)
		if err != nil {
			return "", err
		}
		if s.Suffrage != raft.Voter {
			return "", fmt.Errorf("%s is %w: leadership can go only to a voter", id, ErrNotVoter)
		}
		fut = g.raft.LeadershipTransferToServer(s.ID, s.Address)
	}
	g.log.Info("transferring leadership at the operator's request", "to", id)
	if err := g.await(fut); err != nil {
		return "", fmt.Errorf("leadership transfer: %w", translate(err))
	}
	// The transfer is done once this node has stepped down; the new leader is
	// known once its first heartbeat arrives.
	for {
		if lid, _ := g.Leader(); lid != "" && lid != n.cfg.ID {
			return lid, nil
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// serverOf finds id in the group's latest configuration and counts its
// voters.
func (g *group) serverOf(id string) (raft.Server, int, error) {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return raft.Server{}, 0, translate(err)
	}
	var found raft.Server
	ok, voters := false, 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters++
		}
		if string(s.ID) == id {
			found, ok = s, true
		}
	}
	if !ok {
		return raft.Server{}, 0, fmt.Errorf("%w: %s", ErrUnknownPeer, id)
	}
	return found, voters, nil
}

// translate turns raft's errors into the package's.
func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: %v", ErrIndeterminate, err)
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return err
}
