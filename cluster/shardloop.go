package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// The shard loop keeps this node's groups in line with the cluster map
// (docs/SHARDING.md): it opens the groups the map places here and retires
// those it no longer does, has each group this node leads move towards the
// map's placement (planGroup), and, on group 0's leader, runs the
// controller, which plans the map's next version (planPlacement).

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
		if n.closing() {
			return // a tick and the stop at once: the stop wins
		}
		n.gossipLeads()
		m := n.clusterMap()
		if m == nil {
			if n.meta.IsLeader() && n.cfg.Shards > 0 {
				n.createMap()
			}
			continue
		}
		n.keepMap(m)
		n.noteConfigured(m)
		if !n.mapCurrent() {
			continue
		}
		n.tendGroups(m)
		n.reportRecoveries(m)
		n.leadGroups(m)
		if n.meta.IsLeader() {
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

// The node's own groups follow the map in the same three steps as the
// controller: observe (the map, its open groups, the shard directories on
// disk, what each group's leader last reported), plan (planTend, pure,
// table-tested in shardloop_test.go), act (open, create, close).

// tendKind is what a tend action does.
type tendKind uint8

const (
	tendOpen   tendKind = iota + 1 // open the group (it waits to be added)
	tendCreate                     // open it and bootstrap it alone (its creator)
	tendClose                      // close it, keeping its files (fenced off)
	tendRetire                     // close it and remove its files
	tendRemove                     // remove the files of a group not open
)

// tendAction is one step of a tend plan.
type tendAction struct {
	Kind  tendKind
	Group int
	Why   string
}

// localGroup is an open group of this node as the tend plan sees it.
type localGroup struct {
	Leads bool // this node leads it now
}

// tendView is what a node observed of its own groups.
type tendView struct {
	Self   string
	Map    *fsm.Map
	Open   map[int]localGroup // open groups other than group 0, by id
	OnDisk []int              // groups with files here that are not open
	// Leaders is, by group, the configuration its leader last reported
	// (absent: no report of a leader).
	Leaders map[int]groupReport
}

// planTend decides which of its groups a node opens, creates, closes and
// removes:
//
//   - a shard the map places here, or that this node is to create, is opened
//     (and created by its creator);
//   - a shard the map fences this node off is closed and never opened, its
//     files kept: they may hold writes the shard lacks (fence.go);
//   - an open group the map no longer places here is closed and its files
//     removed once its leader reports a configuration without this node (a
//     group this node leads hands leadership over first, planGroup);
//   - files of a group not open, not placed here, whose leader reports a
//     configuration without this node, are removed (a replica moved away
//     while this node was down); placed here again later, the shard starts
//     empty and catches up from its leader.
func planTend(v tendView) []tendAction {
	m := v.Map
	var acts []tendAction
	for s, g := range m.Groups {
		gid := groupOf(m, s)
		if slices.Contains(g.Fenced, v.Self) {
			if _, open := v.Open[gid]; open {
				acts = append(acts, tendAction{Kind: tendClose, Group: gid, Why: "fenced"})
			}
			continue
		}
		placed := slices.Contains(g.Replicas, v.Self)
		creates := g.Creator == v.Self && !g.Created
		switch {
		case creates:
			acts = append(acts, tendAction{Kind: tendCreate, Group: gid})
		case placed:
			if _, open := v.Open[gid]; !open {
				acts = append(acts, tendAction{Kind: tendOpen, Group: gid})
			}
		}
	}
	out := func(gid int) (bool, string) {
		s := shardOfGroup(m, gid)
		if s >= m.Shards() {
			return true, "no such shard in the map"
		}
		g := m.Groups[s]
		if slices.Contains(g.Replicas, v.Self) || g.Creator == v.Self && !g.Created || slices.Contains(g.Fenced, v.Self) {
			return false, ""
		}
		if lr, ok := v.Leaders[gid]; ok && !lr.has(v.Self) {
			return true, "the map no longer places the shard here, and its leader no longer counts this node in"
		}
		return false, ""
	}
	for _, gid := range sortedKeys(v.Open) {
		if v.Open[gid].Leads {
			continue
		}
		if gone, why := out(gid); gone {
			acts = append(acts, tendAction{Kind: tendRetire, Group: gid, Why: why})
		}
	}
	for _, gid := range v.OnDisk {
		if gone, why := out(gid); gone {
			acts = append(acts, tendAction{Kind: tendRemove, Group: gid, Why: why})
		}
	}
	return acts
}

func sortedKeys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// observeTend is what this node knows of its own groups now.
func (n *Node) observeTend(m *fsm.Map) tendView {
	v := tendView{Self: n.cfg.ID, Map: m, Open: map[int]localGroup{}, Leaders: map[int]groupReport{}}
	for _, g := range n.openGroups() {
		if g.id > 0 {
			v.Open[g.id] = localGroup{Leads: g.raft != nil && g.IsLeader()}
		}
	}
	if dirs, err := os.ReadDir(filepath.Join(n.cfg.DataDir, "shards")); err == nil {
		for _, d := range dirs {
			gid, err := strconv.Atoi(d.Name())
			if _, open := v.Open[gid]; err != nil || gid < 1 || open {
				continue
			}
			v.OnDisk = append(v.OnDisk, gid)
		}
	}
	tab := n.reports.snapshot()
	for s := range m.Groups {
		gid := groupOf(m, s)
		if _, gr, ok := groupLeader(tab, gid); ok {
			v.Leaders[gid] = gr
		}
	}
	for _, gid := range v.OnDisk {
		if _, gr, ok := groupLeader(tab, gid); ok {
			v.Leaders[gid] = gr
		}
	}
	return v
}

// tendGroups carries out this node's tend plan.
func (n *Node) tendGroups(m *fsm.Map) {
	for _, gid := range n.fencedGroups(n.clusterMap()) {
		s := shardOfGroup(m, gid)
		n.fencedOnce.Do(gid, func() {
			n.log.Error("this node's replica of a shard was cut off by a recovery: it serves nothing of the shard",
				"shard", s, "what_to_do", n.fenceAdvice(s))
		})
	}
	for _, a := range planTend(n.observeTend(m)) {
		s := shardOfGroup(m, a.Group)
		switch a.Kind {
		case tendOpen, tendCreate:
			g, err := n.openGroup(a.Group)
			if err != nil {
				n.warnEvery("open-shard:"+itoa(s), "cannot open a shard the map places here", "shard", s, "err", err)
				continue
			}
			if a.Kind == tendCreate {
				if err := g.bootstrapAlone(); err != nil {
					n.warnEvery("create-shard:"+itoa(s), "cannot create a shard", "shard", s, "err", err)
				}
			}
			n.kickReport()
		case tendClose:
			n.log.Info("closing this node's replica of a shard a recovery cut it off", "shard", s)
			if err := n.closeGroup(a.Group, false); err != nil {
				n.log.Warn("close a fenced shard", "shard", s, "err", err)
			}
			n.kickReport()
		case tendRetire:
			n.log.Info("closing a shard this node no longer holds", "shard", s, "why", a.Why)
			if err := n.closeGroup(a.Group, true); err != nil {
				n.log.Warn("close a retired shard", "shard", s, "err", err)
			}
			n.kickReport()
		case tendRemove:
			n.log.Info("removing the files of a shard moved away from this node", "shard", s, "why", a.Why)
			if err := n.removeGroupFiles(a.Group); err != nil {
				n.log.Warn("remove a moved shard's files", "shard", s, "err", err)
			}
		}
	}
}

// leadGroups has each group this node leads move towards m's placement.
func (n *Node) leadGroups(m *fsm.Map) {
	live := n.liveness()
	tab := n.reports.snapshot()
	for _, g := range n.openGroups() {
		s := shardOfGroup(m, g.id)
		if s < 0 || s >= m.Shards() || g.raft == nil || !g.IsLeader() {
			continue
		}
		mg := m.Groups[s]
		if len(mg.Replicas) == 0 {
			continue
		}
		v, err := g.view(mg.Replicas, mg.Leader, live, tab)
		if err != nil {
			continue
		}
		g.exec().run(planGroup(v))
	}
}
