package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

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
	peers   map[string]*rpcClient // by raft address

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
		peers:    make(map[string]*rpcClient),
		memTable: make(map[string]member),
		groups:   newGroupSet(),
		hb:       newHeartbeats(min(heartbeatWindow, cfg.LeaderLeaseTimeout*3/4)),

		shardKick:  make(chan struct{}, 1),
		reportKick: make(chan struct{}, 1),
		reports:    newReportTable(),
		budget:     newNodeBudget(),
		started:    time.Now(),
		warned:     make(map[string]time.Time),
		left:       make(chan struct{}),
		stop:       make(chan struct{}),
	}
	n.boot = n.started.UnixNano()
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
	if err := n.startGossip(); err != nil {
		n.closeAll()
		return nil, err
	}
	n.cfg.Join = append(n.cfg.Join, via...)
	if why := n.cannotForm(); why != "" {
		n.log.Warn(why)
	}
	n.wg.Add(5)
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
	n.mux = newMux(ln, hostAddr(adv), cfg.Dial, cfg.PeerTLS, n.newPeerAuth(), n.serveRPC, n.fencedFor, n.log, n.metrics.peerRefused)
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

// Ready reports whether the node has a leader and has applied the log it held at
// start.
func (n *Node) Ready() bool {
	m := n.meta
	id, _ := m.Leader()
	return id != "" && m.appliedThrough(m.startIndex) && m.fsm.Halted() == nil && n.disk.refuse() == nil &&
		n.removedWhy() == "" && n.shardsProblem() == ""
}

// shardsProblem says what keeps a sharded node's shards from serving: the
// map not written yet (a node started with --shards), a shard the map places
// here not open yet, not created yet, without a leader, or halted.
func (n *Node) shardsProblem() string {
	m := n.clusterMap()
	if m == nil {
		if n.awaitingMap() {
			return "waiting for the cluster's map of shards"
		}
		return ""
	}
	for s, mg := range m.Groups {
		if !slices.Contains(mg.Replicas, n.cfg.ID) {
			continue
		}
		g := n.groupByID(groupOf(m, s))
		switch {
		case g == nil || g.raft == nil:
			return fmt.Sprintf("shard %d is not open here yet", s)
		case g.fsm.Halted() != nil:
			return fmt.Sprintf("shard %d: %v; stop the node and run `rookery recover --data-dir %s --shard %d`", s, g.fsm.Halted(), n.cfg.DataDir, s)
		}
		if !mg.Created {
			return fmt.Sprintf("shard %d is being created: not every replica votes yet", s)
		}
		if id, _ := g.Leader(); id == "" || !slices.Contains(mg.Replicas, id) {
			// A shard is in place once one of the replicas the map gives it
			// leads: its creator hands it over once they all vote.
			return fmt.Sprintf("shard %d has no leader among its replicas yet", s)
		}
	}
	return ""
}

// awaitingMap reports whether this node, started with --shards, waits for
// the cluster's first map: there is none yet and group 0 holds no filters (a
// cluster that holds some stays one group and serves: createMap).
func (n *Node) awaitingMap() bool {
	return n.clusterMap() == nil && n.cfg.Shards > 0 && n.meta.fsm.Len() == 0
}

// Problem says what keeps the node from serving ("" when nothing does).
func (n *Node) Problem() string {
	if why := n.removedWhy(); why != "" {
		return why + "; " + n.rejoinAdvice()
	}
	if h := n.meta.fsm.Halted(); h != nil {
		if errors.Is(h.Err, fsm.ErrNewerFormat) {
			return h.Error() // it says: upgrade this node
		}
		return h.Error() + "; stop the node and run `rookery recover --data-dir " + n.cfg.DataDir + "`"
	}
	if err := n.disk.refuse(); err != nil {
		return err.Error() + "; writes are refused until there is room (they resume by themselves)"
	}
	if id, _ := n.meta.Leader(); id == "" {
		if why := n.cannotForm(); why != "" {
			return why
		}
		return "no leader"
	}
	if !n.meta.appliedThrough(n.meta.startIndex) {
		return "catching up with the log it held at start"
	}
	return n.shardsProblem()
}

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
		Ready:        n.Ready(),
		LogFormat:    int(n.logFormat()),
		LogFormatUse: g.LogFormatInUse(),
	}
	if !st.Ready {
		st.Problem = n.Problem()
	}
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
		for _, gid := range n.fencedGroups() {
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

// await waits for f like f.Error(), but returns raft.ErrRaftShutdown once raft
// has shut down: raft never answers a future still queued for its leader loop
// or its FSM when it stops, and a loop waiting on one would keep Shutdown
// waiting for it forever.
func (g *group) await(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-g.raftDown:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

// voters counts voters in the latest configuration.
func (g *group) voters() int {
	servers, err := latestServers(g.raft)
	if err != nil {
		return 0
	}
	return countVoters(servers)
}

// peer returns the RPC client for a peer's Raft address.
func (n *Node) peer(addr string) *rpcClient {
	n.peersMu.Lock()
	defer n.peersMu.Unlock()
	p := n.peers[addr]
	if p == nil {
		p = newRPCClient(addr, func(ctx context.Context) (net.Conn, error) {
			return n.mux.dialStream(ctx, addr, streamRPC)
		})
		n.peers[addr] = p
	}
	return p
}

// hostAddr is a TCP address as written, which may name a host rather than an IP.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }
