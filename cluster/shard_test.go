package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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

// TestClosingAReplicaUnderCommands: the store closes a shard's group while
// writes and reads hold its replica; no command panics, and each answers a
// result or an error of the contract (ErrNotHosted once the group is gone,
// or a write's indeterminate or not-applied error), never a wrong answer.
func TestClosingAReplicaUnderCommands(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.Shards, c.Replicas = 2, 3 })
	eventually(t, 30*time.Second, "the shards to settle", func() bool { return settledShards(tc) })
	n := tc.nodes[1]
	m := n.clusterMap()
	s := n.ShardOf("hot")
	gid := groupOf(m, s)
	mustSubmit(t, n, bfAdd("hot", "base"))

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var answered, refused atomic.Int64
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := n.Replica(s)
				if err != nil {
					if !errors.Is(err, ErrNotHosted) {
						t.Errorf("Replica: %v", err)
					}
					refused.Add(1)
					time.Sleep(time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if i%2 == 0 {
					res, err := rep.Submit(bfAdd("hot", fmt.Sprint(w, ":", i))).Wait(ctx)
					switch {
					case err == nil && res != nil && res.Err == nil:
						answered.Add(1)
					case err != nil && (errors.Is(err, ErrNotHosted) || errors.Is(err, ErrShutdown) ||
						errors.Is(err, ErrIndeterminate) || errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader)):
						refused.Add(1)
					default:
						t.Errorf("a write on a closing replica: %+v %v", res, err)
					}
				} else {
					err := rep.ReadBarrier(ctx, ReadLinearizable)
					switch {
					case err == nil:
						// Whatever it last applied holds what was acknowledged
						// before the close.
						if !rep.FSM().Exists(fsm.FamilyBF, "hot", [][]byte{[]byte("base")})[0] {
							t.Errorf("a read on a closing replica lost an acknowledged write")
						}
						answered.Add(1)
					case errors.Is(err, ErrNotHosted) || errors.Is(err, ErrShutdown) || errors.Is(err, ErrNoLeader) ||
						errors.Is(err, ErrNotLeader) || errors.Is(err, ErrIndeterminate) || errors.Is(err, context.DeadlineExceeded):
						refused.Add(1)
					default:
						t.Errorf("a read on a closing replica: %v", err)
					}
				}
				cancel()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := n.closeGroup(gid, false); err != nil {
		t.Fatalf("close: %v", err)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if answered.Load() == 0 || refused.Load() == 0 {
		t.Fatalf("%d answered and %d refused: the close did not land among the commands", answered.Load(), refused.Load())
	}
	t.Logf("%d commands answered, %d refused around the close", answered.Load(), refused.Load())
}
