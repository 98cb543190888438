package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// moveGroupTo runs the group's leader's plan until its voters are want.
func moveGroupTo(t *testing.T, tc *testCluster, id int, want []string) {
	t.Helper()
	eventually(t, 30*time.Second, "the shard's voters to be the map's", func() bool {
		for _, n := range tc.live() {
			g := n.groupByID(id)
			if g == nil || !g.IsLeader() {
				continue
			}
			v, err := g.view(want, "", n.liveness(), n.reports.snapshot())
			if err != nil {
				return false
			}
			acts := planGroup(v)
			if len(acts) == 0 {
				voters := 0
				for _, s := range v.Servers {
					if s.Suffrage == raft.Voter {
						voters++
					}
				}
				return voters == len(want)
			}
			g.exec().run(acts)
		}
		return false
	})
}

// TestGroupsShareTheRaftPort: a second Raft group runs on the same nodes and
// port as group 0, created by one node alone and grown by its leader's plan;
// its writes and linearizable reads are its own (group 0 never sees them),
// forwarded from followers over the group's requests, and it elects a new
// leader when its leader dies.
func TestGroupsShareTheRaftPort(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second)
	for _, n := range tc.live() {
		if _, err := n.openGroup(1); err != nil {
			t.Fatal(err)
		}
	}
	creator := tc.nodes[0].groupByID(1)
	if err := creator.bootstrapAlone(); err != nil {
		t.Fatal(err)
	}
	moveGroupTo(t, tc, 1, []string{"n1", "n2", "n3"})

	// A write through a follower of group 1 is forwarded to its leader.
	var follower *group
	for _, n := range tc.live() {
		if g := n.groupByID(1); !g.IsLeader() {
			follower = g
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := follower.submit(bfAdd("g1", "a")).Wait(ctx); err != nil {
		t.Fatalf("write forwarded within group 1: %v", err)
	}
	for _, n := range tc.live() {
		g := n.groupByID(1)
		if err := g.ReadBarrier(ctx, ReadLinearizable); err != nil {
			t.Fatalf("%s: read barrier of group 1: %v", n.ID(), err)
		}
		if got := g.fsm.Exists(fsm.FamilyBF, "g1", [][]byte{[]byte("a")}); !got[0] {
			t.Fatalf("%s: group 1 lacks its write", n.ID())
		}
		if n.meta.fsm.Len() != 0 {
			t.Fatalf("%s: group 0 holds %d filters of group 1", n.ID(), n.meta.fsm.Len())
		}
	}

	// Group 1's leader dies: the other two elect one and take writes.
	for i, n := range tc.nodes {
		if n != nil && n.groupByID(1).IsLeader() {
			tc.crash(i)
			break
		}
	}
	eventually(t, 20*time.Second, "a new leader of group 1 that takes a write", func() bool {
		for _, n := range tc.live() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_, err := n.groupByID(1).submit(bfAdd("g1", "b")).Wait(ctx)
			cancel()
			if err == nil {
				return true
			}
		}
		return false
	})
}
