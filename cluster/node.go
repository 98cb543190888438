package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/logengine"
)

// Node is one Rookery server: a Raft voter (or non-voter) holding every filter,
// a gossip member, and the gate through which writes are proposed and reads made
// fresh.
type Node struct {
	// meta is group 0, the cluster's metadata group: every node holds a
	// replica of it, its configuration is the cluster's membership, and on a
	// sharded cluster it holds the map of shards and nothing else. On a
	// cluster of one group it is also that group's only shard
	// (docs/SHARDING.md).
	meta *group
	// engine holds the Raft log and stable store of every group on the
	// node (logstore.go); engineInUse says a group's raft was left running
	// at close, so the engine must stay open.
	engine      *logengine.Engine
	engineInUse atomic.Bool
	engineOnce  sync.Once
	hb          *heartbeats // heartbeats the node's groups share (heartbeats.go)
	// peerLog folds raft's repeated failures to reach a peer, whichever of
	// the node's groups failed (logging.go): a dead peer is one ERROR and a
	// WARN a minute however many shards the node holds.
	peerLog *peerLog

	cfg      Config
	log      *slog.Logger
	mux      *mux
	ml       *memberlist.Memberlist
	delegate *delegate     // this node's gossip metadata
	events   chan struct{} // membership changed: reconcile soon

	raftAdvertise string

	bootstrapped atomic.Bool

	memMu sync.Mutex
	// regossipMu serializes regossip (heal.go).
	regossipMu sync.Mutex
	// reconciled counts the membership rounds this node ran as leader, so
	// tests can wait for rounds instead of sleeping.
	reconciled atomic.Uint64
	memTable   map[string]member // by id, from gossip events

	peersMu sync.Mutex
	peers   map[peerRef]*rpcClient

	memberHostSet *memberHosts // members' addresses, for the Raft port's pending slots (memberhosts.go)

	groups *groupSet // every open group, group 0 included (groups.go)

	cmap     atomic.Pointer[fsm.Map] // the newest cluster map this node holds (clustermap.go)
	fetching atomic.Bool             // a map is being fetched from a member
	keptMap  uint64                  // the map version in MapFile (shard loop only)
	// keptMapAtStart is the version of the map the node found on disk (0:
	// none); mapChecked is set once the node knows its map is current
	// (fence.go).
	keptMapAtStart uint64
	mapChecked     atomic.Bool
	fencedOnce     onceSet // fenced shards this node has told its log of
	// gossipedLeads are the groups this node last gossiped it leads (shard loop only).
	gossipedLeads []int

	cmdHandler atomic.Pointer[CommandHandler] // runs forwarded commands (forward.go)
	mapWait    *holdQueue                     // writes waiting for the first map (--shards), or for their shard
	heldFor    sync.Map                       // *fsm.Command -> the shard a held write was submitted to
	shardKick  chan struct{}                  // the map or a leadership changed: look at the groups

	recMu sync.Mutex
	rec   *reconciler // membership decisions' memory (plan.go)

	warnMu sync.Mutex
	warned map[string]time.Time // warnEvery's last line per key

	fwdCodec atomic.Uint32 // the codec version forwarded writes use (codec.go)

	metrics *metrics

	boot       int64         // when this process started the node, unix nanoseconds (reports)
	started    time.Time     // the same, for liveness
	reportSeq  atomic.Uint64 // the last report's sequence number
	reportKick chan struct{} // something changed: push a report soon
	reports    *reportTable  // every node's newest report (reports.go)
	budget     *nodeBudget   // memory set aside for writes not yet applied (budget.go)

	disk      *disk        // the data directory's volume (disk.go)
	gossipAdv atomic.Value // string: the gossip address peers may join through
	heal      healState    // rejoining, removal (heal.go)

	// stopping is set once Shutdown begins: the node tells its peers, so
	// that no group hands leadership back to it (reports.go).
	stopping atomic.Bool
	left     chan struct{} // closed once the node has left the cluster for good
	leftOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// New opens the node's stores, starts Raft and gossip, and returns once the node
// is listening. It bootstraps or joins in the background.
func New(c Config) (*Node, error) {
	cfg, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("create data dir %s: %w", cfg.DataDir, err)
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("component", "cluster", "node", cfg.ID),
		events:   make(chan struct{}, 1),
		peers:    make(map[peerRef]*rpcClient),
		memTable: make(map[string]member),
		groups:   newGroupSet(),
		hb:       newHeartbeats(min(heartbeatWindow, cfg.LeaderLeaseTimeout*3/4)),

		shardKick:     make(chan struct{}, 1),
		reportKick:    make(chan struct{}, 1),
		reports:       newReportTable(),
		budget:        newNodeBudget(),
		started:       time.Now(),
		warned:        make(map[string]time.Time),
		memberHostSet: newMemberHosts(),
		left:          make(chan struct{}),
		stop:          make(chan struct{}),
	}
	n.boot = n.started.UnixNano()
	n.peerLog = newPeerLog(n.peerStopping)
	n.rec = newReconciler(cfg.DeadServerTimeout)
	n.mapWait = newHoldQueue(n.dispatchAfterMap, holdFor(cfg), n.stop)
	n.mapWait.expired = fmt.Errorf("%w: the cluster's shards are not in place yet (its map is not written, or the key's shard is not created)", fsm.ErrMapGroup)
	n.meta = newGroup(n, 0, cfg.DataDir)
	n.metrics = newMetrics(n, cfg.Registry)
	n.disk = newDisk(cfg.DataDir, n.log.With("component", "disk"))
	if n.engine, err = openEngine(cfg.DataDir, n.log.With("component", "logengine")); err != nil {
		if errors.Is(err, ErrInUse) {
			err = fmt.Errorf("open log store %s: another process holds it (is a node already running on this data directory?)", cfg.DataDir)
		}
		return nil, err
	}
	n.budget.engine = n.engine.MemoryUse
	if err := n.listen(); err != nil {
		n.closeAll()
		return nil, err
	}
	if err := n.loadMap(); err != nil {
		n.closeAll()
		return nil, err
	}
	// A recovery of the one group, or of group 0, fences nothing: members it
	// cut off are out of the configuration and told so (heal.go).
	_ = os.Remove(filepath.Join(cfg.DataDir, RecoveredFile))
	if err := n.heal.book.load(cfg.DataDir); err != nil {
		n.closeAll()
		return nil, err
	}
	// The peers of the members file take members' pending slots from now on
	// (connlimit.go): a node restarting under a flood of strangers is still
	// reached by its peers.
	n.refreshMemberHosts(false)
	via, err := n.rejoin()
	if err != nil {
		n.closeAll()
		return nil, err
	}
	if _, err := n.groups.openOrGet(0, func() bool { return false }, func() (*group, error) {
		return n.meta, n.meta.open(n.mux.openGroup(0))
	}); err != nil {
		n.closeAll()
		return nil, err
	}
	n.refreshMemberHosts(false) // and the servers of group 0's configuration
	if err := n.startGossip(); err != nil {
		n.closeAll()
		return nil, err
	}
	n.cfg.Join = append(n.cfg.Join, via...)
	if why := n.cannotForm(); why != "" {
		n.log.Warn(why)
	}
	n.wg.Add(6)
	go n.memberHostsLoop()
	go n.reportLoop()
	go n.shardLoop()
	go n.diskWatch()
	go n.membershipLoop()
	// Always: a restarted node rejoins from its members file and configuration
	// even without --join (peers.go).
	go n.joinLoop()
	return n, nil
}

// listen opens the Raft port: the mux serves node-to-node requests once Raft
// has started, and holds Raft's own connections until then.
func (n *Node) listen() error {
	cfg := n.cfg
	ln, err := net.Listen("tcp", cfg.RaftAddr)
	if err != nil {
		return fmt.Errorf("listen raft %s: %w", cfg.RaftAddr, err)
	}
	adv := cfg.RaftAdvertise
	if adv == "" {
		adv = advertiseOf(cfg.RaftAddr, ln.Addr())
	}
	if _, _, err := net.SplitHostPort(adv); err != nil {
		ln.Close()
		return fmt.Errorf("raft advertise address %s: %w", adv, err)
	}
	// Kept as given, host name and all: a container restarted with a new IP
	// address is still reached at its name.
	n.raftAdvertise = adv
	n.mux = newMux(ln, hostAddr(adv), muxConfig{
		dial: cfg.Dial, tls: cfg.PeerTLS, auth: n.newPeerAuth(), serveRPC: n.serveRPC, fenced: n.fencedFor, log: n.log,
		refused: n.metrics.peerRefused,
		pendingRefused: [2]prometheus.Counter{
			fromStranger: n.metrics.pendingRefused.WithLabelValues(fromStranger.String()),
			fromMember:   n.metrics.pendingRefused.WithLabelValues(fromMember.String()),
		},
		misdialed: n.misdialed,
	})
	return nil
}

// advertiseOf turns a listen address into one peers can dial: an unspecified
// host becomes the host name, a zero port the port actually bound.
func advertiseOf(listen string, bound net.Addr) string {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return bound.String()
	}
	_, port, _ := net.SplitHostPort(bound.String())
	if host == "" || host == "0.0.0.0" || host == "::" {
		if h, err := os.Hostname(); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address peers reach this node's Raft at.
func (n *Node) RaftAddr() string { return n.raftAdvertise }

// GossipAddr returns the address memberlist listens on.
func (n *Node) GossipAddr() string {
	a := n.ml.LocalNode()
	return net.JoinHostPort(a.Addr.String(), fmt.Sprint(a.Port))
}

// IsLeader reports whether this node leads the group now.
func (g *group) IsLeader() bool { return g.raft.State() == raft.Leader }

// Leader returns the group's current leader's id and Raft address ("" when
// unknown).
func (g *group) Leader() (id, addr string) {
	a, i := g.raft.LeaderWithID()
	return string(i), string(a)
}

// awaitingMap reports whether this node, started with --shards, waits for
// the cluster's first map: there is none yet and group 0 holds no filters (a
// cluster that holds some stays one group and serves: createMap).
func (n *Node) awaitingMap() bool {
	return n.clusterMap() == nil && n.cfg.Shards > 0 && n.meta.fsm.Len() == 0
}

// Problem says what keeps the node from serving ("" when nothing does):
// Readiness.
func (n *Node) Problem() string { return n.Readiness().Problem }

// haltWatch steps a halted node down from leadership, and keeps it down: it
// can append to the log but no longer apply it, so it must not be the node
// that answers writes.
func (g *group) haltWatch() {
	defer g.wg.Done()
	select {
	case <-g.fsm.HaltedCh():
	case <-g.stop:
		return
	}
	g.log.Error("state machine halted; this node serves nothing until it is recovered", "problem", g.n.Problem())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if g.IsLeader() && g.voters() > 1 {
			if err := g.raft.LeadershipTransfer().Error(); err != nil {
				g.log.Warn("halted leader could not hand leadership over", "err", err)
			}
		}
		select {
		case <-tick.C:
		case <-g.stop:
			return
		}
	}
}

// Left is closed once the node has left the cluster for good (Leave).
func (n *Node) Left() <-chan struct{} { return n.left }

// Status reports the node's view of itself.
func (n *Node) Status() Status {
	g := n.meta
	lid, _ := g.Leader()
	st := Status{
		ID:           n.cfg.ID,
		Role:         strings.ToLower(g.raft.State().String()),
		LeaderID:     lid,
		Term:         g.raft.CurrentTerm(),
		CommitIndex:  g.raft.CommitIndex(),
		AppliedIndex: g.fsm.AppliedIndex(),
		Filters:      g.fsm.Len(),
		MemoryBytes:  g.fsm.MemoryBytes(),
		LogFormat:    int(n.logFormat()),
		LogFormatUse: g.LogFormatInUse(),
	}
	rd := n.Readiness()
	st.Ready, st.Problem = rd.Ready, rd.Problem
	if n.removedWhy() != "" {
		st.Role = "removed"
	}
	if lid != "" {
		if m, ok := n.memberMeta(lid); ok {
			st.LeaderRESP = m.RESP
		}
	}
	if lc := g.raft.LastContact(); !lc.IsZero() && st.Role != "leader" {
		st.LastContact = time.Since(lc).Round(time.Millisecond).String()
	}
	if m := n.clusterMap(); m != nil {
		// Sharded: group 0 holds the map; the node's filters are its shards'.
		st.Sharded = true
		st.Filters, st.MemoryBytes = 0, 0
		for _, g := range n.openGroups() {
			if g.id == 0 || g.raft == nil {
				continue
			}
			ss := g.shardStatus(shardOfGroup(m, g.id))
			st.Filters += ss.Filters
			st.MemoryBytes += ss.MemoryBytes
			st.Shards = append(st.Shards, ss)
		}
		for _, gid := range n.fencedGroups(m) {
			s := shardOfGroup(m, gid)
			st.Shards = append(st.Shards, ShardStatus{Shard: s, Role: "removed", Problem: n.fenceAdvice(s)})
		}
	}
	return st
}

// ShardStatus is this node's replica of one shard (/v1/status, rookery
// status).
type ShardStatus struct {
	Shard        int    `json:"shard"`
	Role         string `json:"role"`
	LeaderID     string `json:"leader_id"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	Filters      int    `json:"filters"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	// Problem says why the replica serves nothing (a recovery of the shard
	// cut it off: Role is then "removed").
	Problem string `json:"problem,omitempty"`
}

func (g *group) shardStatus(shard int) ShardStatus {
	lid, _ := g.Leader()
	return ShardStatus{Shard: shard, Role: strings.ToLower(g.raft.State().String()), LeaderID: lid,
		Term: g.raft.CurrentTerm(), CommitIndex: g.raft.CommitIndex(), AppliedIndex: g.fsm.AppliedIndex(),
		Filters: g.fsm.Len(), MemoryBytes: g.fsm.MemoryBytes()}
}

// await waits for f, a future of g.raft: like every future groupRaft hands
// out, it answers raft.ErrRaftShutdown once raft is told to stop
// (groupraft.go), so a loop waiting on one never keeps Shutdown waiting.
func (g *group) await(f raft.Future) error { return f.Error() }

// voters counts voters in the latest configuration.
func (g *group) voters() int {
	servers, err := latestServers(g.raft)
	if err != nil {
		return 0
	}
	return countVoters(servers)
}

// peerRef is a node and the Raft address it is reached at; it names an RPC
// client.
type peerRef struct{ id, addr string }

// peer returns the RPC client for node id at a Raft address. With peer TLS it
// connects only to a node holding id's certificate (stream.go).
func (n *Node) peer(id, addr string) *rpcClient {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	k := peerRef{id, addr}
	p := n.peers[k]
	if p == nil {
		p = newRPCClient(addr, func(ctx context.Context) (net.Conn, error) {
			return n.mux.dialStream(ctx, id, addr, streamRPC)
		})
		n.peers[k] = p
	}
	return p
}

// hostAddr is a TCP address as written, which may name a host rather than an IP.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }
