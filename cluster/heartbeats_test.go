package cluster

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A real heartbeat from a leader's node reaches, as a heartbeat in each
// one's own term, only the other groups that follow that node and heard a
// heartbeat of their own from it lately: not a group following another
// node, not a candidate, not the group it came for, not one whose leader
// has gone quiet.
func TestSharedHeartbeatsReachOnlyFollowersOfTheSender(t *testing.T) {
	h := newHeartbeats(heartbeatWindow)
	got := map[int][]*raft.AppendEntriesRequest{}
	add := func(gid int, follower bool, leader raft.ServerAddress, term uint64, heard bool) {
		h.register(gid, hbGroup{
			handle: func(rpc raft.RPC) {
				got[gid] = append(got[gid], rpc.Command.(*raft.AppendEntriesRequest))
				rpc.Respond(&raft.AppendEntriesResponse{Term: term, Success: true}, nil)
			},
			state: func() (bool, raft.ServerAddress, uint64) { return follower, leader, term },
			heard: func(time.Time) bool { return heard },
		})
	}
	add(1, true, "a:1", 7, true)  // the group the heartbeat is for
	add(2, true, "a:1", 9, true)  // follows a: gets one, in term 9
	add(3, true, "b:1", 4, true)  // follows b
	add(4, false, "a:1", 5, true) // a candidate
	add(5, true, "a:1", 3, false) // no heartbeat of its own from a lately
	req := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("na"), Addr: []byte("a:1")}, Term: 7}
	if !isHeartbeat(req) {
		t.Fatal("a heartbeat not taken for one")
	}
	h.passOn(req, 1)
	if len(got[2]) != 1 || got[2][0].Term != 9 || string(got[2][0].Addr) != "a:1" || !isHeartbeat(got[2][0]) {
		t.Fatalf("group 2 got %+v, want one heartbeat from a:1 in term 9", got[2])
	}
	for _, gid := range []int{1, 3, 4, 5} {
		if len(got[gid]) != 0 {
			t.Errorf("group %d got %d heartbeats", gid, len(got[gid]))
		}
	}
	h.unregister(2)
	h.passOn(req, 1)
	if len(got[2]) != 1 {
		t.Fatal("an unregistered group still hears shared heartbeats")
	}
}

// A node vouches for itself for the window after the heartbeat it answered
// was sent, and not after.
func TestVouchedForTheWindow(t *testing.T) {
	h := newHeartbeats(time.Minute)
	if h.vouched("a:1") {
		t.Fatal("vouched before any answer")
	}
	h.answered("a:1", time.Now())
	if !h.vouched("a:1") || h.vouched("b:1") {
		t.Fatal("an answer vouches for its node only")
	}
	h.answered("a:1", time.Now().Add(-time.Hour)) // older than what is known: ignored
	if !h.vouched("a:1") {
		t.Fatal("an older answer replaced a newer one")
	}
	h.answered("b:1", time.Now().Add(-2*time.Minute))
	if h.vouched("b:1") {
		t.Fatal("vouched for by an answer older than the window")
	}
	if (*heartbeats)(nil).vouched("a:1") {
		t.Fatal("no heartbeats: nothing vouched")
	}
}
