package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

// The leader's view of whom raft reaches: a failed heartbeat counts from the
// follower's last contact, a resumed one clears it, and a report gone stale
// (its resume lost) no longer counts against the follower.
func TestRaftReachFollowsHeartbeats(t *testing.T) {
	var r raftReach
	t0 := time.Unix(1000, 0)
	if got := r.unreachableFor("n2", t0); got != 0 {
		t.Fatalf("never reported: unreachable for %v, want 0", got)
	}
	r.failed("n2", t0, t0.Add(time.Second))
	r.failed("n2", t0, t0.Add(3*time.Second))
	if got := r.unreachableFor("n2", t0.Add(3*time.Second)); got != 3*time.Second {
		t.Fatalf("failing since t0: unreachable for %v, want 3s", got)
	}
	r.resumed("n2")
	if got := r.unreachableFor("n2", t0.Add(4*time.Second)); got != 0 {
		t.Fatalf("resumed: unreachable for %v, want 0", got)
	}
	// No last contact known: counted from the first failure.
	r.failed("n3", time.Time{}, t0)
	r.failed("n3", time.Time{}, t0.Add(2*time.Second))
	if got := r.unreachableFor("n3", t0.Add(2*time.Second)); got != 2*time.Second {
		t.Fatalf("no last contact: unreachable for %v, want 2s", got)
	}
	if got := r.unreachableFor("n3", t0.Add(2*time.Second+reachStale+time.Second)); got != 0 {
		t.Fatalf("stale report: unreachable for %v, want 0", got)
	}
	r.failed("n3", t0, t0.Add(time.Second))
	r.reset()
	if got := r.unreachableFor("n3", t0.Add(time.Second)); got != 0 {
		t.Fatalf("after a new term: unreachable for %v, want 0", got)
	}
}

func TestOneLine(t *testing.T) {
	err := errors.New("1 error occurred:\n\t* Failed to join 127.0.0.1:9: dial tcp 127.0.0.1:9: connect: connection refused\n\n")
	want := "Failed to join 127.0.0.1:9: dial tcp 127.0.0.1:9: connect: connection refused"
	if got := oneLine(err); got != want {
		t.Fatalf("oneLine = %q, want %q", got, want)
	}
}

// The seed, started without Join, crashes and comes back: it finds the others
// from its members file and its configuration, and every node sees all three
// alive again.
func TestRestartedSeedRejoinsGossip(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second)
	if len(tc.cfgs[0].Join) != 0 {
		t.Fatal("the seed must start without Join")
	}
	path := filepath.Join(tc.cfgs[0].DataDir, MembersFile)
	eventually(t, 10*time.Second, "the seed's members file to list both peers with gossip addresses", func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), tc.cfgs[1].GossipAddr) && strings.Contains(string(b), tc.cfgs[2].GossipAddr)
	})
	tc.crash(0)
	eventually(t, 10*time.Second, "the others to see the seed gone", func() bool {
		return !allAlive(tc.nodes[1], 3)
	})
	tc.start(0)
	eventually(t, 10*time.Second, "every node to see all three alive", func() bool {
		for _, n := range tc.live() {
			if !allAlive(n, 3) {
				return false
			}
		}
		return true
	})
}

// allAlive reports whether n's gossip lists want members, all alive.
func allAlive(n *Node, want int) bool {
	alive := 0
	for _, m := range n.members() {
		if m.state == memberlist.StateAlive {
			alive++
		}
	}
	return alive == want
}

// A node removed from the configuration while it runs says so (status,
// readiness), is not added back with its old state, and still says so after a
// restart.
func TestRemovedNodeSaysSo(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	tc.mustWrite(bfAdd("r", "a"))
	f := tc.followers()[0]
	id := tc.cfgs[f].ID
	eventually(t, 10*time.Second, "the leader to know the follower as a member", func() bool {
		m, ok := l.memberMeta(id)
		return ok && m.Member && tc.nodes[f].heal.book.get().Member
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.RemovePeer(ctx, -1, id); err != nil {
		t.Fatal(err)
	}
	removed := func() bool {
		n := tc.nodes[f]
		st := n.Status()
		return st.Role == "removed" && !st.Ready && !n.Ready() &&
			strings.Contains(st.Problem, "removed from the cluster's configuration") &&
			strings.Contains(st.Problem, "move its data directory")
	}
	eventually(t, 10*time.Second, "the removed node to say so", removed)
	// The leader's reconciliation saw the removed node alive and, instead of
	// adding it back, told it so over gossip (plan_test.go has the rule; this
	// is its wiring).
	eventually(t, 10*time.Second, "the leader to tell the removed node", func() bool {
		h, _ := tc.nodes[f].heal.hint.Load().(string)
		return h != ""
	})
	for _, n := range tc.live() {
		if v := n.meta.voters(); n.meta.IsLeader() && v != 2 {
			t.Fatalf("the removed node was added back: %d voters", v)
		}
	}
	tc.crash(f)
	tc.start(f)
	eventually(t, 10*time.Second, "the restarted removed node to say so", removed)
}
