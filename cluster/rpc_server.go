package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
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
}

// serveRPC answers one peer connection until it closes. peer is the node id
// the peer's certificate names ("" without TLS): a request that names its
// sender as another node closes the connection unanswered.
func (n *Node) serveRPC(c net.Conn, peer string) {
	defer c.Close()
	// The Raft port listens before Raft starts (a recovered node first leaves
	// the configuration, see rejoin.go); requests wait for it.
	select {
	case <-n.raftUp:
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
		switch op {
		case opApply:
			// Submitted here, in the order frames arrive, so a forwarded pipeline
			// keeps its order; waited for elsewhere.
			fut, err := n.applyRemote(ctx, body)
			if err != nil {
				reply(err, nil)
				continue
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
				idx, err := n.leaderGate.wait(ctx)
				var out [8]byte
				binary.BigEndian.PutUint64(out[:], idx)
				reply(err, out[:])
			}()
		case opStatus:
			b, _ := json.Marshal(n.peerStatus())
			reply(nil, b)
		case opConfirm:
			// Answered here, in order: the answer is this node's term now,
			// after the request arrived.
			if len(body) != 8 {
				reply(errBadConfirm, nil)
				continue
			}
			if n.raft.CurrentTerm() != binary.BigEndian.Uint64(body) {
				reply(ErrNotLeader, nil)
				continue
			}
			reply(nil, nil)
		case opRemove:
			if peer != "" && string(body) != peer {
				// A node asks to remove itself, never another (reconcile.go, rejoin.go).
				n.refuseRPC(c, peer, "asked to remove "+strconv.Quote(string(body)))
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := n.removeServer(string(body))
				if err == nil {
					n.noteDeparting(string(body))
				}
				reply(err, nil)
			}()
		default:
			reply(errUnknownOp, nil)
		}
	}
}

type rpcError string

func (e rpcError) Error() string { return string(e) }

const (
	errUnknownOp  = rpcError("unknown request")
	errBadConfirm = rpcError("bad confirm request")
)

func (n *Node) peerStatus() peerStatus {
	lid, _ := n.Leader()
	last := n.raft.LastIndex()
	ps := peerStatus{
		ID:           n.cfg.ID,
		AppliedIndex: n.fsm.AppliedIndex(),
		LastIndex:    last,
		HasState:     last > 0 || n.raft.CurrentTerm() > 0,
		Leader:       lid,
	}
	if g, ok := n.gossipAdv.Load().(string); ok {
		ps.Gossip = g
	}
	return ps
}

// removeServer removes id from the configuration; only the leader can.
func (n *Node) removeServer(id string) error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	n.log.Info("removing server", "id", id)
	return n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error()
}
