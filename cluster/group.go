package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/logengine"
	"github.com/rookerydb/rookery/internal/mutant"
)

// group is one Raft group on this node (docs/SHARDING.md): its log and
// stable store, its snapshots, its raft and state machine, and what serves
// writes (the proposer) and reads (the read index) to it. Group 0 lives in
// the data directory itself, as the one group of a cluster before shards
// did; group s > 0 in DATA_DIR/shards/<s>. Everything a group does is its
// own; what it shares with the node's other groups (gossip, the Raft port,
// the disk, the node's identity) it reaches through n.
type group struct {
	n   *Node
	id  int
	dir string
	log *slog.Logger

	fsm   *fsm.FSM
	raft  *groupRaft
	store *logengine.Log // the group's log and stable store in the node's engine (logstore.go)
	logs  raft.LogStore  // the store behind a cache of recent entries
	trans *pipelinedTransport

	startIndex uint64 // last log index when the group started

	prop       *proposer  // writes into log entries (proposer.go)
	hold       *holdQueue // writes waiting for a leader (hold.go)
	reads      *reader    // the read index protocol (readindex.go)
	readHold   readHold   // reads waiting for a leader (hold.go)
	leaderGate *gate      // read index rounds while leading
	remoteGate *gate      // read index rounds asked of the leader

	expireKick   chan struct{} // this node started to lead: look at deadlines (expire.go)
	codecUsed    atomic.Uint32 // the codec version this node last wrote entries in as leader
	snapshotting atomic.Bool   // a snapshot for a damaged entry is being taken
	reach        raftReach     // whom the leader's heartbeats reach (heal.go)

	raftUp    chan struct{} // closed once raft has started
	stop      chan struct{}
	stopOnce  sync.Once
	raftDown  chan struct{} // closed once raft has shut down (await)
	downOnce  sync.Once
	layer     raftLayer // the group's Raft streams on the node's port
	handle    *Replica  // the group's replica handle (replica.go)
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// newGroup prepares group id in dir; open starts it.
func newGroup(n *Node, id int, dir string) *group {
	g := &group{
		n:          n,
		id:         id,
		dir:        dir,
		log:        n.log.With(n.shardAttr(id)),
		expireKick: make(chan struct{}, 1),
		raftUp:     make(chan struct{}),
		stop:       make(chan struct{}),
		raftDown:   make(chan struct{}),
	}
	g.hold = newHoldQueue(g.dispatch, holdFor(n.cfg), g.stop)
	g.readHold = newReadHold(holdFor(n.cfg), holdPoll, g.stop)
	// Group g > 0 holds shard g-1 (group 0 holds the map); group 0 is shard 0
	// of a cluster of one group.
	g.handle = &Replica{n: n, g: g, shard: max(id-1, 0)}
	cfg := n.cfg
	opts := fsm.Options{SessionTTL: cfg.SessionTTL, Logger: cfg.Logger, MaxFormat: n.logFormat(), OnExpire: cfg.testOnExpire}
	if id == 0 {
		// Group 0 holds the cluster map; the node adopts each version.
		opts.OnMap = func(m *fsm.Map) { n.adoptMap(m, "group 0") }
		// and the users (ACL).
		opts.Users, opts.RequirePass = cfg.Users, cfg.RequirePass
		opts.OnUsers = func() { go g.nudgeUsers() }
	}
	g.fsm = fsm.New(opts)
	g.reads = &reader{self: cfg.ID, call: g.call, skipConfirm: func() bool { return mutant.On(mutant.SkipVerifyLeader) }}
	g.leaderGate = newGate(g.reads.leaderRound)
	g.remoteGate = newGate(g.reads.remoteIndex)
	return g
}

// closed reports whether the store closed the group.
func (g *group) closed() bool {
	select {
	case <-g.stop:
		return true
	default:
		return false
	}
}

// call sends a request about this group to node id at a Raft address and
// waits for its answer.
func (g *group) call(ctx context.Context, id, addr string, op byte, body []byte) ([]byte, error) {
	op, body = groupOp(g.id, op, body)
	return g.n.peer(id, addr).call(ctx, op, body)
}

// open starts the group's raft over layer and the loops that serve it.
func (g *group) open(layer raftLayer) error {
	g.layer = layer
	if err := g.startRaft(layer); err != nil {
		return err
	}
	g.prop = g.newProposer()
	close(g.raftUp)
	g.wg.Add(6)
	go g.haltWatch()
	go func() { defer g.wg.Done(); g.prop.proposeLoop() }()
	go func() { defer g.wg.Done(); g.prop.resolveLoop() }()
	go g.leaderLoop()
	go g.expireLoop()
	go g.reachLoop()
	return nil
}

// close stops the group's loops and raft and closes its stores. It cuts the
// group's Raft connections before it waits for raft to stop: a replication
// goroutine blocked writing to a follower that no longer reads (its pipeline
// full) returns only once its connection is closed under it, and raft's
// Shutdown waits for it. It may be called more than once.
func (g *group) close() error {
	var errs []error
	g.closeOnce.Do(func() {
		g.stopOnce.Do(func() { close(g.stop) })
		g.n.hb.unregister(g.id)
		var down raft.Future
		if g.raft != nil {
			down = g.raft.Shutdown()
		}
		g.downOnce.Do(func() { close(g.raftDown) })
		if g.trans != nil {
			errs = append(errs, g.trans.Close())
			g.trans.closePipelines()
		}
		g.layer.closeConns()
		if down != nil {
			done := make(chan error, 1)
			go func() { done <- down.Error() }()
			select {
			case err := <-done:
				errs = append(errs, err)
			case <-time.After(closeTimeout):
				g.log.Error("raft did not stop in time after its connections were closed; leaving it behind",
					"waited", closeTimeout)
				// It may still write its log: the node leaves the engine open.
				g.n.engineInUse.Store(true)
				return
			}
		}
		g.wg.Wait()
	})
	return errors.Join(errs...)
}

func (g *group) startRaft(layer raft.StreamLayer) error {
	cfg := g.n.cfg
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
	rc.Logger = newRaftLogger(g.raftLog(), g.n.peerLog)

	store, err := groupLog(g.n.engine, g.id, g.dir, g.log)
	if err != nil {
		return err
	}
	g.store = store
	snaps, err := newSnapStore(g.dir, 2, g.log.With("component", "snapshot"))
	if err != nil {
		return fmt.Errorf("open snapshot store %s: %w", g.dir, err)
	}
	// Every entry is read once before raft may, so damage is found here and
	// reported, not applied or panicked on (store.go).
	if err := checkLog(store, snaps, g.dir, cfg.ID, g.log); err != nil {
		return err
	}
	d := g.n.disk
	var onDisk raft.LogStore = diskLogs{LogStore: store, d: d}
	if cfg.testLogStore != nil {
		onDisk = diskLogs{LogStore: cfg.testLogStore(store), d: d}
	}
	cache, err := raft.NewLogCache(512, verifiedStore{LogStore: onDisk, onDamage: g.logDamaged})
	if err != nil {
		return fmt.Errorf("log cache: %w", err)
	}
	logs := guardedLogs{LogStore: cache, snaps: snaps}
	g.logs = logs
	g.trans = newPipelinedTransport(raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  layer,
		MaxPool: 4,
		Timeout: 5 * time.Second,
		Logger:  newHCLogger("raft-net", cfg.Logger.With(g.n.shardAttr(g.id))),
	}), g.n.hb, g.id)
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("read log store: %w", err)
	}
	g.startIndex = last
	r, err := raft.NewRaft(rc, instrumentFSM(g.fsm, g.n.metrics), logs, diskStable{StableStore: store, d: d},
		guardedSnaps{SnapshotStore: snaps, logs: store}, g.trans)
	if err != nil {
		if strings.Contains(err.Error(), "failed to load any existing snapshots") {
			return fmt.Errorf("start raft: no snapshot in %s could be restored (each is damaged, or the log after it is gone; "+
				"the log says why above): rejoin from the peers with `rookery recover --data-dir %s`, or restore a backup", g.dir, g.n.cfg.DataDir)
		}
		return fmt.Errorf("start raft: %w", err)
	}
	g.raft = &groupRaft{Raft: r, down: g.raftDown}
	if h := g.trans.heartbeatHandler(); h != nil {
		g.n.hb.register(g.id, hbGroup{handle: h, heard: g.trans.heardLately, state: func() (bool, raft.ServerAddress, uint64) {
			addr, _ := r.LeaderWithID()
			return r.State() == raft.Follower, addr, r.CurrentTerm()
		}})
	}
	g.reads.r = r
	return nil
}

// raftLog is where the group's raft logs: component=raft, and the shard as
// the tools name it.
func (g *group) raftLog() *slog.Logger {
	return g.n.cfg.Logger.With("component", "raft", g.n.shardAttr(g.id))
}

// logDamaged hears of a damaged entry read back from the log while the node
// runs: it says so, and takes a snapshot so that followers needing the entry
// get a snapshot that covers it (this node applied it before it was damaged).
func (g *group) logDamaged(index uint64, err error) {
	g.n.warnEvery(fmt.Sprint("damaged:", g.id, ":", index), "damaged log entry read back from disk; sending snapshots instead",
		g.n.shardAttr(g.id), "index", index, "err", err)
	if !g.snapshotting.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer g.snapshotting.Store(false)
		if err := g.raft.Snapshot().Error(); err != nil {
			g.log.Warn("snapshot after a damaged log entry", "err", err)
		}
	}()
}

// bootstrapAlone makes this node the one voter of a group that has no Raft
// state: the only safe way to create a group, since one node decides
// (docs/SHARDING.md, "Creation"). The group's leader then adds the replicas
// the map places.
func (g *group) bootstrapAlone() error {
	if g.raft.LastIndex() > 0 || g.raft.CurrentTerm() > 0 {
		return nil
	}
	c := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(g.n.cfg.ID),
		Address: raft.ServerAddress(g.n.raftAdvertise)}}}
	if err := g.raft.BootstrapCluster(c).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap shard %d: %w", g.id, err)
	}
	return nil
}

// exec is the executor of this group's membership plans (execute.go): its
// raft, and identity checks that ask about this group.
func (g *group) exec() membershipExec {
	return membershipExec{
		r:       g.raft,
		verify:  g.verify,
		tell:    func(string) {},
		forget:  func(string) {},
		warn:    g.n.warnEvery,
		log:     g.log,
		timeout: 5 * time.Second,
	}
}

// view is what this group's leader observes for planGroup: its
// configuration, the replicas wanted, how far each replica has applied (its
// node's last report) and which nodes may take leadership (liveness).
func (g *group) view(want []string, leader string, live map[string]nodeLiveness, tab map[string]received) (groupView, error) {
	servers, err := latestServers(g.raft)
	if err != nil {
		return groupView{}, err
	}
	v := groupView{Self: g.n.cfg.ID, Servers: servers, Want: want, Leader: leader, Raft: map[string]string{},
		Applied: map[string]uint64{}, Commit: g.raft.CommitIndex(), Away: map[string]bool{}}
	for _, m := range g.n.members() {
		if m.state == memberlist.StateAlive && m.Raft != "" {
			v.Raft[m.ID] = m.Raft
		}
	}
	for id, l := range live {
		if id != v.Self && l.State != liveAlive {
			v.Away[id] = true
		}
	}
	for _, s := range servers {
		id := string(s.ID)
		if id == v.Self {
			continue
		}
		if rc, ok := tab[id]; ok {
			if gr, ok := rc.r.group(g.id); ok {
				v.Applied[id] = gr.Applied
			}
		}
	}
	return v, nil
}

// nudgeUsers, on group 0's leader once it has applied a change to the users,
// tells every follower the commit index at once rather than at the next
// append (up to CommitTimeout later): each node enforces a revoked right or
// a deleted user when it applies the change, so it should learn of it as
// soon as the client that made it hears the answer.
func (g *group) nudgeUsers() {
	select {
	case <-g.raftUp:
	default:
		return // restoring at start: nobody to tell
	}
	if g.trans == nil || !g.IsLeader() {
		return
	}
	g.trans.nudge(g.raft.CommitIndex())
}
