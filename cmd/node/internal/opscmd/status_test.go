package opscmd

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rookerydb/rookery/cluster"
)

// statusOf runs `rookery status` against a node that answers /v1/status with
// st and /v1/shards with shards (404 when nil), and returns its output.
func statusOf(t *testing.T, st cluster.Status, shards []cluster.ShardReport) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/status":
			json.NewEncoder(w).Encode(st)
		case r.URL.Path == "/v1/shards" && shards != nil:
			json.NewEncoder(w).Encode(shards)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	if code := statusCommand([]string{"--addr", strings.TrimPrefix(srv.URL, "http://")}, noEnv, &out, &errOut); code != 0 {
		t.Fatalf("status: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	return out.String()
}

// TestStatusLabelsTheMapGroup: on a sharded node, status says that its role,
// leader, term and indexes are the map group's, and gives a line per shard:
// this node's replica with the shard's leader and term, or the leader of a
// shard it does not hold. A node of a cluster without shards prints as it
// always has.
func TestStatusLabelsTheMapGroup(t *testing.T) {
	st := cluster.Status{ID: "n2", Role: "follower", LeaderID: "n1", LeaderRESP: "10.0.0.1:6479", Term: 4, CommitIndex: 12,
		AppliedIndex: 12, Ready: true, Sharded: true, Filters: 3, MemoryBytes: 300,
		Shards: []cluster.ShardStatus{
			{Shard: 0, Role: "leader", LeaderID: "n2", Term: 2, CommitIndex: 40, AppliedIndex: 40, Filters: 2, MemoryBytes: 200},
			{Shard: 2, Role: "candidate", Term: 7, CommitIndex: 9, AppliedIndex: 9, Filters: 1, MemoryBytes: 100},
		}}
	reps := []cluster.ShardReplica{{ID: "n1", RESPAddr: "10.0.0.1:6479"}, {ID: "n2", RESPAddr: "10.0.0.2:6479"}, {ID: "n3", RESPAddr: "10.0.0.3:6479"}}
	shards := []cluster.ShardReport{
		{ShardInfo: cluster.ShardInfo{ID: 0, Leader: "n2", Replicas: reps}},
		{ShardInfo: cluster.ShardInfo{ID: 1, Leader: "n3", Replicas: reps}},
		{ShardInfo: cluster.ShardInfo{ID: 2, Replicas: reps}},
	}
	out := statusOf(t, st, shards)
	for _, want := range []string{
		"Role (map group)           follower\n",
		"Leader (map group)         n1 (RESP 10.0.0.1:6479)\n",
		"Term (map group)           4\n",
		"Applied Index (map group)  12\n",
		"Shard 0                    leader, leader n2 (RESP 10.0.0.2:6479), term 2, commit 40, applied 40, 2 filters, 200 bytes\n",
		"Shard 1                    not held here, leader n3 (RESP 10.0.0.3:6479)\n",
		"Shard 2                    candidate, no leader, term 7, commit 9, applied 9, 1 filters, 100 bytes\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "Shard 0"), strings.Index(out, "Shard 1"); i < 0 || j < i {
		t.Errorf("shards out of order:\n%s", out)
	}
	// A node too old for /v1/shards: its own replicas still show.
	if out := statusOf(t, st, nil); !strings.Contains(out, "Shard 2                    candidate, no leader") || strings.Contains(out, "Shard 1") {
		t.Errorf("without /v1/shards:\n%s", out)
	}
	one := statusOf(t, cluster.Status{ID: "n1", Role: "leader", LeaderID: "n1", Term: 3, Ready: true}, nil)
	if !strings.Contains(one, "Role           leader\n") || !strings.Contains(one, "Term           3\n") || strings.Contains(one, "map group") ||
		strings.Contains(one, "Shard") {
		t.Errorf("a cluster without shards:\n%s", one)
	}
}
