package cluster

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestRemovedReason: when a node concludes it is out of the cluster (README
// "Running in production": a removed node says so and is not taken back with
// its old state), and that raft outweighs gossip.
func TestRemovedReason(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    selfView
		want string // a part of the reason; "" for a member
	}{
		{"a member led by its leader", selfView{In: true, Led: true, Servers: 3, Member: true}, ""},
		{"a new node not yet in any configuration", selfView{Servers: 0}, ""},
		{"a new node added but not yet committed is no removed member", selfView{In: true, Servers: 3}, ""},
		{"a committed member whose configuration lacks it", selfView{Servers: 2, Member: true}, "removed from the cluster's configuration"},
		{"a member with no configuration at all is not concluded removed", selfView{Member: true}, ""},
		{"a leader said so over gossip and nobody replicates to it", selfView{In: true, Servers: 3, Member: true, Hint: "n1"}, "leader n1 says so"},
		{"gossip never outweighs raft: led, the hint is ignored", selfView{In: true, Led: true, Servers: 3, Member: true, Hint: "n1"}, ""},
		{"a hint to a node that never was a member means nothing", selfView{Servers: 3, Hint: "n1"}, ""},
		{"left for good and not led", selfView{Left: true, Member: true, Servers: 3}, "left the cluster for good"},
		{"left, but a leader replicates to it again (added back as new)", selfView{Left: true, In: true, Led: true, Servers: 3}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := removedReason(tc.v)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("removedReason(%+v) = %q, want %q", tc.v, got, tc.want)
			}
		})
	}
}

// TestLeaveThroughLeader: a node recovered on an empty log finds the leader
// among its recorded peers and has it remove the node, collecting the gossip
// addresses to join through; without a leader it says why, per peer.
func TestLeaveThroughLeader(t *testing.T) {
	peers := []Peer{{ID: "n1", Raft: "a1"}, {ID: "n2", Raft: "a2"}, {ID: "n3", Raft: "a3"}}
	statuses := map[string]peerStatus{
		"a2": {ID: "n2", Leader: "n3", Gossip: "g2"},
		"a3": {ID: "n3", Leader: "n3", Gossip: "g3"},
	}
	status := func(_ context.Context, id, addr string) (peerStatus, error) {
		ps, ok := statuses[addr]
		if !ok || ps.ID != id {
			return ps, errConnLost
		}
		return ps, nil
	}
	var removedAt []string
	remove := func(_ context.Context, id, addr string) error {
		removedAt = append(removedAt, id+"@"+addr) // the leader's id, to dial it as itself
		return nil
	}
	gossip, err := leaveThroughLeader("n1", peers, status, remove)
	if err != nil || !reflect.DeepEqual(removedAt, []string{"n3@a3"}) || !reflect.DeepEqual(gossip, []string{"g2"}) {
		t.Fatalf("asked %q to remove, gossip %q, err %v; want the leader a3 and g2", removedAt, gossip, err)
	}

	// The leader refuses, then nobody knows a leader: every failure is named.
	removedAt = nil
	refuse := func(_ context.Context, _, addr string) error {
		removedAt = append(removedAt, addr)
		return ErrNotLeader
	}
	_, err = leaveThroughLeader("n1", peers, status, refuse)
	if !errors.Is(err, ErrNotLeader) || !strings.Contains(err.Error(), "n3") || len(removedAt) != 2 {
		t.Fatalf("refused twice: %v (asked %q)", err, removedAt)
	}
	statuses = map[string]peerStatus{"a2": {ID: "n2"}}
	_, err = leaveThroughLeader("n1", peers, status, remove)
	if !errors.Is(err, errConnLost) || !strings.Contains(err.Error(), "n3") {
		t.Fatalf("no leader known: %v", err)
	}
	statuses = map[string]peerStatus{"a2": {ID: "n2"}, "a3": {ID: "n3"}}
	if _, err = leaveThroughLeader("n1", peers, status, remove); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("peers answer, none knows a leader: %v", err)
	}
	// The node never asks itself (its Raft has not started).
	statuses = map[string]peerStatus{"a1": {ID: "n1", Leader: "n1"}}
	removedAt = nil
	if _, err = leaveThroughLeader("n1", peers, status, remove); err == nil || len(removedAt) != 0 {
		t.Fatalf("asked itself: %v %q", err, removedAt)
	}
}
