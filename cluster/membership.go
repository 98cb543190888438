package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// meta is what each member gossips about itself.
type meta struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	RESP string `json:"resp"`
	HTTP string `json:"http"`
	// Leaving is set by a member on its way out for good, so that the others
	// tell its departure from a failure.
	Leaving bool `json:"leaving,omitempty"`
	// Codec is the log entry codec version the member writes and reads up to
	// (fsm.CodecVersion); absent from builds before it was gossiped.
	Codec int `json:"codec,omitempty"`
	// Disk says why the member's disk takes no more log ("" when it does).
	Disk string `json:"disk,omitempty"`
	// Mem is the member's --max-memory in bytes, -1 for none; absent (0) from
	// builds before it was gossiped (memlimit.go).
	Mem int64 `json:"mem,omitempty"`
	// Member says the node has been in a committed configuration and keeps
	// the state it had there: if it is not in the configuration now, it was
	// removed (or left), and the leader tells it so rather than add it back
	// with that state (heal.go).
	Member bool `json:"member,omitempty"`
	// MapVer is the version of the cluster map the member holds (0: none;
	// docs/SHARDING.md), and Leads the shards whose groups it leads.
	MapVer uint64 `json:"map,omitempty"`
	Leads  []int  `json:"leads,omitempty"`
}

// delegate serves this node's metadata to memberlist.
type delegate struct {
	mu     sync.Mutex
	meta   []byte
	notify func([]byte) // a user message from another member
}

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit {
		return nil
	}
	return d.meta
}

func (d *delegate) set(m meta) {
	b, _ := json.Marshal(m)
	d.mu.Lock()
	d.meta = b
	d.mu.Unlock()
}

func (d *delegate) NotifyMsg(b []byte) {
	if d.notify != nil {
		d.notify(b)
	}
}
func (*delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (*delegate) LocalState(join bool) []byte                { return nil }
func (*delegate) MergeRemoteState(buf []byte, join bool)     {}

// events keeps the node's own copy of the member list. memberlist's Members()
// hands out pointers into state it keeps changing under its own lock, so reading
// them later races; the event callbacks run under that lock, and copy.
type events struct{ n *Node }

func (e events) NotifyJoin(m *memberlist.Node)   { e.n.noteMember(m, false) }
func (e events) NotifyLeave(m *memberlist.Node)  { e.n.noteMember(m, true) }
func (e events) NotifyUpdate(m *memberlist.Node) { e.n.noteMember(m, false) }

// noteMember records a member's metadata and state, and wakes reconciliation.
// memberlist does not fill in Node.State for callbacks: a join or update means
// alive, a leave means dead, or left if the member announced it was leaving.
//
// A member speaks only for itself: metadata whose id is not the gossip name of
// the member that carries it is ignored, so one member cannot overwrite
// another's entry (its Raft address above all).
func (n *Node) noteMember(m *memberlist.Node, gone bool) {
	var md meta
	if json.Unmarshal(m.Meta, &md) != nil || md.ID == "" {
		return
	}
	if md.ID != m.Name {
		n.warnEvery("meta:"+m.Name, "ignoring gossip metadata that names another member",
			"gossip_name", m.Name, "claimed_id", md.ID, "from", m.Address())
		return
	}
	state := memberlist.StateAlive
	if gone {
		state = memberlist.StateDead
		if md.Leaving {
			state = memberlist.StateLeft
		}
	}
	n.memMu.Lock()
	now := time.Now()
	since := now
	if old, ok := n.memTable[md.ID]; ok && old.state == state {
		since = old.since
	}
	n.memTable[md.ID] = member{meta: md, state: state, gossip: m.Address(), since: since}
	n.noteCodecs()
	n.memMu.Unlock()
	if state == memberlist.StateAlive {
		n.maybeFetchMap(md)
		if since == now {
			// A member new to this node, or back: it hears this node's
			// report at once rather than at the next tick.
			n.kickReport()
		}
	}
	n.membershipChanged()
}

func (n *Node) membershipChanged() {
	select {
	case n.events <- struct{}{}:
	default:
	}
}

func (n *Node) startGossip() error {
	host, portStr, err := net.SplitHostPort(n.cfg.GossipAddr)
	if err != nil {
		return fmt.Errorf("gossip address %s: %w", n.cfg.GossipAddr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("gossip address %s: %w", n.cfg.GossipAddr, err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = n.cfg.ID
	mc.BindAddr = resolveHost(host)
	mc.BindPort = port
	if n.cfg.GossipAdvertise != "" {
		ah, ap, err := net.SplitHostPort(n.cfg.GossipAdvertise)
		if err != nil {
			return fmt.Errorf("gossip advertise address %s: %w", n.cfg.GossipAdvertise, err)
		}
		mc.AdvertiseAddr = resolveHost(ah)
		mc.AdvertisePort, _ = strconv.Atoi(ap)
	}
	// A LAN of a few nodes: detect failures in about a second.
	mc.ProbeInterval = 500 * time.Millisecond
	mc.ProbeTimeout = 250 * time.Millisecond
	mc.GossipInterval = 100 * time.Millisecond
	mc.SuspicionMult = 2
	mc.SecretKey = n.cfg.GossipKey
	mc.Logger = log.New(&slogWriter{log: n.cfg.Logger.With("component", "gossip")}, "", 0)
	if err := n.gossipTransport(mc); err != nil {
		return fmt.Errorf("start gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	n.delegate = &delegate{notify: n.noteMessage}
	n.delegate.set(n.localMeta())
	mc.Delegate = n.delegate
	mc.Events = events{n}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return fmt.Errorf("start gossip on %s: %w", n.cfg.GossipAddr, err)
	}
	n.ml = ml
	n.gossipAdv.Store(n.GossipAddr())
	return nil
}

// resolveHost turns a host name into an IP address for memberlist, which binds
// and advertises IPs only.
func resolveHost(h string) string {
	if h == "" {
		return "0.0.0.0"
	}
	if net.ParseIP(h) != nil {
		return h
	}
	if addrs, err := net.LookupHost(h); err == nil && len(addrs) > 0 {
		return addrs[0]
	}
	return h
}

// member is a gossip member with its metadata parsed.
type member struct {
	meta
	state  memberlist.NodeStateType
	gossip string    // where the member gossips (host:port)
	since  time.Time // when gossip last changed the member's state
}

// members lists every member gossip has seen, with its last known state
// (alive, dead or left), sorted by id.
func (n *Node) members() []member {
	n.memMu.Lock()
	out := make([]member, 0, len(n.memTable))
	for _, m := range n.memTable {
		out = append(out, m)
	}
	n.memMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// localMeta is this node's own metadata.
func (n *Node) localMeta() meta {
	m := meta{ID: n.cfg.ID, Raft: n.raftAdvertise, RESP: n.cfg.RESPAddr, HTTP: n.cfg.HTTPAddr, Codec: int(n.logFormat()),
		Member: n.heal.book.get().Member, Leads: n.leads(), Mem: memMeta(n.cfg.MaxMemory)}
	if cm := n.clusterMap(); cm != nil {
		m.MapVer = cm.Version
	}
	if n.disk != nil {
		if err := n.disk.refuse(); err != nil {
			m.Disk = err.Error()
		}
	}
	return m
}

// memberMeta returns the metadata of member id.
func (n *Node) memberMeta(id string) (meta, bool) {
	n.memMu.Lock()
	m, ok := n.memTable[id]
	n.memMu.Unlock()
	if ok {
		return m.meta, true
	}
	if id == n.cfg.ID {
		return n.localMeta(), true
	}
	return meta{}, false
}

// membershipLoop bootstraps when the expected members are known, keeps the
// members file and the node's removed state current, and on the leader
// reconciles the Raft configuration with gossip, on every event and once a
// second.
func (n *Node) membershipLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for !n.closing() {
		n.maybeBootstrap()
		n.tendMembership()
		// With a cluster map too: group 0 holds the map alone, on every node,
		// with membership as before shards (at most mapGroupVoters voting);
		// the shard loop places and moves only the shards' groups
		// (shardloop.go).
		if n.meta.IsLeader() {
			n.reconcile()
		}
		select {
		case <-n.events:
		case <-tick.C:
		case <-n.stop:
			return
		}
	}
}

// warnEvery logs a warning at most once a minute per key: reconciliation runs
// every second and would otherwise repeat itself.
func (n *Node) warnEvery(key, msg string, args ...any) {
	n.warnMu.Lock()
	last, ok := n.warned[key]
	now := time.Now()
	if ok && now.Sub(last) < time.Minute {
		n.warnMu.Unlock()
		return
	}
	n.warned[key] = now
	n.warnMu.Unlock()
	n.log.Warn(msg, args...)
}

// errWrongIdentity reports a Raft address that answers as another node.
var errWrongIdentity = errors.New("the node at that address has another id")

// verifyIdentity checks that the node answering at raftAddr is id, and
// returns what it says of its replica of group 0 (group.verify, for any
// group).
func (n *Node) verifyIdentity(id, raftAddr string) (peerStatus, error) {
	return n.meta.verify(id, raftAddr)
}

// peerStatusOf asks member id about its Raft state (of group 0).
func (n *Node) peerStatusOf(ctx context.Context, id, raftAddr string) (peerStatus, error) {
	return n.meta.statusOf(ctx, id, raftAddr)
}

// statusOf asks node id at raftAddr about its replica of this group.
func (g *group) statusOf(ctx context.Context, id, raftAddr string) (peerStatus, error) {
	var ps peerStatus
	body, err := g.call(ctx, id, raftAddr, opStatus, nil)
	if err != nil {
		return ps, err
	}
	err = json.Unmarshal(body, &ps)
	return ps, err
}

// verify checks that the node answering at raftAddr is id, and returns what
// it says of its replica of this group: the one check of every membership
// change of every group. Gossip alone never makes a voter or moves a
// member's Raft address: the node at the address must answer as id, and with
// peer TLS hold the certificate of id (the request is dialled to id, and the
// dial refuses a node with another's certificate: stream.go).
func (g *group) verify(id, raftAddr string) (peerStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ps, err := g.statusOf(ctx, id, raftAddr)
	if err != nil {
		if errors.Is(err, errWrongPeer) {
			err = fmt.Errorf("%w: %v", errWrongIdentity, err)
		}
		return ps, err
	}
	if ps.ID != id {
		return ps, fmt.Errorf("%w: %s answers as %q, not %q", errWrongIdentity, raftAddr, ps.ID, id)
	}
	return ps, nil
}
