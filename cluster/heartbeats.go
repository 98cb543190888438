package cluster

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Heartbeats shared by a node's groups. Each group's leader sends each
// follower a heartbeat every HeartbeatTimeout/10, so two nodes sharing G
// groups exchanged G heartbeats where one says all there is to say: that
// the other node is up and hears this one. A node-level view replaces the
// rest, as CockroachDB's coalesced heartbeats do:
//
//   - Leader side: a group's heartbeat to a node that answered a real
//     heartbeat (of any group) sent within the last heartbeatWindow is
//     answered here, in the follower's name, with success in the
//     heartbeat's own term. Raft counts it as contact with that follower,
//     for its leader lease. When the window has passed, the next group's
//     heartbeat goes out for real and renews it: about one real heartbeat
//     per pair of nodes per window, whatever the number of groups.
//   - Follower side: a real heartbeat from a node's leader address is
//     passed on, as a heartbeat in the group's own current term, to every
//     other group here that follows that address and had a heartbeat of its
//     own from it within heardFor, so that their election timers see contact
//     as often as before. Only followers that take that node for their
//     leader get it: no group's leader is changed by it. Each group's leader
//     still sends each follower a heartbeat of the group's own every
//     ownHeartbeatEvery, so that a leader that stopped leading a group (its
//     node up) stops vouching for it.
//
// Nothing about the logs goes this way, and reads do not rest on raft's
// heartbeats (readindex.go confirms leadership with its own requests): a
// leader cut off from a follower loses the window within heartbeatWindow
// and its lease as before; a follower whose group elected another leader
// tells the old one through its vote requests and appends, which carry the
// newer term.
type heartbeats struct {
	window time.Duration

	mu     sync.Mutex
	heard  map[raft.ServerAddress]time.Time // when the last heartbeat a node answered was sent
	groups map[int]hbGroup
}

// hbGroup is what the follower side needs of a group: raft's heartbeat
// handler and where the group stands.
type hbGroup struct {
	handle func(raft.RPC)
	state  func() (follower bool, leader raft.ServerAddress, term uint64)
	// heard says whether the group had a real heartbeat of its own from
	// its leader lately: only then is a shared one passed on to it.
	heard func(now time.Time) bool
}

// heartbeatWindow is how long an answered heartbeat vouches for its node.
// Below the leader lease (200 ms by default), so that a leader that can no
// longer reach a follower stops counting it in time; the followers' groups
// hear from a live leader at least once per window and a heartbeat period.
const heartbeatWindow = 150 * time.Millisecond

// ownHeartbeatEvery is how often a group's leader sends each follower a
// heartbeat of the group's own, shared ones or not; heardFor is how long a
// follower's group passes shared heartbeats on after its own last one. A
// leader that stops leading a group without its followers hearing of it
// (its node still up) stops sending the group's own heartbeats: within
// heardFor the followers stop taking the node's heartbeats for the group's,
// time out and elect another.
const (
	ownHeartbeatEvery = time.Second
	heardFor          = 3 * time.Second
)

func newHeartbeats(window time.Duration) *heartbeats {
	return &heartbeats{window: window, heard: map[raft.ServerAddress]time.Time{}, groups: map[int]hbGroup{}}
}

// isHeartbeat reports whether args is raft's heartbeat, as its transport
// tells one (raft since 1.5 sets the leader's address in the header).
func isHeartbeat(args *raft.AppendEntriesRequest) bool {
	return args.Term != 0 && len(args.Addr) > 0 && args.PrevLogEntry == 0 &&
		args.PrevLogTerm == 0 && len(args.Entries) == 0 && args.LeaderCommitIndex == 0
}

// vouched reports whether node target answered a heartbeat sent within the
// window.
func (h *heartbeats) vouched(target raft.ServerAddress) bool {
	if h == nil || h.window <= 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return time.Since(h.heard[target]) < h.window
}

// answered records that target answered a heartbeat sent at sent.
func (h *heartbeats) answered(target raft.ServerAddress, sent time.Time) {
	if h == nil {
		return
	}
	h.mu.Lock()
	if sent.After(h.heard[target]) {
		h.heard[target] = sent
	}
	h.mu.Unlock()
}

func (h *heartbeats) register(gid int, g hbGroup) {
	h.mu.Lock()
	h.groups[gid] = g
	h.mu.Unlock()
}

func (h *heartbeats) unregister(gid int) {
	h.mu.Lock()
	delete(h.groups, gid)
	h.mu.Unlock()
}

// passOn gives every group but except that follows the leader address of
// req a heartbeat in its own term.
func (h *heartbeats) passOn(req *raft.AppendEntriesRequest, except int) {
	if h == nil || h.window <= 0 {
		return
	}
	from := raft.ServerAddress(req.Addr)
	h.mu.Lock()
	groups := make([]hbGroup, 0, len(h.groups))
	for gid, g := range h.groups {
		if gid != except {
			groups = append(groups, g)
		}
	}
	h.mu.Unlock()
	now := time.Now()
	for _, g := range groups {
		if g.heard != nil && !g.heard(now) {
			continue
		}
		follower, leader, term := g.state()
		if !follower || leader != from || term == 0 {
			continue
		}
		resp := make(chan raft.RPCResponse, 1)
		g.handle(raft.RPC{Command: &raft.AppendEntriesRequest{RPCHeader: req.RPCHeader, Term: term},
			RespChan: resp})
	}
}
