package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Faults the nemesis knows.
const (
	faultKill  = "kill"  // SIGKILL a node, restart it on its data
	faultPause = "pause" // SIGSTOP a node (a long GC pause, a frozen VM), then SIGCONT
	faultTerm  = "term"  // SIGTERM a node (a clean restart), restart it
	// faultPartition cuts a node's Raft links with every other node, both ways,
	// while it keeps running and serving the clients connected to it; the
	// nodes run with --fault-injection.
	faultPartition = "partition"
	// faultStaleLeader pauses the leader long enough for another to be elected
	// and take writes, sends it reads of those writes on connections it
	// already had, and resumes it: it must not answer from its old state.
	faultStaleLeader = "stale-leader"
	// faultClients breaks client connections as requests go out (not Raft
	// links): writes are retried with outcomes the clients cannot know.
	faultClients = "clients"
	// faultMembership removes a follower from the cluster, wipes its data and
	// adds it back under a new id, which catches up by a snapshot install.
	faultMembership = "membership"
	// faultMix injects two of kill, pause, partition and clients at once, on
	// two different nodes.
	faultMix = "mix"
	// faultMove (sharded only): a sixth node joins and the cluster moves
	// replicas onto it while writes go on; then one of the five is drained,
	// removed and wiped, and the new node takes its place: every replica of
	// the leaving node moves.
	faultMove = "move"
	// faultDrain (sharded only): `rookery node drain ID`, until the node holds
	// no replica; then `rookery node drain --undo ID`, until it holds its
	// share again. The cluster stays at its size throughout.
	faultDrain = "drain"
)

// allFaults is every fault, in the order -faults lists them.
var allFaults = []string{faultKill, faultPause, faultTerm, faultPartition, faultStaleLeader, faultClients,
	faultMembership, faultMix, faultMove, faultDrain}

// shardedOnly are the faults that need a sharded cluster (-shards > 1).
var shardedOnly = []string{faultMove, faultDrain}

// defaultFaults is every fault a cluster of shards shards can take.
func defaultFaults(shards int) []string {
	if shards > 1 {
		return allFaults
	}
	return slices.DeleteFunc(slices.Clone(allFaults), func(f string) bool { return slices.Contains(shardedOnly, f) })
}

// topology is the cluster as the run sees it: a membership change replaces a
// node in its slot while readers look up their slot's address.
type topology struct {
	mu      sync.Mutex
	cl      *nodeproc.Cluster
	nextID  int
	sharded bool
}

func (t *topology) addr(slot int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cl.Nodes[slot].RESP
}

func (t *topology) id(slot int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cl.Nodes[slot].ID
}

func (t *topology) nodes() []*nodeproc.Member {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.cl.Nodes)
}

func (t *topology) slot(m *nodeproc.Member) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Index(t.cl.Nodes, m)
}

// nemesis injects faults into the cluster until ctx ends, each healed before
// the next. Its choices (which fault, on the leader or another node, which
// node) come from a seeded source, so a seed replays the same schedule.
type nemesis struct {
	topo     *topology
	bin      string // the rookery binary, for its operator commands
	faults   []string
	interval time.Duration // between faults
	hold     time.Duration // how long a fault lasts
	rng      *rand.Rand
	log      func(format string, args ...any)
	h        *history
	logs     *nodeLogs // keeps a node's log across its restarts
	cut      *cutter
	nc       nodeConn
	acked    *recent
	n        *counts
	probes   int
	injected int
	events   []faultEvent
	slow     []slowStop
	mu       sync.Mutex
}

// slowStop is a node that did not exit in time after SIGTERM, with its log
// and the stacks SIGQUIT made it print.
type slowStop struct {
	Node string
	At   int64 // ns since the run began
	Log  string
}

// faultEvent is one fault as the summary reports it: times are ns since the
// run began, from just before the fault to its healing.
type faultEvent struct {
	Kind   string `json:"kind"`
	Node   string `json:"node"`
	Leader bool   `json:"leader"` // the node led the cluster (sharded: a shard) just before the fault
	Start  int64  `json:"start_ns"`
	End    int64  `json:"end_ns"`
	Err    string `json:"error,omitempty"`
}

func (n *nemesis) run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(n.interval):
		}
		fault := n.faults[n.rng.IntN(len(n.faults))]
		wantLeader := n.rng.IntN(2) == 0
		pick := n.rng.Uint64()
		var err error
		if fault == faultMix {
			kinds := []string{faultKill, faultPause, faultPartition, faultClients}
			a, b := kinds[n.rng.IntN(len(kinds))], kinds[n.rng.IntN(len(kinds))]
			other := n.rng.Uint64()
			victim, leader := n.pick(wantLeader, pick, nil)
			second, _ := n.pick(false, other, victim)
			var wg sync.WaitGroup
			var errA, errB error
			wg.Add(2)
			go func() { defer wg.Done(); errA = n.one(a, victim, leader) }()
			go func() { defer wg.Done(); errB = n.one(b, second, false) }()
			wg.Wait()
			err = firstErr(errA, errB)
			n.healAll()
		} else {
			var victim *nodeproc.Member
			var leader bool
			switch {
			case n.topo.sharded && fault == faultStaleLeader:
				victim, leader = n.shardLeaderOf(bloomKey, pick)
			case n.topo.sharded && (fault == faultMembership || fault == faultMove):
				// Any node but the map group's leader, which removes it.
				l, _ := n.leader(2 * time.Second)
				victim, leader = n.pick(wantLeader, pick, l)
			default:
				victim, leader = n.pick(wantLeader || fault == faultStaleLeader, pick, nil)
				if fault == faultMembership && leader {
					victim, leader = n.pick(false, pick, victim)
				}
			}
			err = n.one(fault, victim, leader)
			if fault == faultPartition {
				n.healAll()
			}
		}
		if err != nil {
			return err
		}
	}
}

// healAll restores every node's Raft links, once each node is running again:
// a partition's peers may have been down when it healed.
func (n *nemesis) healAll() {
	for _, o := range n.topo.nodes() {
		var err error
		for range 3 {
			if err = o.Heal(); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			n.log("nemesis: could not heal %s: %v", o.ID, err)
		}
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// one injects fault into m and records it.
func (n *nemesis) one(fault string, m *nodeproc.Member, leader bool) error {
	ev := faultEvent{Kind: fault, Node: m.ID, Leader: leader, Start: n.h.now()}
	err := n.inject(fault, m)
	ev.End = n.h.now()
	if err != nil {
		ev.Err = err.Error()
	}
	n.mu.Lock()
	n.events = append(n.events, ev)
	if err == nil {
		n.injected++
	}
	n.mu.Unlock()
	return err
}

// pick chooses the leader if wanted and there is one, else the node pick
// selects among the others than not; it says whether the node leads. In a
// sharded cluster the leaders are the nodes that lead a shard, and pick
// selects among them.
func (n *nemesis) pick(wantLeader bool, pick uint64, not *nodeproc.Member) (*nodeproc.Member, bool) {
	if n.topo.sharded {
		return n.pickSharded(wantLeader, pick, not)
	}
	l, _ := n.leader(2 * time.Second)
	if wantLeader && l != nil && l != not {
		return l, true
	}
	var cands []*nodeproc.Member
	for _, m := range n.topo.nodes() {
		if m != not && (m != l || wantLeader) {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		cands = n.topo.nodes()
	}
	m := cands[pick%uint64(len(cands))]
	return m, m == l
}

// pickSharded is pick over shard leaders.
func (n *nemesis) pickSharded(wantLeader bool, pick uint64, not *nodeproc.Member) (*nodeproc.Member, bool) {
	nodes := n.topo.nodes()
	var leaders []string
	if sm, err := anyShards(nodes); err == nil {
		leaders = sm.leaders()
	}
	var cands []*nodeproc.Member
	for _, m := range nodes {
		if m != not && slices.Contains(leaders, m.ID) == wantLeader {
			cands = append(cands, m)
		}
	}
	if len(cands) == 0 {
		for _, m := range nodes {
			if m != not {
				cands = append(cands, m)
			}
		}
	}
	m := cands[pick%uint64(len(cands))]
	return m, slices.Contains(leaders, m.ID)
}

// shardLeaderOf is the node leading key's shard, or, with none known, the
// node pick selects.
func (n *nemesis) shardLeaderOf(key string, pick uint64) (*nodeproc.Member, bool) {
	nodes := n.topo.nodes()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		sm, err := anyShards(nodes)
		if err != nil {
			continue
		}
		if id := sm.leaderOf(key); id != "" {
			for _, m := range nodes {
				if m.ID == id {
					return m, true
				}
			}
		}
	}
	return nodes[pick%uint64(len(nodes))], false
}

func (n *nemesis) leader(within time.Duration) (*nodeproc.Member, error) {
	n.topo.mu.Lock()
	defer n.topo.mu.Unlock()
	return n.topo.cl.Leader(within)
}

func (n *nemesis) inject(fault string, m *nodeproc.Member) error {
	n.log("nemesis: %s %s", fault, m.ID)
	switch fault {
	case faultKill:
		m.Kill()
		time.Sleep(n.hold)
		return n.restart(m)
	case faultTerm:
		if err := m.Stop(syscall.SIGTERM, 20*time.Second); err != nil {
			n.log("nemesis: %s after SIGTERM: %v", m.ID, err)
			n.slowStop(m)
		}
		time.Sleep(n.hold)
		return n.restart(m)
	case faultPartition:
		for _, o := range n.topo.nodes() {
			if o == m {
				continue
			}
			if err := m.Cut(o.Raft); err != nil {
				return err
			}
			// A peer that another fault has killed or paused cannot take
			// the cut, and cannot talk to m anyway.
			if err := o.Cut(m.Raft); err != nil {
				n.log("nemesis: %s could not cut its link to %s: %v", o.ID, m.ID, err)
			}
		}
		time.Sleep(n.hold)
		if err := m.Heal(); err != nil {
			return err
		}
		n.log("nemesis: healed %s", m.ID)
		return nil
	case faultPause:
		if err := m.Pause(); err != nil {
			return err
		}
		time.Sleep(n.hold)
		if err := m.Resume(); err != nil {
			return err
		}
		n.log("nemesis: resumed %s", m.ID)
		return nil
	case faultStaleLeader:
		return n.staleLeader(m)
	case faultClients:
		n.cut.on.Store(true)
		time.Sleep(n.hold)
		n.cut.on.Store(false)
		n.log("nemesis: client connections whole again")
		return nil
	case faultMembership:
		if n.topo.sharded {
			// Its replicas move off first: a node removed with replicas
			// on it would leave them placed on a node that is gone.
			if err := n.drain(m, false); err != nil {
				return err
			}
		}
		return n.replace(m)
	case faultMove:
		return n.move(m)
	case faultDrain:
		if err := n.drain(m, false); err != nil {
			return err
		}
		return n.drain(m, true)
	}
	return fmt.Errorf("unknown fault %q", fault)
}

// staleLeader pauses m (the leader, or whoever was picked), waits until
// another node leads and writes have been acknowledged, sends m reads of those
// writes on connections opened before the pause, and resumes it.
func (n *nemesis) staleLeader(m *nodeproc.Member) error {
	slot := n.topo.slot(m)
	const reads = 32
	conns := n.nc.open(slot, false, 15*time.Second, reads)
	defer conns.Close()
	if err := warm(conns, reads); err != nil {
		n.log("nemesis: %s: could not open connections to it: %v", m.ID, err)
	}
	if err := m.Pause(); err != nil {
		return err
	}
	paused := n.h.now()
	deadline := time.Now().Add(max(n.hold, 3*time.Second) + 5*time.Second)
	var items []ackedItem
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		// Acknowledged after the pause began, so by another leader.
		if items = n.acked.since(bloomKey, paused); len(items) >= reads {
			break
		}
	}
	if len(items) > reads {
		items = items[len(items)-reads:]
	}
	n.mu.Lock()
	first := n.probes
	n.probes += len(items)
	n.mu.Unlock()
	wait := probeWith(conns, n.h, items, n.n, first)
	time.Sleep(100 * time.Millisecond) // the requests wait in the paused node's sockets
	if err := m.Resume(); err != nil {
		return err
	}
	n.log("nemesis: resumed %s with %d reads of writes made while it was paused", m.ID, len(items))
	wait()
	return nil
}

// replace removes m from the cluster, wipes it and adds a node under a new id
// in its place.
func (n *nemesis) replace(m *nodeproc.Member) error {
	m.Kill()
	n.logs.save(m)
	if !n.removePeer(m) {
		// The cluster could not take the change: bring the node back as it was.
		n.log("nemesis: could not remove %s; restarting it", m.ID)
		return n.restart(m)
	}
	n.topo.mu.Lock()
	n.topo.nextID++
	id := fmt.Sprintf("n%d", n.topo.nextID)
	nm, err := n.topo.cl.Replace(m, id)
	n.topo.mu.Unlock()
	if err != nil {
		return fmt.Errorf("replace %s with %s: %w", m.ID, id, err)
	}
	if err := os.RemoveAll(m.Dir); err != nil {
		return err
	}
	n.log("nemesis: removed and wiped %s, added %s", m.ID, id)
	if err := nm.WaitReady(60 * time.Second); err != nil {
		return fmt.Errorf("%s did not become ready: %w", id, err)
	}
	if err := n.waitVoter(id); err != nil {
		return err
	}
	n.settle()
	return nil
}

// removePeer removes the stopped node m from the (map group's) Raft
// configuration, through whichever node leads it; false if it could not.
func (n *nemesis) removePeer(m *nodeproc.Member) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		l, err := n.leader(2 * time.Second)
		if err != nil || l == m {
			continue
		}
		resp, err := l.HTTPDo(http.MethodPost, "/v1/raft/remove-peer?id="+m.ID)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}

// waitVoter waits until the leader counts node id among its voters.
func (n *nemesis) waitVoter(id string) error {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		l, err := n.leader(2 * time.Second)
		if err != nil {
			continue
		}
		if v, err := l.Voters(); err == nil && slices.Contains(v, id) {
			n.log("nemesis: %s votes", id)
			return nil
		}
	}
	return fmt.Errorf("%s never became a voter", id)
}

// settleWithin bounds how long the nemesis waits for a sharded cluster to
// finish moving replicas after a membership change or a drain.
const settleWithin = 2 * time.Minute

// settle waits, in a sharded cluster, until the controller has nothing left
// to move (waitSettled), so that one fault's moves are over before the next
// fault; a cluster that does not settle is logged, and the final checks wait
// for it again.
func (n *nemesis) settle() {
	if !n.topo.sharded {
		return
	}
	start := time.Now()
	sm, err := waitSettled(n.topo.nodes(), shardReplicas, settleWithin)
	if err != nil {
		n.log("nemesis: %v", err)
		return
	}
	n.log("nemesis: shards settled in %v: %v", time.Since(start).Round(time.Millisecond), placement(sm))
}

// drain runs `rookery node drain ID` (undo: --undo) against the cluster and
// waits until m holds no replica (undo: until the cluster has moved its
// share back to it and settled).
func (n *nemesis) drain(m *nodeproc.Member, undo bool) error {
	if err := n.drainCommand(m.ID, undo); err != nil {
		return err
	}
	if undo {
		n.log("nemesis: %s may hold replicas again", m.ID)
		n.settle()
		return nil
	}
	n.log("nemesis: draining %s", m.ID)
	var last string
	for deadline := time.Now().Add(settleWithin); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		st, err := m.Status()
		if err != nil {
			last = err.Error()
			continue
		}
		sm, err := anyShards(n.topo.nodes())
		if err != nil {
			last = err.Error()
			continue
		}
		if len(st.Shards) == 0 && sm.holds()[m.ID] == 0 {
			n.log("nemesis: %s holds no replica", m.ID)
			return nil
		}
		last = fmt.Sprintf("%s holds %d replicas, the map places %d there", m.ID, len(st.Shards), sm.holds()[m.ID])
	}
	return fmt.Errorf("drain of %s not done within %v: %s", m.ID, settleWithin, last)
}

// drainCommand runs the operator's command, trying every running node.
func (n *nemesis) drainCommand(id string, undo bool) error {
	var addrs []string
	for _, o := range n.topo.nodes() {
		if o.Alive() {
			addrs = append(addrs, o.HTTP)
		}
	}
	args := []string{"node", "drain"}
	if undo {
		args = append(args, "--undo")
	}
	args = append(args, "--addr", strings.Join(addrs, ","))
	sec := n.topo.cl.Sec
	if sec.HTTPTLS {
		args = append(args, "--cacert", filepath.Join(sec.CertDir, "ca.pem"))
	}
	if sec.Password != "" {
		args = append(args, "--password", sec.Password)
	}
	args = append(args, id)
	var err error
	var out []byte
	for range 5 {
		cmd := exec.Command(n.bin, args...)
		if out, err = cmd.CombinedOutput(); err == nil {
			return nil
		}
		time.Sleep(time.Second) // no leader of the map group for a moment
	}
	return fmt.Errorf("rookery %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
}

// move has a new node join while writes go on and waits until the cluster
// has moved replicas onto it; then drains m, removes it, wipes it, and
// leaves the new node in m's place.
func (n *nemesis) move(m *nodeproc.Member) error {
	n.topo.mu.Lock()
	n.topo.nextID++
	id := fmt.Sprintf("n%d", n.topo.nextID)
	nm, err := n.topo.cl.Add(id)
	n.topo.mu.Unlock()
	if err != nil {
		return fmt.Errorf("add %s: %w", id, err)
	}
	n.log("nemesis: %s joins", id)
	if err := nm.WaitReady(60 * time.Second); err != nil {
		return fmt.Errorf("%s did not become ready: %w", id, err)
	}
	n.settle()
	if st, err := nm.Status(); err == nil {
		n.log("nemesis: %s holds %d replicas", id, len(st.Shards))
	}
	if err := n.drain(m, false); err != nil {
		return err
	}
	m.Kill()
	n.logs.save(m)
	if !n.removePeer(m) {
		return fmt.Errorf("could not remove %s after its drain", m.ID)
	}
	n.topo.mu.Lock()
	nodes := n.topo.cl.Nodes
	i := slices.Index(nodes, m)
	nodes[i] = nm
	n.topo.cl.Nodes = nodes[:len(nodes)-1] // nm was appended last
	n.topo.mu.Unlock()
	if err := os.RemoveAll(m.Dir); err != nil {
		return err
	}
	n.log("nemesis: drained, removed and wiped %s; %s takes its place", m.ID, id)
	if err := n.waitVoter(id); err != nil {
		return err
	}
	n.settle()
	return nil
}

// slowStop records a node that did not stop within its time after SIGTERM:
// SIGQUIT makes it print every goroutine's stack before it exits, and its log
// goes into the artifacts whatever the verdict.
func (n *nemesis) slowStop(m *nodeproc.Member) {
	if m.Alive() {
		_ = m.Signal(syscall.SIGQUIT)
		select {
		case <-m.Exited():
		case <-time.After(5 * time.Second):
		}
	}
	n.mu.Lock()
	n.slow = append(n.slow, slowStop{Node: m.ID, At: n.h.now(), Log: m.Logs()})
	n.mu.Unlock()
}

func (n *nemesis) restart(m *nodeproc.Member) error {
	if m.Alive() {
		m.Kill()
	}
	n.logs.save(m)
	if err := m.Restart(); err != nil {
		return fmt.Errorf("restart %s: %w", m.ID, err)
	}
	n.log("nemesis: restarted %s", m.ID)
	return nil
}
