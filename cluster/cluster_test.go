package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// A write sent to a follower is forwarded, and a linearizable read on another
// follower sees it at once.
func TestForwardedWriteVisibleOnOtherFollower(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second)
	f := tc.followers()
	for i := 0; i < 50; i++ {
		item := fmt.Sprintf("user-%d", i)
		r := mustSubmit(t, tc.nodes[f[0]], bfAdd("users", item))
		if len(r.Ints) != 1 || r.Ints[0] != 1 {
			t.Fatalf("add %s via follower: got %v, want [1]", item, r.Ints)
		}
		if !exists(t, tc.nodes[f[1]], "users", item) {
			t.Fatalf("%s added via %s not visible on %s right after", item, tc.cfgs[f[0]].ID, tc.cfgs[f[1]].ID)
		}
	}
}

// Writes pipelined through a follower keep their order: a reserve followed by
// adds to it must find the filter created.
func TestForwardedPipelineKeepsOrder(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second)
	fol := tc.nodes[tc.followers()[0]]
	var futs []*Future
	for k := 0; k < 20; k++ {
		key := fmt.Sprintf("k%d", k)
		c := bfAdd(key, "x")
		c.Op = fsm.OpReserve
		c.Items = nil
		futs = append(futs, fol.Submit(c))
		add := bfAdd(key, "y")
		add.NoCreate = true
		futs = append(futs, fol.Submit(add))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i, f := range futs {
		r, err := f.Wait(ctx)
		if err != nil || r.Err != nil {
			t.Fatalf("write %d: %v / %v (order lost?)", i, err, r)
		}
	}
}

// Killing the leader: a new leader takes writes, and every write acknowledged
// before or after is present on every surviving node; the old leader restarted
// catches up.
func TestLeaderLossKeepsAcknowledgedWrites(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	li, leader := tc.leader(10 * time.Second)
	var acked []string
	for i := 0; i < 100; i++ {
		item := fmt.Sprintf("before-%d", i)
		mustSubmit(t, leader, bfAdd("coupons", item))
		acked = append(acked, item)
	}
	tc.crash(li)
	start := time.Now()
	_, nl := tc.leader(10 * time.Second)
	var firstOK time.Duration
	for i := 0; i < 100; i++ {
		item := fmt.Sprintf("after-%d", i)
		mustSubmit(t, nl, bfAdd("coupons", item))
		if i == 0 {
			firstOK = time.Since(start)
		}
		acked = append(acked, item)
	}
	t.Logf("writes succeeded again %v after the leader was killed", firstOK)
	for _, n := range tc.live() {
		for _, item := range acked {
			if !exists(t, n, "coupons", item) {
				t.Fatalf("acknowledged %s missing on %s", item, n.ID())
			}
		}
	}
	tc.start(li)
	eventually(t, 15*time.Second, "restarted node to catch up", func() bool {
		return tc.nodes[li].meta.fsm.AppliedIndex() >= nl.meta.fsm.AppliedIndex()
	})
	for _, item := range acked {
		if !exists(t, tc.nodes[li], "coupons", item) {
			t.Fatalf("acknowledged %s missing on the restarted node", item)
		}
	}
}

// Losing a follower leaves the cluster serving; the follower restarted with its
// data directory rejoins as itself.
func TestFollowerLossAndRejoin(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, leader := tc.leader(10 * time.Second)
	fi := tc.followers()[0]
	mustSubmit(t, leader, bfAdd("k", "a"))
	if err := tc.nodes[fi].Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	tc.nodes[fi] = nil
	mustSubmit(t, leader, bfAdd("k", "b"))
	if got := leader.meta.voters(); got != 3 {
		t.Fatalf("after a clean shutdown the node must stay a voter: %d voters", got)
	}
	tc.start(fi)
	eventually(t, 15*time.Second, "follower to rejoin and catch up", func() bool {
		return tc.nodes[fi].meta.fsm.AppliedIndex() >= leader.meta.fsm.AppliedIndex()
	})
	if !exists(t, tc.nodes[fi], "k", "b") {
		t.Fatal("write made while the follower was down is missing after rejoin")
	}
}

// A minority partition cannot acknowledge writes; the majority elects a leader
// and keeps serving; after healing, every node agrees.
func TestMinorityPartition(t *testing.T) {
	tc := newTestCluster(t, 5, func(c *Config) { steady(c); c.ApplyTimeout = 2 * time.Second })
	li, _ := tc.leader(15 * time.Second)
	var all []string
	for _, c := range tc.cfgs {
		all = append(all, c.RaftAddr)
	}
	minority := []int{li, (li + 1) % 5}
	for _, m := range minority {
		tc.faults.Isolate(tc.cfgs[m].RaftAddr, all...)
	}
	// The old leader cannot commit: its write must not be acknowledged.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	r, err := submit(ctx, tc.nodes[li], bfAdd("p", "minority-write"))
	cancel()
	if err == nil {
		t.Fatalf("a leader cut off from the majority acknowledged a write: %v", r)
	}
	// The majority elects a new leader and serves.
	var nl *Node
	eventually(t, 10*time.Second, "a majority leader", func() bool {
		for i, n := range tc.nodes {
			if i != minority[0] && i != minority[1] && n.meta.IsLeader() {
				nl = n
				return true
			}
		}
		return false
	})
	mustSubmit(t, nl, bfAdd("p", "majority-write"))
	tc.faults.Heal()
	_, final := tc.leader(15 * time.Second)
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, "convergence", func() bool {
			return n.meta.fsm.AppliedIndex() >= final.meta.fsm.AppliedIndex()
		})
		if !exists(t, n, "p", "majority-write") {
			t.Fatalf("acknowledged write missing on %s after heal", n.ID())
		}
	}
}

// A node that missed more than the trailing log gets a snapshot installed.
func TestSnapshotInstallToLaggingNode(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) {
		c.TrailingLogs = 10
		c.SnapshotThreshold = 50
	})
	_, leader := tc.leader(10 * time.Second)
	lag := tc.followers()[0]
	tc.crash(lag)
	for i := 0; i < 200; i++ {
		mustSubmit(t, leader, bfAdd("s", fmt.Sprintf("item-%d", i)))
	}
	if err := leader.meta.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	tc.start(lag)
	eventually(t, 20*time.Second, "lagging node to catch up from a snapshot", func() bool {
		return tc.nodes[lag].meta.fsm.AppliedIndex() >= leader.meta.fsm.AppliedIndex()
	})
	for i := 0; i < 200; i++ {
		if !exists(t, tc.nodes[lag], "s", fmt.Sprintf("item-%d", i)) {
			t.Fatalf("item-%d missing after snapshot install", i)
		}
	}
}

// A fourth node joining becomes a voter; an explicit leave shrinks the
// configuration and the cluster keeps serving.
func TestJoinAndLeave(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, leader := tc.leader(10 * time.Second)
	mustSubmit(t, leader, bfAdd("m", "a"))
	j := tc.add(nil)
	eventually(t, 20*time.Second, "the fourth node to become a voter", func() bool {
		_, l := tc.leader(10 * time.Second)
		return l.meta.voters() == 4
	})
	if !exists(t, tc.nodes[j], "m", "a") {
		t.Fatal("the joined node lacks earlier writes")
	}
	// The joined node leaves for good.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tc.nodes[j].Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	tc.crash(j)
	_, l := tc.leader(10 * time.Second)
	eventually(t, 10*time.Second, "configuration to shrink to 3", func() bool { return l.meta.voters() == 3 })
	mustSubmit(t, l, bfAdd("m", "b"))
	// The leader itself leaves: it hands over and the rest keep serving.
	li, l := tc.leader(10 * time.Second)
	if err := l.Leave(ctx); err != nil {
		t.Fatalf("leader leave: %v", err)
	}
	tc.crash(li)
	_, l2 := tc.leader(10 * time.Second)
	eventually(t, 10*time.Second, "configuration to shrink to 2", func() bool { return l2.meta.voters() == 2 })
	mustSubmit(t, l2, bfAdd("m", "c"))
}

// A member dead longer than the timeout is removed: the wiring of gossip
// events, raft's heartbeat observations and the executor (the rules, the
// quorum guard among them, are rows of plan_test.go).
func TestDeadServerRemoval(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) { c.DeadServerTimeout = 2 * time.Second })
	tc.leader(10 * time.Second)
	f := tc.followers()
	tc.crash(f[0])
	eventually(t, 20*time.Second, "dead member removed", func() bool {
		_, l := tc.leader(10 * time.Second)
		return l.meta.voters() == 2
	})
}

// With no leader, a write is refused as definitely not applied.
func TestNoLeaderRefusesWrites(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	li, _ := tc.leader(10 * time.Second)
	f := tc.followers()
	tc.crash(li)
	tc.crash(f[0])
	n := tc.nodes[f[1]]
	eventually(t, 10*time.Second, "the survivor to lose its leader", func() bool {
		id, _ := n.meta.Leader()
		return id == ""
	})
	_, err := submit(context.Background(), n, bfAdd("x", "y"))
	if !errors.Is(err, ErrNoLeader) {
		t.Fatalf("write without a leader: got %v, want ErrNoLeader", err)
	}
}

// Concurrent linearizable reads share rounds and all see a write acknowledged
// before they started.
func TestConcurrentReadsSeePriorWrites(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, leader := tc.leader(10 * time.Second)
	mustSubmit(t, leader, bfAdd("r", "seen"))
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for _, n := range tc.live() {
		for i := 0; i < 100; i++ {
			wg.Add(1)
			go func(n *Node) {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := n.meta.ReadBarrier(ctx, ReadLinearizable); err != nil {
					errs <- err
					return
				}
				if !n.meta.fsm.Exists(fsm.FamilyBF, "r", [][]byte{[]byte("seen")})[0] {
					errs <- fmt.Errorf("%s: acknowledged write not visible", n.ID())
				}
			}(n)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// With a gossip key, a node without the key (or with another) never becomes a
// member, while one with the key joins.
func TestGossipKeyKeepsStrangersOut(t *testing.T) {
	key := []byte("0123456789abcdef")
	tc := newTestCluster(t, 3, func(c *Config) { c.GossipKey = key })
	tc.leader(10 * time.Second)
	stranger := tc.add(nil)
	impostor := tc.add(func(c *Config) { c.GossipKey = []byte("fedcba9876543210") })
	friend := tc.add(func(c *Config) { c.GossipKey = key })
	// The strangers never learn of a leader, so look for it among the others.
	leader := func() *Node {
		for _, i := range []int{0, 1, 2, friend} {
			if n := tc.nodes[i]; n != nil && n.meta.IsLeader() {
				return n
			}
		}
		return nil
	}
	eventually(t, 20*time.Second, "the node with the key to become a voter", func() bool {
		l := leader()
		return l != nil && l.meta.voters() == 4
	})
	waitRounds(t, leader(), 3) // rounds that would have let a stranger in
	l := leader()
	if l == nil {
		t.Fatal("no leader")
	}
	for _, m := range l.members() {
		for _, i := range []int{stranger, impostor} {
			if m.ID == tc.cfgs[i].ID {
				t.Fatalf("%s joined gossip without the key", m.ID)
			}
		}
	}
	if ready := tc.nodes[stranger].Ready() || tc.nodes[impostor].Ready(); ready {
		t.Fatal("a node without the key became ready")
	}
	mustSubmit(t, tc.nodes[friend], bfAdd("k", "via-friend"))
}

// A five-node cluster survives losing two leaders in a row: three of five is a
// majority, and every acknowledged write is on every survivor.
func TestFiveNodesLoseTwoLeaders(t *testing.T) {
	tc := newTestCluster(t, 5, nil)
	var acked []string
	for round := 0; round < 3; round++ {
		li, l := tc.leader(10 * time.Second)
		for i := 0; i < 50; i++ {
			item := fmt.Sprintf("r%d-%d", round, i)
			mustSubmit(t, l, bfAdd("k", item))
			acked = append(acked, item)
		}
		if round < 2 {
			tc.crash(li)
		}
	}
	if live := tc.live(); len(live) != 3 {
		t.Fatalf("%d nodes live, want 3", len(live))
	}
	for _, n := range tc.live() {
		for _, item := range acked {
			if !exists(t, n, "k", item) {
				t.Fatalf("acknowledged %s missing on %s", item, n.ID())
			}
		}
	}
}

// TestLeadershipConfirmedByPeersInTerm: a leader's read round counts only
// answers to requests it sent for the round, from peers still in its term. A
// leader deposed while it was cut off is refused by the peers that moved on,
// whatever raft's own view of its last contact with them.
func TestLeadershipConfirmedByPeersInTerm(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	li, old := tc.leader(15 * time.Second)
	term := old.meta.raft.CurrentTerm()
	confirm := func(n *Node, term uint64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return n.meta.reads.confirm(ctx, term)
	}
	if err := confirm(old, term); err != nil {
		t.Fatalf("the leader of term %d could not confirm it: %v", term, err)
	}
	var all []string
	for _, c := range tc.cfgs {
		all = append(all, c.RaftAddr)
	}
	tc.faults.Isolate(tc.cfgs[li].RaftAddr, all...)
	eventually(t, 15*time.Second, "a leader in a newer term", func() bool {
		for i, n := range tc.nodes {
			if i != li && n.meta.IsLeader() && n.meta.raft.CurrentTerm() > term {
				return true
			}
		}
		return false
	})
	tc.faults.Heal()
	if err := confirm(old, term); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("the deposed leader confirmed term %d: %v", term, err)
	}
	// Whoever leads once the links are back confirms its own term.
	eventually(t, 15*time.Second, "the current leader to confirm its term", func() bool {
		_, cur := tc.leader(5 * time.Second)
		return cur != nil && confirm(cur, cur.meta.raft.CurrentTerm()) == nil
	})
}
