package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/atomicfile"
	"github.com/rookerydb/rookery/internal/slot"
)

// MapFile, in the data directory, keeps the last cluster map this node
// held, so that it routes keys at once after a restart, before it hears from
// anyone (docs/SHARDING.md, "The cluster map").
const MapFile = "map.bin"

// mapGroupVoters caps the voters of a sharded cluster's group 0: every node
// holds the map (as a non-voter beyond the first five), but a change of map
// waits for three acknowledgements, not for half of thirty nodes, and the
// leader's heartbeats that count go to four followers (docs/SHARDING.md).
const mapGroupVoters = 5

// clusterMap is the newest map this node holds, nil before there is one (a
// cluster of one group, as before shards).
func (n *Node) clusterMap() *fsm.Map { return n.cmap.Load() }

// adoptMap keeps m if it is newer than the map this node holds and wakes the
// shard loop, which writes it to MapFile and gossips its version (keepMap).
// A map never goes back to an older version. It may run on group 0's apply
// goroutine, so it does no I/O itself.
func (n *Node) adoptMap(m *fsm.Map, from string) bool {
	if m == nil || m.Check() != nil {
		return false
	}
	for {
		cur := n.cmap.Load()
		if cur != nil && cur.Version >= m.Version {
			return false
		}
		if n.cmap.CompareAndSwap(cur, m) {
			break
		}
	}
	n.log.Info("cluster map", "version", m.Version, "shards", m.Shards(), "replicas", m.Replicas, "from", from)
	n.kickShards()
	return true
}

// keepMap writes the map to MapFile and gossips its version, once per
// version (the shard loop calls it).
func (n *Node) keepMap(m *fsm.Map) {
	if m.Version <= n.keptMap {
		return
	}
	if err := atomicfile.Write(filepath.Join(n.cfg.DataDir, MapFile), fsm.EncodeMap(m), 0o644); err != nil {
		n.warnEvery("map-file", "cannot keep the cluster map on disk", "err", err)
		return
	}
	n.keptMap = m.Version
	if n.ml != nil && n.delegate != nil {
		n.regossip()
	}
}

// loadMap reads MapFile, if the node kept one.
func (n *Node) loadMap() error {
	b, err := os.ReadFile(filepath.Join(n.cfg.DataDir, MapFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the cluster map: %w", err)
	}
	m, err := fsm.DecodeMap(b)
	if err != nil {
		// Only a copy: the map is in group 0 and on every other node.
		n.log.Warn("the kept cluster map is damaged; waiting for a copy from the cluster", "err", err)
		return nil
	}
	n.cmap.Store(m)
	n.keptMap, n.keptMapAtStart = m.Version, m.Version
	return nil
}

// maybeFetchMap fetches the map from a member that gossips a newer version.
func (n *Node) maybeFetchMap(md meta) {
	cur := n.clusterMap()
	if md.MapVer == 0 || cur != nil && cur.Version >= md.MapVer || md.Raft == "" || md.ID == n.cfg.ID {
		return
	}
	if !n.fetching.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.fetching.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		body, err := n.peer(md.ID, md.Raft).call(ctx, opMap, nil)
		if err != nil || len(body) == 0 {
			n.log.Debug("fetch the cluster map", "from", md.ID, "err", err)
			return
		}
		m, err := fsm.DecodeMap(body)
		if err != nil {
			n.warnEvery("map-fetch:"+md.ID, "a member sent a cluster map that does not decode", "from", md.ID, "err", err)
			return
		}
		n.adoptMap(m, md.ID)
	}()
}

// shardOf is the shard that owns key under map m (0 without a map).
func shardOf(m *fsm.Map, key string) int {
	if m == nil || m.Shards() == 1 {
		return 0
	}
	return max(m.ShardOf(slot.OfString(key)), 0)
}

// ShardOf is the shard of key under the cluster map this node holds (0
// before there is one).
func (n *Node) ShardOf(key string) int { return shardOf(n.clusterMap(), key) }

// leads lists the groups this node leads now.
func (n *Node) leads() []int {
	var out []int
	for _, g := range n.openGroups() {
		if g.raft != nil && g.IsLeader() {
			out = append(out, g.id)
		}
	}
	return out
}

// leadershipChanged wakes the shard loop, which gossips which groups this
// node leads now (others route to a shard's leader by it).
func (n *Node) leadershipChanged() {
	n.kickShards()
	n.kickReport()
}

// gossipLeads gossips the groups this node leads when they changed (the
// shard loop calls it).
func (n *Node) gossipLeads() {
	if l := n.leads(); !slices.Equal(l, n.gossipedLeads) {
		n.gossipedLeads = l
		n.regossip()
	}
}

// kickShards wakes the shard loop.
func (n *Node) kickShards() {
	select {
	case n.shardKick <- struct{}{}:
	default:
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// shardPeers lists where to send a request for shard s from a node that
// holds no replica of it, best first: the node that gossips that it leads
// the shard's group, then the map's preferred leader, then its other
// replicas gossip knows alive; each at its Raft address.
func (n *Node) shardPeers(m *fsm.Map, s int) []peerRef {
	gid := groupOf(m, s)
	mg := m.Groups[s]
	alive := map[string]string{}
	var out []peerRef
	for _, mem := range n.members() {
		if mem.state != memberlist.StateAlive || mem.Raft == "" || !slices.Contains(mg.Replicas, mem.ID) {
			continue
		}
		if slices.Contains(mem.Leads, gid) {
			out = append(out, peerRef{mem.ID, mem.Raft})
		}
		alive[mem.ID] = mem.Raft
	}
	add := func(id string) {
		if p := (peerRef{id, alive[id]}); p.addr != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	add(mg.Leader)
	for _, id := range mg.Replicas {
		add(id)
	}
	return out
}
