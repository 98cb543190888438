package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// The node's lifecycle is the store's: stopping and leaving act on every
// group it hosts, not on one (cluster/DESIGN.md, "The store").

// Shutdown stops the node cleanly. Unless the node is configured to leave on
// terminate, it stays a member of every group: it tells its peers it is
// stopping (so that no group hands leadership back to it), hands over the
// leadership of every group it leads, all at once, and closes them. A restart
// on the same data directory rejoins as the same member.
func (n *Node) Shutdown(ctx context.Context) error {
	start := time.Now()
	if n.cfg.LeaveOnTerminate {
		if err := n.Leave(ctx); err != nil {
			n.log.Warn("leave on terminate", "err", err)
		}
	} else {
		n.stopping.Store(true)
		n.pushReportNow(ctx)
		n.handOverAll(ctx, "shutdown")
	}
	handed := time.Since(start)
	err := n.closeAll()
	n.log.Info("stopped", "handed_over_after", handed.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return err
}

// handOverAll hands the leadership of every group this node leads to another
// voter of it, in parallel, and returns once each is done or ctx ends.
func (n *Node) handOverAll(ctx context.Context, why string) {
	live := n.liveness()
	var wg sync.WaitGroup
	for _, g := range n.openGroups() {
		if g.raft == nil || !g.IsLeader() || !g.canHandOver(live) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.handOver(ctx); err != nil {
				g.log.Warn("leadership transfer", "why", why, "err", err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// canHandOver reports whether another voter of the group is alive to take
// its leadership: a transfer to a dead one only waits out its timeout.
func (g *group) canHandOver(live map[string]nodeLiveness) bool {
	servers, err := latestServers(g.raft)
	if err != nil {
		return false
	}
	for _, s := range servers {
		id := string(s.ID)
		if s.Suffrage == raft.Voter && id != g.n.cfg.ID && live[id].State == liveAlive {
			return true
		}
	}
	return false
}

// handOver transfers the group's leadership to its most caught-up other
// voter (raft picks it) and waits for raft to say it is done.
func (g *group) handOver(ctx context.Context) error {
	f := g.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- g.await(f) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeAll stops the node's loops and closes every group (in parallel: a
// group's raft may take a moment to stop), the Raft port and the peer
// connections.
func (n *Node) closeAll() error {
	var errs []error
	n.stopOnce.Do(func() { close(n.stop) })
	// The node's loops first: one may be in the middle of a gossip update or
	// a raft call, which ends at once while gossip and the groups are up (a
	// gossip update sent after gossip shut down waits out its timeout).
	n.wg.Wait()
	if n.ml != nil {
		// Shutdown, not Leave: the others see this node fail, not depart, and keep
		// it in the configuration.
		errs = append(errs, n.ml.Shutdown())
	}
	groups := n.groups.takeAll()
	if n.meta != nil && !containsGroup(groups, n.meta) {
		groups = append(groups, n.meta) // New failed before it was open
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.close(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n.engine != nil && !n.engineInUse.Load() {
		n.engineOnce.Do(func() { errs = append(errs, n.engine.Close()) })
	}
	if n.mux != nil {
		errs = append(errs, n.mux.close())
	}
	n.peersMu.Lock()
	for _, p := range n.peers {
		p.close()
	}
	n.peersMu.Unlock()
	return errors.Join(errs...)
}

func containsGroup(gs []*group, g *group) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// closing reports whether the node has begun to stop.
func (n *Node) closing() bool {
	select {
	case <-n.stop:
		return true
	default:
		return false
	}
}

// closeTimeout bounds how long closing a group waits for its raft to stop
// after its connections were cut; a raft still not stopped is left behind
// (the process is about to end) rather than keep the node from stopping.
const closeTimeout = 5 * time.Second

// TakeSnapshot has raft snapshot every group of this node now and compact its
// log, as each does by itself every --snapshot-threshold entries. The answer
// is group 0's snapshot (the one shard's, on a cluster of one group), with the
// size of all of them; a group with nothing new since its last snapshot is
// passed over, and ErrNothingToSnapshot comes back only when every group had
// nothing new.
func (n *Node) TakeSnapshot() (SnapshotInfo, error) {
	var out SnapshotInfo
	took := false
	for _, g := range n.openGroups() {
		s, err := g.TakeSnapshot()
		if errors.Is(err, ErrNothingToSnapshot) {
			continue
		}
		if err != nil {
			if g == n.meta {
				return SnapshotInfo{}, err
			}
			return SnapshotInfo{}, fmt.Errorf("shard group %d: %w", g.id, err)
		}
		if !took || g == n.meta {
			out.ID, out.Index, out.Term = s.ID, s.Index, s.Term
		}
		out.Size += s.Size
		took = true
	}
	if !took {
		return SnapshotInfo{}, ErrNothingToSnapshot
	}
	return out, nil
}

// Leave removes this node from the cluster for good, from every group it
// holds and from the map, and only then from gossip; the node should shut
// down afterwards. In order:
//
//  1. it tells every peer it is leaving (no group adds it back or hands it
//     leadership);
//  2. on a sharded cluster, it has the controller drain it, and waits while
//     the drain makes progress (until the map places nothing on it, or no
//     node can take what is left, or a third of ctx's time is left): each
//     shard gets its replica back on another node first;
//  3. it hands over the leadership of every group it leads;
//  4. it has each group's leader remove it, shards first, group 0 last;
//  5. it records that it left, and leaves gossip.
func (n *Node) Leave(ctx context.Context) error {
	// Set for good once the node has left: the removal it asks for is no news.
	n.heal.leaving.Store(true)
	n.pushReportNow(ctx)
	// Announce the departure first, so that no leader adds this node back
	// between its removal and its leaving gossip (reconcile skips members
	// that are leaving).
	n.announceLeaving(true)
	undo := func(err error) error {
		n.heal.leaving.Store(false)
		n.announceLeaving(false)
		n.kickReport()
		return fmt.Errorf("leave: %w", err)
	}
	if n.clusterMap() != nil {
		n.drainSelf(ctx)
	}
	n.handOverAll(ctx, "leave")
	for _, g := range n.openGroups() {
		if g.id == 0 {
			continue
		}
		gctx, cancel := context.WithTimeout(ctx, shardLeaveTimeout)
		err := g.leave(gctx)
		cancel()
		if err != nil {
			// The shard goes on with one replica fewer; the controller
			// drops this node once it has left and fills the shard again.
			g.log.Warn("leave: could not leave a shard's group", "err", err)
		}
	}
	for {
		err := n.meta.leave(ctx)
		if err == nil {
			break
		}
		n.log.Warn("leave: removal not yet confirmed", "err", err)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return undo(ctx.Err())
		}
	}
	// Remembered, so that started again on this data directory the node says
	// it left rather than waiting for a leader that no longer talks to it.
	if err := n.heal.book.update(func(m *membersFile) { m.Left = true }); err != nil {
		n.log.Warn("record the leave", "err", err)
	}
	// Announced again before leaving gossip, so the others record this node
	// as left rather than failed.
	n.announceLeaving(true)
	n.pushReportNow(ctx)
	if err := n.ml.Leave(2 * time.Second); err != nil {
		n.log.Warn("leave gossip", "err", err)
	}
	n.leftOnce.Do(func() { close(n.left) })
	n.log.Info("left the cluster")
	return nil
}

// drainSelf has the controller move every replica off this node, and waits
// while that makes progress: until the map places nothing here, or the map
// has not changed for drainStall (no node can take what is left), or only a
// third of ctx's time remains (for the removals that follow).
func (n *Node) drainSelf(ctx context.Context) {
	until := time.Now().Add(time.Minute)
	if dl, ok := ctx.Deadline(); ok {
		until = time.Now().Add(time.Until(dl) * 2 / 3)
	}
	asked := false
	lastVer, lastChange := uint64(0), time.Now()
	for time.Now().Before(until) && ctx.Err() == nil {
		m := n.clusterMap()
		if !asked {
			asked = n.askDrain(ctx) == nil
		}
		if asked && !placesAny(m, n.cfg.ID) {
			n.log.Info("leave: the map places no replica here any more")
			return
		}
		if m.Version != lastVer {
			lastVer, lastChange = m.Version, time.Now()
		} else if asked && time.Since(lastChange) > drainStall {
			n.log.Warn("leave: the drain stopped making progress (no node can take this node's replicas); leaving them",
				"shards", shardsOn(m, n.cfg.ID))
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	n.log.Warn("leave: the drain did not finish in time; leaving the replicas still here", "shards", shardsOn(n.clusterMap(), n.cfg.ID))
}

// shardLeaveTimeout bounds how long a leaving node tries to leave one shard's
// group (a shard without a leader is left as it is).
const shardLeaveTimeout = 3 * time.Second

// drainStall is how long a drain may go without a new map before a leaving
// node stops waiting for it.
const drainStall = 5 * time.Second

// askDrain asks group 0's leader (this node, or over the Raft port) to drain
// this node.
func (n *Node) askDrain(ctx context.Context) error {
	if n.meta.IsLeader() {
		return n.Drain(ctx, n.cfg.ID, false)
	}
	id, addr := n.meta.Leader()
	if addr == "" {
		return ErrNoLeader
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	_, err := n.peer(id, addr).call(cctx, opDrainSelf, []byte(n.cfg.ID))
	return err
}

// placesAny reports whether map m places a replica of any shard on node id.
func placesAny(m *fsm.Map, id string) bool { return len(shardsOn(m, id)) > 0 }

// shardsOn lists the shards map m places on node id.
func shardsOn(m *fsm.Map, id string) []int {
	var out []int
	for s, g := range m.Groups {
		if slices.Contains(g.Replicas, id) {
			out = append(out, s)
		}
	}
	return out
}

// leave has the group's leader remove this node from the group's
// configuration (a leader hands leadership over first). The last voter of a
// group cannot leave it.
func (g *group) leave(ctx context.Context) error {
	self := g.n.cfg.ID
	if g.IsLeader() {
		if g.voters() <= 1 {
			if g.id == 0 {
				return errors.New("the last voter cannot leave")
			}
			return fmt.Errorf("shard group %d: this node is its last voter", g.id)
		}
		if err := g.handOver(ctx); err != nil {
			return err
		}
	}
	for {
		id, addr := g.Leader()
		if addr != "" {
			cctx, cancel := context.WithTimeout(ctx, g.n.cfg.ApplyTimeout)
			_, err := g.call(cctx, id, addr, opRemove, []byte(self))
			cancel()
			if err == nil || g.id == 0 {
				return err
			}
		}
		if g.id == 0 {
			return ErrNoLeader
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%w (no leader of shard group %d removed this node)", ctx.Err(), g.id)
		}
	}
}
