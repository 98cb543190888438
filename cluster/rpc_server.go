package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// peerStatus is what a node tells a peer about itself (opStatus): the leader uses
// it to promote a caught-up non-voter, and a node about to bootstrap uses it to
// learn whether a cluster already exists.
type peerStatus struct {
	ID           string `json:"id"`
	AppliedIndex uint64 `json:"applied"`
	LastIndex    uint64 `json:"last"`
	HasState     bool   `json:"has_state"`
	Leader       string `json:"leader"`
	Gossip       string `json:"gossip,omitempty"` // where to join its gossip
	// Voters and Nonvoters are the group's latest configuration as this
	// node knows it (the controller reads them from a group's leader).
	Voters    []string `json:"voters,omitempty"`
	Nonvoters []string `json:"nonvoters,omitempty"`
	// Commit, Filters and Bytes are the group's commit index and what its
	// state machine holds here.
	Commit  uint64 `json:"commit,omitempty"`
	Filters int    `json:"filters,omitempty"`
	Bytes   uint64 `json:"bytes,omitempty"`
}

// serveRPC answers one peer connection until it closes. peer is the node id
// the peer's certificate names ("" without TLS): a request that names its
// sender as another node closes the connection unanswered.
func (n *Node) serveRPC(c net.Conn, peer string) {
	defer c.Close()
	// The Raft port listens before Raft starts (a recovered node first leaves
	// the configuration, see rejoin.go); requests wait for it.
	select {
	case <-n.meta.raftUp:
	case <-n.stop:
		return
	}
	r := bufio.NewReaderSize(c, 64<<10)
	fw := newFrameWriter(c, func() { c.Close() })
	defer fw.stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-n.stop:
			c.Close()
		case <-ctx.Done():
		}
	}()
	for {
		id, op, body, err := readFrame(r)
		if err != nil {
			return
		}
		reply := func(err error, out []byte) {
			code := codeOf(err)
			if err != nil {
				out = []byte(err.Error())
			}
			_ = fw.send(id, code, out)
		}
		if op == opCommand {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := n.serveCommand(ctx, body)
				reply(err, out)
			}()
			continue
		}
		if n.serveNodeOp(ctx, &wg, op, body, peer, reply) {
			continue
		}
		g := n.meta
		if op == opGroup {
			gid, inner, rest, err := decodeGroupOp(body)
			if err != nil {
				reply(err, nil)
				continue
			}
			if g = n.groupByID(gid); g == nil {
				reply(fmt.Errorf("%w: shard %d", ErrNotHosted, gid), nil)
				continue
			}
			op, body = inner, rest
		}
		if op == opRemove && peer != "" && string(body) != peer {
			// A node asks to remove itself, never another (reconcile.go,
			// rejoin.go), from group 0 or from a shard.
			n.refuseRPC(c, peer, "asked to remove "+strconv.Quote(string(body)))
			return
		}
		n.handle(ctx, g, &wg, op, body, reply)
	}
}

// serveNodeOp answers the requests about the node rather than one group,
// and reports whether op was one.
func (n *Node) serveNodeOp(ctx context.Context, wg *sync.WaitGroup, op byte, body []byte, peer string, reply func(error, []byte)) bool {
	switch op {
	case opMap:
		var out []byte
		if m := n.clusterMap(); m != nil {
			out = fsm.EncodeMap(m)
		}
		reply(nil, out)
	case opReport:
		reply(n.noteReport(body, peer), nil)
	case opReserve:
		out, err := n.serveReserve(body)
		reply(err, out)
	case opRelease:
		reply(n.serveRelease(body), nil)
	case opDrainSelf:
		if peer != "" && string(body) != peer {
			// A node drains itself, never another.
			reply(errNotSelf, nil)
			return true
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply(n.Drain(ctx, string(body), false), nil)
		}()
	case opFence:
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply(n.serveFence(ctx, body, peer), nil)
		}()
	default:
		return false
	}
	return true
}

// handle answers one request to group g (group 0 for the requests of builds
// before groups): in order when it is answered here, concurrently when it
// waits for raft.
func (n *Node) handle(ctx context.Context, g *group, wg *sync.WaitGroup, op byte, body []byte, reply func(error, []byte)) {
	switch op {
	case opApply:
		// Submitted here, in the order frames arrive, so a forwarded pipeline
		// keeps its order; waited for elsewhere.
		fut, err := g.applyRemote(ctx, body)
		if err != nil {
			reply(err, nil)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := fut.Wait(context.Background())
			if err != nil {
				reply(err, nil)
				return
			}
			reply(nil, fsm.EncodeResult(res))
		}()
	case opReadIndex:
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx, err := g.leaderGate.wait(ctx)
			if err == nil && g.trans != nil {
				// The asking follower waits for idx to commit there: tell it
				// now rather than at the next append (pipelines.go).
				g.trans.nudge(idx)
			}
			var out [8]byte
			binary.BigEndian.PutUint64(out[:], idx)
			reply(err, out[:])
		}()
	case opStatus:
		b, _ := json.Marshal(g.peerStatus())
		reply(nil, b)
	case opConfirm:
		// Answered here, in order: the answer is this node's term now,
		// after the request arrived.
		if len(body) != 8 {
			reply(errBadConfirm, nil)
			return
		}
		if g.raft.CurrentTerm() != binary.BigEndian.Uint64(body) {
			reply(ErrNotLeader, nil)
			return
		}
		reply(nil, nil)
	case opRemove:
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := g.removeServer(string(body))
			if err == nil && g.id == 0 {
				n.noteDeparting(string(body))
			}
			reply(err, nil)
		}()
	default:
		reply(errUnknownOp, nil)
	}
}

type rpcError string

func (e rpcError) Error() string { return string(e) }

const (
	errNotSelf    = rpcError("a node may ask this only for itself")
	errUnknownOp  = rpcError("unknown request")
	errBadConfirm = rpcError("bad confirm request")
)

// peerStatus is what this node tells a peer of itself and of group g.
func (g *group) peerStatus() peerStatus {
	lid, _ := g.Leader()
	last := g.raft.LastIndex()
	ps := peerStatus{
		ID:           g.n.cfg.ID,
		AppliedIndex: g.fsm.AppliedIndex(),
		LastIndex:    last,
		HasState:     last > 0 || g.raft.CurrentTerm() > 0,
		Leader:       lid,
		Commit:       g.raft.CommitIndex(),
		Filters:      g.fsm.Len(),
		Bytes:        g.fsm.MemoryBytes(),
	}
	if a, ok := g.n.gossipAdv.Load().(string); ok {
		ps.Gossip = a
	}
	if servers, err := latestServers(g.raft); err == nil {
		for _, s := range servers {
			if s.Suffrage == raft.Voter {
				ps.Voters = append(ps.Voters, string(s.ID))
			} else {
				ps.Nonvoters = append(ps.Nonvoters, string(s.ID))
			}
		}
	}
	return ps
}

// removeServer removes id from the group's configuration; only its leader can.
func (g *group) removeServer(id string) error {
	if g.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	g.log.Info("removing server", "id", id)
	return g.raft.RemoveServer(raft.ServerID(id), 0, g.n.cfg.ApplyTimeout).Error()
}
