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
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/rookerydb/rookery/fsm"
)

// Node is one Rookery server: a Raft voter (or non-voter) holding every filter,
// a gossip member, and the gate through which writes are proposed and reads made
// fresh.
type Node struct {
	cfg      Config
	log      *slog.Logger
	fsm      *fsm.FSM
	raft     *raft.Raft
	store    *raftboltdb.BoltStore
	logs     raft.LogStore // the store behind a cache of recent entries
	trans    *raft.NetworkTransport
	mux      *mux
	ml       *memberlist.Memberlist
	delegate *delegate     // this node's gossip metadata
	events   chan struct{} // membership changed: reconcile soon

	raftAdvertise string
	startIndex    uint64 // last log index when the node started

	props    chan proposal
	inflight chan inflightBatch
	slots    chan struct{} // one per entry in the log's hands (maxInflight)
	reserved atomic.Int64  // bytes admitted but not yet applied

	barrierTerm  atomic.Uint64 // term whose Barrier has been applied
	bootstrapped atomic.Bool
	leaderGate   *gate // read index rounds while leading
	remoteGate   *gate // read index rounds asked of the leader

	memMu    sync.Mutex
	memTable map[string]member // by id, from gossip events

	peersMu sync.Mutex
	peers   map[string]*rpcClient // by raft address

	deadMu    sync.Mutex
	deadSince map[string]time.Time
	departed  map[string]time.Time // members that asked to be removed (reconcile.go)

	warnMu sync.Mutex
	warned map[string]time.Time // warnEvery's last line per key

	expireKick chan struct{} // this node started to lead: look at deadlines (expire.go)

	fwdCodec  atomic.Uint32 // the codec version forwarded writes use (codec.go)
	codecUsed atomic.Uint32 // the codec version this node last wrote entries in as leader

	metrics *metrics

	raftUp       chan struct{} // closed once Raft has started
	disk         *disk         // the data directory's volume (disk.go)
	snapshotting atomic.Bool   // a snapshot for a damaged entry is being taken
	gossipAdv    atomic.Value  // string: the gossip address peers may join through
	heal         healState     // rejoining, raft reachability, removal (heal.go)

	left     chan struct{} // closed once the node has left the cluster for good
	leftOnce sync.Once
	stop     chan struct{}
	stopOnce sync.Once
	raftDown chan struct{} // closed once raft has shut down (await)
	downOnce sync.Once
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
		cfg:       cfg,
		log:       cfg.Logger.With("component", "cluster", "node", cfg.ID),
		events:    make(chan struct{}, 1),
		props:     make(chan proposal, 4096),
		inflight:  make(chan inflightBatch, maxInflight),
		slots:     make(chan struct{}, maxInflight),
		peers:     make(map[string]*rpcClient),
		memTable:  make(map[string]member),
		deadSince: make(map[string]time.Time),
		warned:    make(map[string]time.Time),
		left:      make(chan struct{}),
		stop:      make(chan struct{}),
		raftDown:  make(chan struct{}),
		raftUp:    make(chan struct{}),

		expireKick: make(chan struct{}, 1),
	}
	n.fsm = fsm.New(fsm.Options{SessionTTL: cfg.SessionTTL, Logger: cfg.Logger, MaxFormat: n.logFormat(),
		OnExpire: cfg.testOnExpire})
	n.metrics = newMetrics(n, cfg.Registry)
	n.leaderGate = newGate(n.leaderReadIndex)
	n.remoteGate = newGate(n.remoteReadIndex)
	if err := n.listen(); err != nil {
		n.closeAll()
		return nil, err
	}
	if err := n.heal.book.load(cfg.DataDir); err != nil {
		n.closeAll()
		return nil, err
	}
	via, err := n.rejoin()
	if err != nil {
		n.closeAll()
		return nil, err
	}
	if err := n.startRaft(); err != nil {
		n.closeAll()
		return nil, err
	}
	close(n.raftUp)
	if err := n.startGossip(); err != nil {
		n.closeAll()
		return nil, err
	}
	n.cfg.Join = append(n.cfg.Join, via...)
	n.wg.Add(6)
	go n.diskWatch()
	go n.haltWatch()
	go n.proposeLoop()
	go n.resolveLoop()
	go n.leaderLoop()
	go n.membershipLoop()
	n.wg.Add(1)
	go n.expireLoop()
	// Always: a restarted node rejoins from its members file and configuration
	// even without --join (peers.go).
	n.wg.Add(2)
	go n.joinLoop()
	go n.reachLoop()
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
	n.mux = newMux(ln, hostAddr(adv), cfg.Dial, cfg.PeerTLS, n.newPeerAuth(), n.serveRPC, n.log, n.metrics.peerRefused)
	return nil
}

func (n *Node) startRaft() error {
	cfg := n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	rc.LeaderLeaseTimeout = cfg.LeaderLeaseTimeout
	rc.CommitTimeout = cfg.CommitTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	rc.Logger = newHCLogger("raft", n.cfg.Logger)

	// No freelist sync: bolt rebuilds its freelist when it opens instead of writing
	// it on every commit, a page less per fsync (as Consul and Nomad run it).
	n.disk = newDisk(cfg.DataDir, n.log.With("component", "disk"))
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        filepath.Join(cfg.DataDir, "raft.db"),
		BoltOptions: &bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType, Timeout: 2 * time.Second},
	})
	if errors.Is(err, bbolt.ErrTimeout) {
		return fmt.Errorf("open log store %s: another process holds it (is a node already running on this data directory?)", cfg.DataDir)
	}
	if err != nil {
		return fmt.Errorf("open log store %s: %w", cfg.DataDir, err)
	}
	n.store = store
	snaps, err := newSnapStore(cfg.DataDir, 2, n.log.With("component", "snapshot"))
	if err != nil {
		return fmt.Errorf("open snapshot store %s: %w", cfg.DataDir, err)
	}
	// Every entry is read once before raft may, so damage is found here and
	// reported, not applied or panicked on (store.go).
	if err := checkLog(store, snaps, cfg.DataDir, cfg.ID, n.log); err != nil {
		return err
	}
	var onDisk raft.LogStore = diskLogs{LogStore: store, d: n.disk}
	if cfg.testLogStore != nil {
		onDisk = diskLogs{LogStore: cfg.testLogStore(store), d: n.disk}
	}
	cache, err := raft.NewLogCache(512, verifiedStore{LogStore: onDisk, onDamage: n.logDamaged})
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	logs := guardedLogs{LogStore: cache, snaps: snaps}
	n.logs = logs
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  raftLayer{n.mux},
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  newHCLogger("raft-net", n.cfg.Logger),
	})
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("read log store: %w", err)
	}
	n.startIndex = last
	r, err := raft.NewRaft(rc, instrumentFSM(n.fsm, n.metrics), logs, diskStable{StableStore: store, d: n.disk},
		guardedSnaps{SnapshotStore: snaps, logs: store}, n.trans)
	if err != nil {
		if strings.Contains(err.Error(), "failed to load any existing snapshots") {
			return fmt.Errorf("start raft: no snapshot in %s could be restored (each is damaged, or the log after it is gone; "+
				"the log says why above): rejoin from the peers with `rookery recover --data-dir %s`, or restore a backup", cfg.DataDir, cfg.DataDir)
		}
		return fmt.Errorf("start raft: %w", err)
	}
	n.raft = r
	return nil
}

// logDamaged hears of a damaged entry read back from the log while the node
// runs: it says so, and takes a snapshot so that followers needing the entry
// get a snapshot that covers it (this node applied it before it was damaged).
func (n *Node) logDamaged(index uint64, err error) {
	n.warnEvery(fmt.Sprint("damaged:", index), "damaged log entry read back from disk; sending snapshots instead",
		"index", index, "err", err)
	if !n.snapshotting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.snapshotting.Store(false)
		if err := n.raft.Snapshot().Error(); err != nil {
			n.log.Warn("snapshot after a damaged log entry", "err", err)
		}
	}()
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

// FSM returns the node's state machine, for reads.
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// ID returns the node's id.
func (n *Node) ID() string { return n.cfg.ID }

// RaftAddr returns the address peers reach this node's Raft at.
func (n *Node) RaftAddr() string { return n.raftAdvertise }

// GossipAddr returns the address memberlist listens on.
func (n *Node) GossipAddr() string {
	a := n.ml.LocalNode()
	return net.JoinHostPort(a.Addr.String(), fmt.Sprint(a.Port))
}

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// Leader returns the current leader's id and Raft address ("" when unknown).
func (n *Node) Leader() (id, addr string) {
	a, i := n.raft.LeaderWithID()
	return string(i), string(a)
}

// Ready reports whether the node has a leader and has applied the log it held at
// start.
func (n *Node) Ready() bool {
	id, _ := n.Leader()
	return id != "" && n.appliedThrough(n.startIndex) && n.fsm.Halted() == nil && n.disk.refuse() == nil &&
		n.removedWhy() == ""
}

// Problem says what keeps the node from serving ("" when nothing does).
func (n *Node) Problem() string {
	if why := n.removedWhy(); why != "" {
		return why + "; " + n.rejoinAdvice()
	}
	if h := n.fsm.Halted(); h != nil {
		if errors.Is(h.Err, fsm.ErrNewerFormat) {
			return h.Error() // it says: upgrade this node
		}
		return h.Error() + "; stop the node and run `rookery recover --data-dir " + n.cfg.DataDir + "`"
	}
	if err := n.disk.refuse(); err != nil {
		return err.Error() + "; writes are refused until there is room (they resume by themselves)"
	}
	if id, _ := n.Leader(); id == "" {
		return "no leader"
	}
	if !n.appliedThrough(n.startIndex) {
		return "catching up with the log it held at start"
	}
	return ""
}

// haltWatch steps a halted node down from leadership, and keeps it down: it
// can append to the log but no longer apply it, so it must not be the node
// that answers writes.
func (n *Node) haltWatch() {
	defer n.wg.Done()
	select {
	case <-n.fsm.HaltedCh():
	case <-n.stop:
		return
	}
	n.log.Error("state machine halted; this node serves nothing until it is recovered", "problem", n.Problem())
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		if n.IsLeader() && n.voters() > 1 {
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Warn("halted leader could not hand leadership over", "err", err)
			}
		}
		select {
		case <-tick.C:
		case <-n.stop:
			return
		}
	}
}

// Left is closed once the node has left the cluster for good (Leave).
func (n *Node) Left() <-chan struct{} { return n.left }

// Status reports the node's view of itself.
func (n *Node) Status() Status {
	lid, _ := n.Leader()
	st := Status{
		ID:           n.cfg.ID,
		Role:         strings.ToLower(n.raft.State().String()),
		LeaderID:     lid,
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.fsm.AppliedIndex(),
		Filters:      n.fsm.Len(),
		MemoryBytes:  n.fsm.MemoryBytes(),
		Ready:        n.Ready(),
		LogFormat:    int(n.logFormat()),
		LogFormatUse: n.LogFormatInUse(),
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
	if lc := n.raft.LastContact(); !lc.IsZero() && st.Role != "leader" {
		st.LastContact = time.Since(lc).Round(time.Millisecond).String()
	}
	return st
}

// Shutdown stops the node cleanly. Unless the node is configured to leave on
// terminate, it stays in the configuration: a leader hands leadership over first,
// and a restart with the same data directory rejoins as the same member.
func (n *Node) Shutdown(ctx context.Context) error {
	if n.cfg.LeaveOnTerminate {
		if err := n.Leave(ctx); err != nil {
			n.log.Warn("leave on terminate", "err", err)
		}
	} else if n.IsLeader() && n.voters() > 1 {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("leadership transfer before shutdown", "err", err)
		}
	}
	return n.closeAll()
}

// await waits for f like f.Error(), but returns raft.ErrRaftShutdown once raft
// has shut down: raft never answers a future still queued for its leader loop
// or its FSM when it stops, and a loop waiting on one would keep Shutdown
// waiting for it forever.
func (n *Node) await(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.raftDown:
		select {
		case err := <-done:
			return err
		default:
			return raft.ErrRaftShutdown
		}
	}
}

func (n *Node) closeAll() error {
	var errs []error
	n.stopOnce.Do(func() { close(n.stop) })
	if n.ml != nil {
		// Shutdown, not Leave: the others see this node fail, not depart, and keep
		// it in the configuration.
		errs = append(errs, n.ml.Shutdown())
	}
	if n.raft != nil {
		errs = append(errs, n.raft.Shutdown().Error())
	}
	n.downOnce.Do(func() { close(n.raftDown) })
	if n.trans != nil {
		errs = append(errs, n.trans.Close())
	}
	if n.mux != nil {
		errs = append(errs, n.mux.close())
	}
	n.peersMu.Lock()
	for _, p := range n.peers {
		p.close()
	}
	n.peersMu.Unlock()
	n.wg.Wait()
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}

func (n *Node) stopping() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// voters counts voters in the latest configuration.
func (n *Node) voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
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
