package cluster

import (
	"context"
	"slices"
	"time"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/slot"
)

// The controller runs on group 0's leader (docs/SHARDING.md, "Placement"):
// it decides the cluster map's next version in three steps, as membership
// does (plan.go):
//
//   - observe: the map, the liveness view (liveness.go) and what each shard's
//     leader last reported (reports.go), all from this node's own tables: no
//     peer is asked anything while the controller decides;
//   - plan: planMap, a pure function of what was observed (table tests in
//     controller_test.go): which shards are created, which are settled,
//     where replicas and leaders go (planPlacement);
//   - act: propose the next map to group 0 (compare and set on its version).

// maxMoving bounds the shards whose replicas move at once.
const maxMoving = 2

// shardObs is what a shard's leader last reported of its group.
type shardObs struct {
	Leader    string // the node that reports leading the group ("" none)
	Voters    []string
	Nonvoters []string
}

// controlView is what the controller observed.
type controlView struct {
	Map       *fsm.Map
	Self      string
	Live      map[string]nodeLiveness
	DeadAfter time.Duration // --dead-server-timeout
	Shards    []shardObs    // by shard
	MaxMoving int
	// Holding is, for each node with a fresh report, the groups a fence
	// keeps it off that it still holds files of (fence.go).
	Holding map[string][]int
}

// planMap decides the map's next version, nil when it stays as it is:
//
//   - a shard is created once its creator leads its group with exactly the
//     map's replicas as voters (until then it takes no write);
//   - a node draining, left, or dead to gossip and Raft for the whole
//     --dead-server-timeout is gone: its replicas go to live nodes; a
//     replica on a node that left, or that a recovery cut off the shard, is
//     dropped when no node can take it;
//   - a node stopping to restart, or dead for less than the timeout, keeps
//     its replicas but takes no new one, and leads nothing;
//   - a shard whose live replicas have not yet reached the map (a change in
//     flight) is not changed again, and at most MaxMoving shards move at once;
//   - a fence (a replica a recovery cut off) is lifted once its node left, or
//     reports it holds no files of the shard any more.
func planMap(v controlView) *fsm.Map {
	m := v.Map
	next := m.Clone()
	changed := liftFences(next, v.Live, v.Holding)
	pv := placementView{Replicas: m.Replicas, MaxMoving: v.MaxMoving, Gone: map[string]bool{}, Left: map[string]bool{},
		Moving: map[int]bool{}, Fenced: map[int][]string{}}
	for id, l := range v.Live {
		switch {
		case slices.Contains(m.Draining, id):
			pv.Gone[id] = true
		case l.State == liveLeft:
			pv.Gone[id], pv.Left[id] = true, true
		case l.State == liveDead && l.DeadFor() >= v.DeadAfter:
			pv.Gone[id] = true
		case l.State == liveAlive:
			pv.Nodes = append(pv.Nodes, id)
		}
	}
	if _, seen := v.Live[v.Self]; !seen && !pv.Gone[v.Self] {
		pv.Nodes = append(pv.Nodes, v.Self)
	}
	slices.Sort(pv.Nodes)
	for s := range next.Groups {
		g := &next.Groups[s]
		if len(g.Fenced) > 0 {
			pv.Fenced[s] = g.Fenced
		}
		if !g.Created && g.Creator != "" && v.obs(s).Leader == g.Creator && v.settled(s, g.Replicas, nil) {
			g.Created = true
			changed = true
		}
	}
	for s, g := range m.Groups {
		pv.Groups = append(pv.Groups, groupPlacement{Replicas: g.Replicas, Leader: g.Leader})
		gone := func(id string) bool { return pv.Gone[id] || slices.Contains(g.Fenced, id) }
		if !g.Created || !v.settled(s, g.Replicas, gone) {
			pv.Moving[s] = true
		}
	}
	if placed, moved := planPlacement(pv); moved {
		for s := range next.Groups {
			next.Groups[s].Replicas, next.Groups[s].Leader = placed[s].Replicas, placed[s].Leader
		}
		changed = true
	}
	if !changed {
		return nil
	}
	next.Version = m.Version + 1
	return next
}

// obs is what the view holds of shard s.
func (v controlView) obs(s int) shardObs {
	if s < len(v.Shards) {
		return v.Shards[s]
	}
	return shardObs{}
}

// settled reports whether shard s's group has reached replicas: a leader
// reports a configuration whose voters are exactly the replicas and which has
// no non-voter, leaving out the nodes gone says can no longer take part (a
// replica the group cannot add, or a dead non-voter, is no change in flight:
// it is the controller's to replace).
func (v controlView) settled(s int, replicas []string, gone func(string) bool) bool {
	o := v.obs(s)
	if o.Leader == "" {
		return false
	}
	keep := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if gone == nil || !gone(id) {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(keep(o.Voters), keep(replicas)) && len(keep(o.Nonvoters)) == 0
}

// observeControl is what this node, group 0's leader, knows now: its own
// tables, no peer asked.
func (n *Node) observeControl(m *fsm.Map) controlView {
	v := controlView{Map: m, Self: n.cfg.ID, Live: n.liveness(), DeadAfter: n.cfg.DeadServerTimeout,
		MaxMoving: maxMoving, Shards: make([]shardObs, m.Shards())}
	tab := n.reports.snapshot()
	for s := range m.Groups {
		if id, gr, ok := groupLeader(tab, groupOf(m, s)); ok {
			v.Shards[s] = shardObs{Leader: id, Voters: gr.Voters, Nonvoters: gr.Nonvoters}
		}
	}
	v.Holding = holdingFenced(tab, m, time.Now())
	return v
}

// holdingFenced is, by node, the fenced groups it still holds files of, from
// the reports that can say: fresh ones, read against this map or a newer
// one. A report read against an older map lists no fence the map added
// since, which is not the same as holding no files: a node killed just
// before a recovery fenced it sent such a report, and lifting its fence on
// that let its stale replica back into the shard (liftFences).
func holdingFenced(tab map[string]received, m *fsm.Map, now time.Time) map[string][]int {
	out := map[string][]int{}
	for id, rc := range tab {
		if now.Sub(rc.at) <= reportFresh && rc.r.Map >= m.Version {
			out[id] = rc.r.Fenced
		}
	}
	return out
}

// control is one round of the controller, on group 0's leader.
func (n *Node) control(m *fsm.Map) {
	next := planMap(n.observeControl(m))
	if next == nil {
		return
	}
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
	res, err := n.meta.submit(&fsm.Command{Op: fsm.OpSetMap, Data: fsm.EncodeMap(m)}).Wait(ctx)
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
	if n.meta.entryCodec() < fsm.MinCodec(&fsm.Command{Op: fsm.OpSetMap}) {
		n.warnEvery("map-format", "not sharding yet: a member of the cluster reads only an older log format; upgrade every node")
		return
	}
	if n.meta.fsm.Len() > 0 {
		// Sharding now would hide every filter the one group holds (the
		// state machine refuses such a map too: fsm.ErrHoldsFilters).
		n.warnEvery("shards-legacy", "not sharding: this cluster holds filters in one group, and shards are chosen only when a cluster bootstraps; serving the one group unchanged (docs/SHARDING.md)",
			"filters", n.meta.fsm.Len())
		return
	}
	var nodes []string
	for id, l := range n.liveness() {
		if l.State == liveAlive {
			nodes = append(nodes, id)
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
