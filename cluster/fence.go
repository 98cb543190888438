package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/atomicfile"
)

// Fencing what a recovery cut off (docs/SHARDING.md, "Failure"). When a
// shard lost its quorum for good, `rookery recover --shard S --peers ...`
// rewrites the configuration on a survivor (RecoverPeers), which then
// commits everything its log held; the replicas it left out may hold entries
// the survivor never had, applied. Such a replica must never vote or serve
// the shard again: its state differs from the shard's with nothing to tell.
//
//  1. RecoverPeers leaves RecoveredFile in the group's directory: who was
//     cut off.
//  2. The survivor, once it runs the group again, asks group 0's leader to
//     record the fence (opFence): the map drops the cut replicas from the
//     shard and lists them in its Fenced, and placement refills the shard on
//     live nodes (controller.go).
//  3. Every node refuses the shard's Raft traffic from a fenced node (the
//     raft guard, stream.go), so it can neither win a vote nor replicate.
//  4. A fenced node that comes back closes its replica, keeps its files, and
//     says so (log, /v1/status: the shard's role is "removed", with what to
//     do). It is never placed on the shard again until its files for it are
//     gone: its reports list the fenced shards it still holds, and the
//     controller lifts a fence once the node reports without it.

// RecoveredFile, in a group's directory, records that RecoverPeers rewrote
// the group's configuration and whom it left out.
const RecoveredFile = "recovered.json"

// recoveryMark is RecoveredFile's content.
type recoveryMark struct {
	Servers []string  `json:"servers"` // the configuration written
	Cut     []string  `json:"cut"`     // servers of the previous one left out
	At      time.Time `json:"at"`
}

// writeRecoveryMark records a rewrite from prev to now in dir.
func writeRecoveryMark(dir string, prev, now []RecoveryPeer) error {
	mk := recoveryMark{At: time.Now().UTC()}
	for _, p := range now {
		mk.Servers = append(mk.Servers, p.ID)
	}
	for _, p := range prev {
		if !slices.Contains(mk.Servers, p.ID) {
			mk.Cut = append(mk.Cut, p.ID)
		}
	}
	b, _ := json.MarshalIndent(mk, "", "  ")
	return atomicfile.Write(filepath.Join(dir, RecoveredFile), b, 0o644)
}

// readRecoveryMark returns dir's mark, nil if it has none.
func readRecoveryMark(dir string) (*recoveryMark, error) {
	b, err := os.ReadFile(filepath.Join(dir, RecoveredFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var mk recoveryMark
	if err := json.Unmarshal(b, &mk); err != nil {
		return nil, fmt.Errorf("%s: %w", RecoveredFile, err)
	}
	return &mk, nil
}

// fenceRequest is opFence's body: group 0's leader records that a recovery
// of group Group kept Servers and cut Cut off.
type fenceRequest struct {
	Group   int      `json:"group"`
	Servers []string `json:"servers"`
	Cut     []string `json:"cut"`
}

// reportRecoveries asks group 0's leader to fence what the recoveries of this
// node's open groups cut off, and forgets each mark once the map has it.
func (n *Node) reportRecoveries(m *fsm.Map) {
	for _, g := range n.openGroups() {
		if g.id == 0 {
			continue
		}
		mk, err := readRecoveryMark(g.dir)
		if err != nil || mk == nil {
			continue
		}
		s := shardOfGroup(m, g.id)
		if s < 0 || s >= m.Shards() {
			continue
		}
		req := fenceRequest{Group: g.id, Servers: mk.Servers, Cut: mk.Cut}
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
		err = n.askFence(ctx, req)
		cancel()
		if err != nil {
			n.warnEvery("fence:"+itoa(g.id), "a recovered shard could not have the replicas its recovery cut off fenced yet", "shard", s, "err", err)
			continue
		}
		n.log.Info("the map fences the replicas a recovery of this shard cut off", "shard", s, "cut", mk.Cut)
		if err := os.Remove(filepath.Join(g.dir, RecoveredFile)); err != nil {
			n.log.Warn("remove the recovery mark", "shard", s, "err", err)
		}
	}
}

// askFence has group 0's leader (this node, or over the Raft port) record req.
func (n *Node) askFence(ctx context.Context, req fenceRequest) error {
	if n.meta.IsLeader() {
		return n.fence(ctx, req)
	}
	id, addr := n.meta.Leader()
	if addr == "" {
		return ErrNoLeader
	}
	body, _ := json.Marshal(req)
	_, err := n.peer(id, addr).call(ctx, opFence, body)
	return err
}

// serveFence answers opFence, on group 0's leader. With peer TLS only a
// server the recovery kept may ask.
func (n *Node) serveFence(ctx context.Context, body []byte, peer string) error {
	var req fenceRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Group < 1 || req.Group > maxGroupID ||
		len(req.Cut) > 64 || len(req.Servers) > maxMapReplicas {
		return errBadFence
	}
	if peer != "" && !slices.Contains(req.Servers, peer) {
		return errNotSelf
	}
	if !n.meta.IsLeader() {
		return ErrNotLeader
	}
	return n.fence(ctx, req)
}

const (
	errBadFence    = rpcError("bad fence request")
	maxMapReplicas = 15
)

// fence records req in the map: the cut replicas leave the shard's replicas
// and join its Fenced. It retries when the controller changed the map
// meanwhile.
func (n *Node) fence(ctx context.Context, req fenceRequest) error {
	for {
		m := n.clusterMap()
		if m == nil {
			return ErrNotSharded
		}
		s := shardOfGroup(m, req.Group)
		if s < 0 || s >= m.Shards() {
			return fmt.Errorf("%w: group %d", ErrNotHosted, req.Group)
		}
		next := m.Clone()
		g := &next.Groups[s]
		changed := false
		for _, id := range req.Cut {
			if id == "" || slices.Contains(req.Servers, id) {
				continue
			}
			if i := slices.Index(g.Replicas, id); i >= 0 {
				g.Replicas = slices.Delete(g.Replicas, i, i+1)
				changed = true
			}
			if !slices.Contains(g.Fenced, id) {
				g.Fenced = append(g.Fenced, id)
				changed = true
			}
		}
		if !changed {
			return nil
		}
		slices.Sort(g.Fenced)
		if !slices.Contains(g.Replicas, g.Leader) {
			g.Leader = ""
		}
		next.Version = m.Version + 1
		err := n.proposeMap(next)
		if err == nil {
			n.log.Warn("fenced the replicas a recovery cut off a shard: they serve nothing of it until their files for it are gone",
				"shard", s, "fenced", g.Fenced, "replicas", g.Replicas)
			n.kickShards()
			return nil
		}
		if !errors.Is(err, fsm.ErrStaleMap) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// fencedFor says, for group gid, which senders the map fences off it (nil:
// none). The Raft port's guard asks it of every Raft connection.
func (n *Node) fencedFor(gid int) func(id string) bool {
	m := n.clusterMap()
	if m == nil || gid == 0 {
		return nil
	}
	s := shardOfGroup(m, gid)
	if s < 0 || s >= m.Shards() || len(m.Groups[s].Fenced) == 0 {
		return nil
	}
	fenced := m.Groups[s].Fenced
	return func(id string) bool { return slices.Contains(fenced, id) }
}

// fencedGroups lists the groups map m fences this node off that it still
// holds files of (its report says so: the fence stays until they are gone).
func (n *Node) fencedGroups(m *fsm.Map) []int {
	if m == nil {
		return nil
	}
	var out []int
	for s, g := range m.Groups {
		if !slices.Contains(g.Fenced, n.cfg.ID) {
			continue
		}
		if _, err := os.Stat(ShardDir(n.cfg.DataDir, s)); err == nil {
			out = append(out, groupOf(m, s))
		}
	}
	return out
}

// fenceAdvice says what to do about this node's replica of shard s that a
// recovery of the shard cut off.
func (n *Node) fenceAdvice(s int) string {
	return fmt.Sprintf("a recovery of shard %d left this node's replica out; its files in %s may hold writes the shard lacks: "+
		"copy what you need, then remove that directory, and the cluster may place a fresh replica here",
		s, ShardDir(n.cfg.DataDir, s))
}

// liftFences drops from each shard's Fenced the nodes that left the cluster
// and those that report holding no files of the shard any more (pure: a step
// of planMap).
func liftFences(next *fsm.Map, live map[string]nodeLiveness, holding map[string][]int) bool {
	changed := false
	for s := range next.Groups {
		g := &next.Groups[s]
		kept := g.Fenced[:0:0]
		for _, id := range g.Fenced {
			held, reported := holding[id]
			if live[id].State == liveLeft || reported && !slices.Contains(held, groupOf(next, s)) {
				changed = true
				continue
			}
			kept = append(kept, id)
		}
		if len(kept) != len(g.Fenced) {
			g.Fenced = kept
			if len(g.Fenced) == 0 {
				g.Fenced = nil
			}
		}
	}
	return changed
}

// mapCheckFor bounds how long a node that started with a map on disk waits
// to hear the cluster's newest map before it opens its shard groups.
const mapCheckFor = 5 * time.Second

// mapCurrent reports whether this node may act on its map: it has heard from
// a live member and holds a map at least as new as every live member gossips
// (the map on disk may be older than a fence that keeps this node off a
// shard), or it has waited mapCheckFor. Once true, it stays true.
func (n *Node) mapCurrent() bool {
	if n.mapChecked.Load() {
		return true
	}
	cur := n.clusterMap()
	heard, behind := false, false
	for _, mb := range n.members() {
		if mb.ID == n.cfg.ID || mb.state != memberlist.StateAlive {
			continue
		}
		heard = true
		if cur == nil || mb.MapVer > cur.Version {
			behind = true
		}
	}
	if heard && !behind || time.Since(n.started) > mapCheckFor || n.keptMapAtStart == 0 {
		n.mapChecked.Store(true)
		return true
	}
	return false
}

// onceSet runs a function once per key.
type onceSet struct {
	mu   sync.Mutex
	done map[int]bool
}

// Do runs f unless it ran for key before.
func (o *onceSet) Do(key int, f func()) {
	o.mu.Lock()
	if o.done == nil {
		o.done = map[int]bool{}
	}
	first := !o.done[key]
	o.done[key] = true
	o.mu.Unlock()
	if first {
		f()
	}
}
