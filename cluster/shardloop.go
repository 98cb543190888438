package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/slot"
)

// The shard loop keeps this node's groups in line with the cluster map
// (docs/SHARDING.md): it opens the groups the map places here and retires
// those it no longer does, has each group this node leads move towards the
// map's placement (planGroup), and, on group 0's leader, runs the
// controller, which plans the map's next version (planPlacement).

// maxMoving bounds the shards whose replicas move at once.
const maxMoving = 2

func (n *Node) shardLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-n.shardKick:
		case <-n.stop:
			return
		}
		n.gossipLeads()
		m := n.clusterMap()
		if m == nil {
			if n.IsLeader() && n.cfg.Shards > 0 {
				n.createMap()
			}
			continue
		}
		n.keepMap(m)
		n.noteConfigured(m)
		n.tendGroups(m)
		n.leadGroups(m)
		if n.IsLeader() {
			n.control(m)
		}
	}
}

// Groups and shards: with a map, group 0 holds the map alone, on every node
// (membership as before shards), and shard s is group s+1. Without a map,
// group 0 is the one shard of every key.

// groupOf is the group that holds shard s under map m.
func groupOf(m *fsm.Map, s int) int {
	if m == nil {
		return 0
	}
	return s + 1
}

// shardOfGroup is the shard group g holds (-1 for group 0 under a map).
func shardOfGroup(m *fsm.Map, g int) int {
	if m == nil {
		return 0
	}
	return g - 1
}

// wants reports whether map m places a replica of shard s on this node, or
// has this node create it.
func (n *Node) wants(m *fsm.Map, s int) bool {
	g := m.Groups[s]
	return slices.Contains(g.Replicas, n.cfg.ID) || g.Creator == n.cfg.ID && !g.Created
}

// tendGroups opens the groups m places here (creating those this node is to
// create), and retires open groups m no longer places here once their
// leaders no longer count this node in.
func (n *Node) tendGroups(m *fsm.Map) {
	for s := range m.Groups {
		if !n.wants(m, s) {
			continue
		}
		g, err := n.openGroup(groupOf(m, s))
		if err != nil {
			n.warnEvery("open-shard:"+itoa(s), "cannot open a shard the map places here", "shard", s, "err", err)
			continue
		}
		if mg := m.Groups[s]; mg.Creator == n.cfg.ID && !mg.Created {
			if err := g.bootstrapAlone(); err != nil {
				n.warnEvery("create-shard:"+itoa(s), "cannot create a shard", "shard", s, "err", err)
			}
		}
	}
	for _, g := range n.openGroups() {
		s := shardOfGroup(m, g.id)
		if g.id == 0 || s < m.Shards() && n.wants(m, s) {
			continue
		}
		if n.retired(m, g, s) {
			g.log.Info("the map no longer places this shard here, and its group no longer counts this node in: closing it")
			if err := n.closeGroup(g.id, true); err != nil {
				n.log.Warn("close a retired shard", "shard", s, "err", err)
			}
		}
	}
	n.removeLeftovers(m)
}

// removeLeftovers removes the files of groups that are not open, that the map
// does not place here, and whose leader no longer counts this node in: a
// replica moved away while this node was down. Placed here again later, the
// shard starts from an empty directory and catches up from its leader.
func (n *Node) removeLeftovers(m *fsm.Map) {
	dirs, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "shards"))
	if err != nil {
		return
	}
	for _, d := range dirs {
		gid, err := strconv.Atoi(d.Name())
		if err != nil || gid < 1 || n.groupByID(gid) != nil {
			continue
		}
		s := shardOfGroup(m, gid)
		if s < m.Shards() && n.wants(m, s) {
			continue
		}
		if s < m.Shards() && !n.outOf(m, s) {
			continue
		}
		n.log.Info("removing the files of a shard moved away from this node", "shard", s)
		if err := os.RemoveAll(filepath.Join(n.cfg.DataDir, "shards", d.Name())); err != nil {
			n.log.Warn("remove a moved shard's files", "shard", s, "err", err)
		}
	}
}

// outOf reports whether the leader of shard s's group (asked through its
// replicas) has a configuration without this node.
func (n *Node) outOf(m *fsm.Map, s int) bool {
	for _, id := range m.Groups[s].Replicas {
		ps, ok := n.shardStatus(s, id)
		if !ok || ps.Leader != ps.ID {
			continue
		}
		return !slices.Contains(ps.Voters, n.cfg.ID) && !slices.Contains(ps.Nonvoters, n.cfg.ID)
	}
	return false
}

// retired reports whether group g (of shard s), which map m no longer places
// here, can be closed: a leader of it (asked over the Raft port) has a
// configuration without this node. A group this node leads is not retired:
// its plan hands leadership over first.
func (n *Node) retired(m *fsm.Map, g *group, s int) bool {
	if s >= m.Shards() {
		return true
	}
	if g.IsLeader() {
		return false
	}
	return n.outOf(m, s)
}

// leadGroups has each group this node leads move towards m's placement.
func (n *Node) leadGroups(m *fsm.Map) {
	for _, g := range n.openGroups() {
		s := shardOfGroup(m, g.id)
		if s < 0 || s >= m.Shards() || !g.IsLeader() {
			continue
		}
		mg := m.Groups[s]
		if len(mg.Replicas) == 0 {
			continue
		}
		v, err := g.view(mg.Replicas, mg.Leader)
		if err != nil {
			continue
		}
		g.exec().run(planGroup(v))
	}
}

// raftAddrOf is member id's Raft address as gossip knows it ("" if unknown).
func (n *Node) raftAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.raftAdvertise
	}
	if md, ok := n.memberMeta(id); ok {
		return md.Raft
	}
	return ""
}

// control is the controller, on group 0's leader: it observes gossip and
// every shard's group, plans the map's next version and proposes it.
func (n *Node) control(m *fsm.Map) {
	next := m.Clone()
	changed := false
	// Shards created: their creator's group leads, with the replicas the map
	// places as its voters. Until then the shard takes no write, so none is
	// acknowledged by fewer replicas than the map asks for.
	for s := range next.Groups {
		if g := &next.Groups[s]; !g.Created && n.shardLeads(s, g.Creator) && n.settled(s, g.Replicas) {
			g.Created = true
			changed = true
		}
	}
	v := placementView{Replicas: m.Replicas, MaxMoving: maxMoving, Gone: map[string]bool{}, Moving: map[int]bool{}}
	now := time.Now()
	n.recMu.Lock()
	for _, mem := range n.members() {
		switch {
		case slices.Contains(m.Draining, mem.ID):
			v.Gone[mem.ID] = true
		case mem.state == memberlist.StateAlive:
			v.Nodes = append(v.Nodes, mem.ID)
			n.rec.forget("map:" + mem.ID)
		default:
			if n.rec.deadFor("map:"+mem.ID, now) >= n.cfg.DeadServerTimeout {
				v.Gone[mem.ID] = true
			}
		}
	}
	n.recMu.Unlock()
	if !slices.Contains(v.Nodes, n.cfg.ID) && !v.Gone[n.cfg.ID] {
		v.Nodes = append(v.Nodes, n.cfg.ID)
	}
	for s, g := range m.Groups {
		v.Groups = append(v.Groups, groupPlacement{Replicas: g.Replicas, Leader: g.Leader})
		if !g.Created || !n.settled(s, g.Replicas) {
			v.Moving[s] = true
		}
	}
	placed, moved := planPlacement(v)
	if moved {
		for s := range next.Groups {
			next.Groups[s].Replicas, next.Groups[s].Leader = placed[s].Replicas, placed[s].Leader
		}
		changed = true
	}
	if !changed {
		return
	}
	next.Version = m.Version + 1
	if err := n.proposeMap(next); err != nil {
		n.warnEvery("propose-map", "the controller could not change the cluster map", "version", next.Version, "err", err)
	}
}

// proposeMap proposes m to group 0 and waits for it to be applied.
func (n *Node) proposeMap(m *fsm.Map) error {
	if err := m.Check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	res, err := n.group.submit(&fsm.Command{Op: fsm.OpSetMap, Data: fsm.EncodeMap(m)}).Wait(ctx)
	if err != nil {
		return err
	}
	return res.Err
}

// createMap writes the cluster's first map, on group 0's leader of a node
// started with --shards, once every member reads the map's log format: N
// shards of contiguous slots, placed in turn over the live members, each to
// be created by the member placed to lead it (group 0 keeps the map alone
// from then on).
func (n *Node) createMap() {
	if n.entryCodec() < fsm.MinCodec(&fsm.Command{Op: fsm.OpSetMap}) {
		n.warnEvery("map-format", "not sharding yet: a member of the cluster reads only an older log format; upgrade every node")
		return
	}
	if n.fsm.Len() > 0 {
		// Sharding now would hide every filter the one group holds (the
		// state machine refuses such a map too: fsm.ErrHoldsFilters).
		n.warnEvery("shards-legacy", "not sharding: this cluster holds filters in one group, and shards are chosen only when a cluster bootstraps; serving the one group unchanged (docs/SHARDING.md)",
			"filters", n.fsm.Len())
		return
	}
	var nodes []string
	for _, m := range n.members() {
		if m.state == memberlist.StateAlive {
			nodes = append(nodes, m.ID)
		}
	}
	if !slices.Contains(nodes, n.cfg.ID) {
		nodes = append(nodes, n.cfg.ID)
	}
	placed := initialPlacement(n.cfg.Shards, n.cfg.Replicas, nodes)
	m := &fsm.Map{Version: 1, Replicas: n.cfg.Replicas}
	for s, r := range slot.Ranges(n.cfg.Shards) {
		// Each shard is created by the node meant to lead it, so that no
		// leadership moves once the shards are ready.
		creator := placed[s].Leader
		if creator == "" {
			creator = n.cfg.ID
		}
		g := fsm.MapGroup{First: r.First, Last: r.Last, Replicas: placed[s].Replicas, Leader: placed[s].Leader,
			Creator: creator}
		m.Groups = append(m.Groups, g)
	}
	if err := n.proposeMap(m); err != nil {
		n.warnEvery("create-map", "could not write the cluster's first map", "err", err)
		return
	}
	n.log.Info("sharded the cluster", "shards", n.cfg.Shards, "replicas", n.cfg.Replicas, "nodes", len(nodes))
}

// noteConfigured warns, once, when this node was started with other shard
// settings than the cluster's map records: the map wins.
func (n *Node) noteConfigured(m *fsm.Map) {
	if n.cfg.Shards > 0 && (n.cfg.Shards != m.Shards() || n.cfg.Replicas != m.Replicas) {
		n.warnEvery("shards-flag", "this node's --shards/--replicas differ from the cluster's; following the cluster",
			"flag_shards", n.cfg.Shards, "flag_replicas", n.cfg.Replicas, "cluster_shards", m.Shards(), "cluster_replicas", m.Replicas)
	}
}

// shardLeads reports whether node id leads shard s's group.
func (n *Node) shardLeads(s int, id string) bool {
	ps, ok := n.shardStatus(s, id)
	return ok && ps.Leader == id
}

// settled reports whether shard s's group has exactly the replicas given as
// its voters, as its leader says.
func (n *Node) settled(s int, replicas []string) bool {
	for _, id := range replicas {
		ps, ok := n.shardStatus(s, id)
		if !ok || ps.Leader == "" {
			continue
		}
		if ps.Leader != id {
			if lps, ok := n.shardStatus(s, ps.Leader); ok {
				ps = lps
			}
		}
		a, b := slices.Clone(ps.Voters), slices.Clone(replicas)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b) && len(ps.Nonvoters) == 0
	}
	return false
}

// shardStatus asks node id about its replica of shard s.
func (n *Node) shardStatus(s int, id string) (peerStatus, bool) {
	gid := s + 1
	if id == n.cfg.ID {
		if g := n.groupByID(gid); g != nil {
			return g.peerStatus(), true
		}
		return peerStatus{}, false
	}
	addr := n.raftAddrOf(id)
	if addr == "" {
		return peerStatus{}, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	op, body := groupOp(gid, opStatus, nil)
	b, err := n.peer(addr).call(ctx, op, body)
	if err != nil {
		return peerStatus{}, false
	}
	var ps peerStatus
	if err := jsonUnmarshal(b, &ps); err != nil || ps.ID != id {
		return peerStatus{}, false
	}
	return ps, true
}
