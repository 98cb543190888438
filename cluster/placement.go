package cluster

import (
	"slices"
	"sort"
)

// Placement decides where each shard's replicas and leader should be
// (docs/SHARDING.md, "Placement"). The controller (group 0's leader) observes,
// calls planPlacement, and proposes the result as the map's next version;
// each group's leader then moves its own configuration towards it
// (planGroup). planPlacement is pure: no raft, no network, no clock.

// groupPlacement is where the map wants one shard.
type groupPlacement struct {
	Replicas []string // node ids, in the order they were placed
	Leader   string   // preferred leader ("" none)
}

// placementView is what the controller observed when it plans.
type placementView struct {
	Replicas int              // R: replicas per shard
	Groups   []groupPlacement // the map's placement now, by shard
	// Nodes are the nodes that may hold replicas: alive to gossip and not
	// draining. Every other node named in Groups is unavailable.
	Nodes []string
	// Gone are the nodes dead (to gossip and Raft) longer than the dead-server
	// timeout, draining, or left: their replicas are given to others.
	Gone map[string]bool
	// Left are the gone nodes that left the cluster for good: a replica of
	// one that no other node can take is dropped rather than kept waiting.
	Left map[string]bool
	// Fenced are, by shard, the nodes whose replica of it a recovery cut
	// off: gone for that shard (and dropped when nothing replaces them),
	// and never placed there again until the controller lifts the fence.
	Fenced map[int][]string
	// Moving are the shards whose groups have not reached the map's
	// replicas yet: a change is in flight, and no new one is planned for them.
	Moving map[int]bool
	// MaxMoving bounds the shards moving at once (those in Moving and those
	// this plan changes); 0 means no bound.
	MaxMoving int
}

// planPlacement returns the next placement and whether it differs from the
// current one. In order: replicas on gone nodes are replaced, shards short
// of R replicas are filled, replicas move from the most to the least loaded
// node while they differ by more than one, and each shard gets a preferred
// leader so that nodes lead within one of the average.
func planPlacement(v placementView) ([]groupPlacement, bool) {
	next := make([]groupPlacement, len(v.Groups))
	for i, g := range v.Groups {
		next[i] = groupPlacement{Replicas: slices.Clone(g.Replicas), Leader: g.Leader}
	}
	p := &placer{v: v, next: next, ok: map[string]bool{}, load: map[string]int{}, changed: map[int]bool{}}
	for _, n := range v.Nodes {
		if !v.Gone[n] {
			p.ok[n] = true
		}
	}
	p.count()
	p.replaceGone()
	p.dropLost()
	p.fill()
	p.balance()
	p.leaders()
	changed := false
	for i := range next {
		if !slices.Equal(next[i].Replicas, v.Groups[i].Replicas) || next[i].Leader != v.Groups[i].Leader {
			changed = true
		}
	}
	return next, changed
}

type placer struct {
	v       placementView
	next    []groupPlacement
	ok      map[string]bool // may take replicas
	load    map[string]int  // replicas per available node, in next
	changed map[int]bool    // shards this plan moves
}

func (p *placer) count() {
	for n := range p.ok {
		p.load[n] = 0
	}
	for _, g := range p.next {
		for _, r := range g.Replicas {
			if p.ok[r] {
				p.load[r]++
			}
		}
	}
}

// goneFrom reports whether node n can no longer hold shard s: it is gone, or
// fenced off that shard.
func (p *placer) goneFrom(s int, n string) bool {
	return p.v.Gone[n] || slices.Contains(p.v.Fenced[s], n)
}

// budget reports whether shard s may change now.
func (p *placer) budget(s int) bool {
	if p.v.Moving[s] || p.changed[s] {
		return false
	}
	if p.v.MaxMoving == 0 {
		return true
	}
	return len(p.v.Moving)+len(p.changed) < p.v.MaxMoving
}

// least is the available node holding the fewest replicas that is not in
// exclude and not fenced off shard s (ties: the lowest id), or "".
func (p *placer) least(s int, exclude []string) string {
	best := ""
	for n := range p.ok {
		if slices.Contains(exclude, n) || slices.Contains(p.v.Fenced[s], n) {
			continue
		}
		if best == "" || p.load[n] < p.load[best] || p.load[n] == p.load[best] && n < best {
			best = n
		}
	}
	return best
}

// replaceGone gives each shard's first replica on a gone node to the least
// loaded available node, one per shard per round (the group adds before it
// removes, so a shard moves one replica at a time).
func (p *placer) replaceGone() {
	for s := range p.next {
		reps := p.next[s].Replicas
		for i, r := range reps {
			if !p.goneFrom(s, r) || !p.budget(s) {
				continue
			}
			to := p.least(s, reps)
			if to == "" {
				break
			}
			reps[i] = to
			p.load[to]++
			p.changed[s] = true
			break
		}
	}
}

// dropLost removes from each shard its replicas on nodes that left for
// good or are fenced off it and that replaceGone could not replace: they
// will never hold the shard again, and fill places what is missing once a
// node can take it. A replica on a node merely dead stays listed: it may come
// back.
func (p *placer) dropLost() {
	for s := range p.next {
		reps := p.next[s].Replicas
		kept := reps[:0:0]
		for _, r := range reps {
			if p.v.Left[r] || slices.Contains(p.v.Fenced[s], r) {
				p.changed[s] = true
				continue
			}
			kept = append(kept, r)
		}
		if len(kept) != len(reps) {
			p.next[s].Replicas = kept
			if !slices.Contains(kept, p.next[s].Leader) {
				p.next[s].Leader = ""
			}
		}
	}
}

// fill adds a replica to each shard short of R, one per shard per round.
func (p *placer) fill() {
	for s := range p.next {
		if len(p.next[s].Replicas) >= p.v.Replicas || !p.budget(s) {
			continue
		}
		to := p.least(s, p.next[s].Replicas)
		if to == "" {
			continue
		}
		p.next[s].Replicas = append(p.next[s].Replicas, to)
		p.load[to]++
		p.changed[s] = true
	}
}

// balance moves replicas from the most to the least loaded available node
// while their loads differ by more than one.
func (p *placer) balance() {
	for {
		nodes := p.byLoad()
		if len(nodes) < 2 {
			return
		}
		lo, hi := nodes[0], nodes[len(nodes)-1]
		if p.load[hi]-p.load[lo] <= 1 {
			return
		}
		moved := false
		for s := range p.next {
			reps := p.next[s].Replicas
			i := slices.Index(reps, hi)
			if i < 0 || slices.Contains(reps, lo) || slices.Contains(p.v.Fenced[s], lo) || !p.budget(s) {
				continue
			}
			reps[i] = lo
			p.load[hi]--
			p.load[lo]++
			p.changed[s] = true
			moved = true
			break
		}
		if !moved {
			return // every shard of the most loaded node is moving, or holds the least loaded one
		}
	}
}

// byLoad lists the available nodes by load, then id.
func (p *placer) byLoad() []string {
	nodes := make([]string, 0, len(p.ok))
	for n := range p.ok {
		nodes = append(nodes, n)
	}
	sort.Slice(nodes, func(i, j int) bool {
		if p.load[nodes[i]] != p.load[nodes[j]] {
			return p.load[nodes[i]] < p.load[nodes[j]]
		}
		return nodes[i] < nodes[j]
	})
	return nodes
}

// leaders gives each shard a preferred leader among its available replicas
// so that nodes lead within one of the average: a preference that stays
// within the cap is kept (leadership moves only when it must), the rest go to
// the replica leading fewest.
func (p *placer) leaders() {
	if len(p.ok) == 0 {
		return
	}
	ceil := (len(p.next) + len(p.ok) - 1) / len(p.ok)
	leads := map[string]int{}
	assigned := make([]bool, len(p.next))
	for s, g := range p.next {
		if l := g.Leader; p.ok[l] && slices.Contains(g.Replicas, l) && leads[l] < ceil {
			leads[l]++
			assigned[s] = true
		}
	}
	for s := range p.next {
		if assigned[s] {
			continue
		}
		best := ""
		for _, r := range p.next[s].Replicas {
			if p.ok[r] && (best == "" || leads[r] < leads[best] || leads[r] == leads[best] && r < best) {
				best = r
			}
		}
		p.next[s].Leader = best
		if best != "" {
			leads[best]++
		}
	}
	// Then even out: a shard led by a node leading most moves to one of its
	// replicas leading at least two fewer.
	for range len(p.next) * len(p.ok) {
		if !p.shiftLeader(leads) {
			return
		}
	}
}

// shiftLeader moves one preferred leadership from a node leading most to a
// replica of the same shard leading at least two fewer; false if none can.
func (p *placer) shiftLeader(leads map[string]int) bool {
	for s := range p.next {
		from := p.next[s].Leader
		for _, to := range p.next[s].Replicas {
			if p.ok[to] && to != from && leads[to]+1 < leads[from] {
				p.next[s].Leader = to
				leads[from]--
				leads[to]++
				return true
			}
		}
	}
	return false
}

// initialPlacement places n shards of r replicas on nodes, handing out
// replica places in turn (shard s's j-th replica on node (s·r+j) mod the
// node count), so every node holds within one of the average, and gives each
// shard a preferred leader as planPlacement does.
func initialPlacement(n, r int, nodes []string) []groupPlacement {
	nodes = slices.Clone(nodes)
	slices.Sort(nodes)
	out := make([]groupPlacement, n)
	if len(nodes) == 0 {
		return out
	}
	r = min(r, len(nodes))
	for s := range out {
		for j := range r {
			out[s].Replicas = append(out[s].Replicas, nodes[(s*r+j)%len(nodes)])
		}
	}
	p := &placer{next: out, ok: map[string]bool{}}
	for _, n := range nodes {
		p.ok[n] = true
	}
	p.leaders()
	return out
}
