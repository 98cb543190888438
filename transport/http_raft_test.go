package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/cluster"
)

// raftBackend is the fake backend with the Raft operations: a follower
// answers ErrNotLeader, a leader removes or transfers as asked.
type raftBackend struct {
	*fakeBackend
	removed    []string
	transferTo []string
	err        error
}

var _ RaftOperator = (*raftBackend)(nil)

func (b *raftBackend) RaftPeers(context.Context, int) (cluster.RaftPeers, error) {
	return cluster.RaftPeers{Node: "n1", Leader: "n1", Servers: []cluster.RaftPeer{
		{ID: "n1", Address: "10.0.0.1:6481", State: "leader", Voter: true, Reachable: true, LastIndex: 9}}}, nil
}

func (b *raftBackend) RemovePeer(_ context.Context, _ int, id string) error {
	if b.err != nil {
		return b.err
	}
	b.removed = append(b.removed, id)
	return nil
}

func (b *raftBackend) TransferLeader(_ context.Context, _ int, id string) (string, error) {
	if b.err != nil {
		return "", b.err
	}
	b.transferTo = append(b.transferTo, id)
	return "n2", nil
}

func TestHTTPRaftRoutes(t *testing.T) {
	be := &raftBackend{fakeBackend: newFakeBackend(t)}
	h := NewHTTP(Config{}, be).Handler()
	local := "127.0.0.1:5555"

	code, body := httpGet(t, h, "GET", "/v1/raft/peers")
	var peers cluster.RaftPeers
	if code != 200 || json.Unmarshal([]byte(body), &peers) != nil || len(peers.Servers) != 1 || peers.Servers[0].LastIndex != 9 {
		t.Fatalf("GET /v1/raft/peers: %d %s", code, body)
	}

	// Changes are writes: with no credentials configured, loopback only.
	if code, _ := httpGet(t, h, "POST", "/v1/raft/remove-peer?id=n3"); code != http.StatusUnauthorized || len(be.removed) != 0 {
		t.Errorf("remove-peer from a stranger: %d, removed %v", code, be.removed)
	}
	if code, body := httpFrom(t, h, "POST", "/v1/raft/remove-peer?id=n3", local); code != 200 || len(be.removed) != 1 || be.removed[0] != "n3" {
		t.Errorf("remove-peer: %d %s, removed %v", code, body, be.removed)
	}
	if code, body := httpFrom(t, h, "POST", "/v1/raft/remove-peer", local); code != 400 || !strings.Contains(body, "missing ?id=") {
		t.Errorf("remove-peer without id: %d %s", code, body)
	}
	if code, body := httpFrom(t, h, "POST", "/v1/raft/transfer-leader?id=n2", local); code != 200 || !strings.Contains(body, `"leader": "n2"`) {
		t.Errorf("transfer-leader: %d %s", code, body)
	}

	for _, c := range []struct {
		err  error
		code int
	}{
		{fmt.Errorf("%w: n9", cluster.ErrUnknownPeer), 404},
		{cluster.ErrLastVoter, 409},
		{cluster.ErrNoOtherVoter, 409},
		{cluster.ErrIndeterminate, 503},
	} {
		be.err = c.err
		if code, body := httpFrom(t, h, "POST", "/v1/raft/remove-peer?id=n9", local); code != c.code || !strings.Contains(body, c.err.Error()) {
			t.Errorf("remove-peer failing with %v: %d %s", c.err, code, body)
		}
	}

	// A follower sends the client on to the leader.
	be.err = cluster.ErrNotLeader
	be.set(func(b *fakeBackend) { b.follower = true })
	code, body = httpFrom(t, h, "POST", "/v1/raft/transfer-leader", local)
	if code != http.StatusTemporaryRedirect || !strings.Contains(body, `"leader_http_addr": "127.0.0.1:8080"`) {
		t.Errorf("transfer-leader on a follower: %d %s (want a redirect to the leader)", code, body)
	}
}

// TestHTTPRaftRoutesWithoutOperator: a backend without the operations says
// so rather than failing obscurely.
func TestHTTPRaftRoutesWithoutOperator(t *testing.T) {
	h := NewHTTP(Config{}, newFakeBackend(t)).Handler()
	if code, body := httpGet(t, h, "GET", "/v1/raft/peers"); code != http.StatusNotImplemented {
		t.Errorf("GET /v1/raft/peers: %d %s", code, body)
	}
}
