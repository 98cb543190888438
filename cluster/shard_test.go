package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// settledShards reports whether every node holds the newest map, every shard
// is created, and every shard's group has exactly the map's replicas as
// voters, led by one of them.
func settledShards(tc *testCluster) bool {
	var m *fsm.Map
	for _, n := range tc.live() {
		nm := n.clusterMap()
		if nm == nil || m != nil && nm.Version != m.Version {
			return false
		}
		m = nm
	}
	if m == nil {
		return false
	}
	for s, g := range m.Groups {
		if !g.Created {
			return false
		}
		for _, n := range tc.live() {
			if !n.Hosts(s) {
				if slices.Contains(g.Replicas, n.ID()) {
					return false
				}
				continue
			}
			grp := n.groupByID(groupOf(m, s))
			if grp.IsLeader() {
				servers, err := latestServers(grp.raft)
				if err != nil || len(servers) != len(g.Replicas) || countVoters(servers) != len(g.Replicas) {
					return false
				}
			}
		}
	}
	return true
}

// TestStaticShards: a cluster started with --shards 3 --replicas 2 writes its
// map, creates every shard on the nodes the map places it, and routes writes
// for any key from any node to the shard that owns it; a shard's filters are
// on its replicas alone, group 0 holds none, and a node that holds no replica
// of a shard holds none of its state.
func TestStaticShards(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.Shards, c.Replicas = 3, 2 })
	eventually(t, 60*time.Second, "the shards to be created and placed", func() bool { return settledShards(tc) })
	m := tc.nodes[0].clusterMap()
	if m.Shards() != 3 || m.Replicas != 2 {
		t.Fatalf("map: %d shards of %d replicas", m.Shards(), m.Replicas)
	}
	perShard := map[int][]string{}
	for i := 0; len(perShard) < 3 || i < 30; i++ {
		key := fmt.Sprintf("key-%d", i)
		n := tc.nodes[i%3]
		perShard[n.ShardOf(key)] = append(perShard[n.ShardOf(key)], key)
		// Leadership may be moving to where the map prefers it: a write
		// refused for want of a leader was not applied, and is sent again.
		mustSubmit(t, n, bfAdd(key, "a"))
	}
	for _, n := range tc.live() {
		if n.meta.fsm.Len() != 0 {
			t.Fatalf("%s: group 0 holds %d filters", n.ID(), n.meta.fsm.Len())
		}
		for s, keys := range perShard {
			rep, rerr := n.Replica(s)
			if !slices.Contains(m.Groups[s].Replicas, n.ID()) {
				if rerr == nil {
					t.Fatalf("%s holds shard %d, which the map does not place there", n.ID(), s)
				}
				continue
			}
			if rerr != nil {
				t.Fatalf("%s: shard %d: %v", n.ID(), s, rerr)
			}
			f := rep.FSM()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := rep.ReadBarrier(ctx, ReadLinearizable)
			cancel()
			if err != nil {
				t.Fatalf("%s: read barrier of shard %d: %v", n.ID(), s, err)
			}
			for _, k := range keys {
				if !f.Exists(fsm.FamilyBF, k, [][]byte{[]byte("a")})[0] {
					t.Fatalf("%s: shard %d lacks %s", n.ID(), s, k)
				}
			}
			if f.Len() != len(keys) {
				t.Fatalf("%s: shard %d holds %d filters, want %d", n.ID(), s, f.Len(), len(keys))
			}
		}
	}
}
