package transport

import (
	"slices"
	"sort"

	"github.com/rookerydb/rookery/cluster"
)

// CLUSTER NODES for Redis Cluster's tools (docs/SHARDING.md, "Routing").
//
// Redis Cluster has no node that is both a master and a replica; a Rookery
// node usually is both (six nodes, six shards of three: each leads one and
// follows two). redis-cli --cluster check and info read each node's own
// "myself" line: a node flagged slave is a replica of the master it names, any
// other is a master owning the slots on its line, and the keys are the sum of
// the masters' DBSIZE. Listing the leaders as masters (what CLUSTER SLOTS
// and SHARDS say, and what go-redis and redis-py route by) leaves no node to
// show as a replica once every node leads a shard.
//
// So CLUSTER NODES shows a projection: as few masters as cover every shard,
// each chosen among the shards' leaders, each showing the slots of the shards
// it holds a replica of and that no earlier master took; every other node is
// a slave of a master it shares a shard with (the fewest slaves first). The
// masters are leaders, so go-redis's and redis-py's DBSIZE over the masters
// of CLUSTER SLOTS ask every projected master, and a cluster client's DBSIZE
// on any node counts the keys of the slots that node shows here (ownShards),
// so both tools count every key once. Clients route by CLUSTER SLOTS and
// SHARDS, which stay exact.

// nodesView is the projection: the shards whose slots each master shows,
// and each slave's master.
type nodesView struct {
	owns      map[string][]cluster.ShardInfo // master id -> shards shown on its line
	masters   []string                       // in the order chosen
	replicaOf map[string]string              // slave id -> master id
}

// projectNodes computes the projection of shards over nodes, the same on
// every node that sees the same shards and leaders.
func projectNodes(shards []cluster.ShardInfo, nodes []cluster.NodeInfo) nodesView {
	nv := nodesView{owns: map[string][]cluster.ShardInfo{}, replicaOf: map[string]string{}}
	reachable := map[string]bool{}
	for _, n := range nodes {
		if n.RESPAddr != "" {
			reachable[n.ID] = true
		}
	}
	holds := map[string][]int{} // node -> indexes in shards of the shards it holds
	leaders := map[string]bool{}
	for i, sh := range shards {
		for _, r := range sh.Replicas {
			if reachable[r.ID] {
				holds[r.ID] = append(holds[r.ID], i)
			}
		}
		if sh.Leader != "" && reachable[sh.Leader] {
			leaders[sh.Leader] = true
		}
	}
	taken := make([]bool, len(shards))
	take := func(id string) {
		if !slices.Contains(nv.masters, id) {
			nv.masters = append(nv.masters, id)
		}
		for _, i := range holds[id] {
			if !taken[i] {
				taken[i] = true
				nv.owns[id] = append(nv.owns[id], shards[i])
			}
		}
	}
	ids := make([]string, 0, len(leaders))
	for id := range leaders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for {
		// Greedy cover: the leader that holds the most shards not yet shown.
		best, most := "", 0
		for _, id := range ids {
			n := 0
			for _, i := range holds[id] {
				if !taken[i] {
					n++
				}
			}
			if n > most {
				best, most = id, n
			}
		}
		if most == 0 {
			break
		}
		take(best)
	}
	// A shard none of whose replicas leads (no leader known): shown on its
	// first reachable replica, which then answers as its master would.
	for i, sh := range shards {
		if taken[i] {
			continue
		}
		for _, r := range ordered(sh) {
			if reachable[r.ID] {
				take(r.ID)
				break
			}
		}
	}
	for id := range nv.owns {
		sort.Slice(nv.owns[id], func(a, b int) bool { return nv.owns[id][a].First < nv.owns[id][b].First })
	}
	// Every other node replicates a master it shares a shard with.
	slaves := map[string]int{}
	rest := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if reachable[n.ID] && !slices.Contains(nv.masters, n.ID) {
			rest = append(rest, n.ID)
		}
	}
	sort.Strings(rest)
	for _, id := range rest {
		best := ""
		for _, m := range nv.masters {
			if !shareShard(holds[id], holds[m]) {
				continue
			}
			if best == "" || slaves[m] < slaves[best] || slaves[m] == slaves[best] && m < best {
				best = m
			}
		}
		if best != "" {
			nv.replicaOf[id] = best
			slaves[best]++
		}
	}
	return nv
}

// shareShard reports whether two sorted lists of shard indexes meet.
func shareShard(a, b []int) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}
