package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestRaftPeersAndTransfer(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	li, l := tc.leader(10 * time.Second)
	ctx := context.Background()
	tc.mustWrite(bfAdd("k", "a"))

	fi := tc.followers()[0]
	f := tc.nodes[fi]
	// A write is acknowledged once a majority has it: wait for the third node.
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, n.ID()+" to hold the write", func() bool { return n.meta.raft.LastIndex() > 0 && exists(t, n, "k", "a") })
	}
	peers, err := f.RaftPeers(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, p := range peers.Servers {
		states[p.State]++
		if !p.Voter || !p.Reachable || p.LastIndex == 0 {
			t.Errorf("peer %+v: want a reachable voter with a log", p)
		}
	}
	if len(peers.Servers) != 3 || states["leader"] != 1 || states["follower"] != 2 || peers.Leader != tc.cfgs[li].ID {
		t.Fatalf("peers as %s sees them: %+v", f.ID(), peers)
	}

	if err := f.RemovePeer(ctx, -1, l.ID()); !errors.Is(err, ErrNotLeader) {
		t.Errorf("remove on a follower: %v, want ErrNotLeader", err)
	}
	if _, err := f.TransferLeader(ctx, -1, ""); !errors.Is(err, ErrNotLeader) {
		t.Errorf("transfer on a follower: %v, want ErrNotLeader", err)
	}
	if err := l.RemovePeer(ctx, -1, "n9"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("remove an unknown id: %v, want ErrUnknownPeer", err)
	}
	if _, err := l.TransferLeader(ctx, -1, "n9"); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("transfer to an unknown id: %v, want ErrUnknownPeer", err)
	}

	to := f.ID()
	got, err := l.TransferLeader(ctx, -1, to)
	if err != nil || got != to {
		t.Fatalf("transfer to %s: %q, %v", to, got, err)
	}
	eventually(t, 10*time.Second, to+" leads", func() bool { return f.meta.IsLeader() })
}

func TestRemovePeerAndLastVoter(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	ctx := context.Background()
	gone := tc.followers()[0]
	id := tc.cfgs[gone].ID
	tc.crash(gone)
	if err := l.RemovePeer(ctx, -1, id); err != nil {
		t.Fatalf("remove %s: %v", id, err)
	}
	peers, err := l.RaftPeers(ctx, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(peers.Servers) != 2 {
		t.Fatalf("after removing %s: %+v", id, peers.Servers)
	}
	for _, p := range peers.Servers {
		if p.ID == id {
			t.Errorf("%s still in the configuration", id)
		}
	}
	// Down to one voter, which may not go.
	other := tc.followers()[0]
	if err := l.RemovePeer(ctx, -1, tc.cfgs[other].ID); err != nil {
		t.Fatal(err)
	}
	if err := l.RemovePeer(ctx, -1, l.ID()); !errors.Is(err, ErrLastVoter) {
		t.Errorf("remove the last voter: %v, want ErrLastVoter", err)
	}
	if _, err := l.TransferLeader(ctx, -1, ""); !errors.Is(err, ErrNoOtherVoter) {
		t.Errorf("transfer with no other voter: %v, want ErrNoOtherVoter", err)
	}
}

// TestRecoverPeers: with every voter but one gone, the survivor's
// configuration is rewritten while it is stopped, and it then leads alone
// with everything it held.
func TestRecoverPeers(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	tc.leader(10 * time.Second)
	for _, k := range []string{"a", "b", "c"} {
		tc.mustWrite(bfAdd(k, "x"))
	}
	surv := 0
	eventually(t, 10*time.Second, "n1 applies every write", func() bool { return exists(t, tc.nodes[surv], "c", "x") })
	tc.stopAll()

	if _, err := RecoverPeers(tc.cfgs[surv].DataDir, "n1", []RecoveryPeer{{ID: "n2"}}); !errors.Is(err, ErrNotInPeers) {
		t.Errorf("peers without the node: %v, want ErrNotInPeers", err)
	}
	if _, err := RecoverPeers(tc.cfgs[surv].DataDir, "n1", []RecoveryPeer{{ID: "n1"}, {ID: "n7"}}); err == nil {
		t.Error("a peer with no known address was taken")
	}
	rc, err := RecoverPeers(tc.cfgs[surv].DataDir, "n1", []RecoveryPeer{{ID: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rc.Previous) != 3 || len(rc.Servers) != 1 || rc.Servers[0].Raft != tc.cfgs[surv].RaftAddr || rc.Filters != 3 {
		t.Fatalf("recovered: %+v", rc)
	}
	tc.start(surv)
	n := tc.nodes[surv]
	eventually(t, 10*time.Second, "n1 leads alone", func() bool { return n.meta.IsLeader() && n.Ready() })
	for _, k := range []string{"a", "b", "c"} {
		if !exists(t, n, k, "x") {
			t.Errorf("%s lost in recovery", k)
		}
	}
	mustSubmit(t, n, bfAdd("d", "x"))
}

// TestWritesWaitOutTheLeadersTransfer: a write that reaches the leader while
// it hands its leadership over waits (in the group's hold queue) rather than
// meeting raft's refusal (TRYAGAIN), and applies once the transfer is over:
// here the transfer fails (its target is down), so on the same leader.
func TestWritesWaitOutTheLeadersTransfer(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	_, l := tc.leader(10 * time.Second)
	tc.mustWrite(bfAdd("k", "a"))
	fi := tc.followers()[0]
	target := tc.cfgs[fi].ID
	tc.crash(fi)
	// Behind the leader's log: raft waits for it to catch up, in vain.
	tc.mustWrite(bfAdd("k", "b"))
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		_, err := l.TransferLeader(ctx, -1, target)
		done <- err
	}()
	eventually(t, 5*time.Second, "the transfer to start", func() bool { return l.meta.raft.transferring() })
	res, err := l.Submit(bfAdd("k", "during")).Wait(ctx)
	if err != nil || res.Err != nil {
		t.Fatalf("a write during the transfer: %v %v, want it applied", err, res)
	}
	if err := <-done; err == nil {
		t.Fatal("the transfer to a node that is down succeeded")
	}
	if !exists(t, l, "k", "during") {
		t.Fatal("the write made during the transfer is not there")
	}
}
