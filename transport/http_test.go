package transport

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cluster"
)

// httpGet sends method path to h from httptest's default peer, 192.0.2.1,
// which is not loopback.
func httpGet(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	return httpFrom(t, h, method, path, "")
}

// httpFrom sends method path to h from the peer remote ("host:port"; empty
// for httptest's default).
func httpFrom(t *testing.T, h http.Handler, method, path, remote string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if remote != "" {
		req.RemoteAddr = remote
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestHTTPHealthAndReady(t *testing.T) {
	be := newFakeBackend(t)
	h := NewHTTP(Config{}, be).Handler()
	if code, body := httpGet(t, h, "GET", "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz %d %q", code, body)
	}
	if code, _ := httpGet(t, h, "GET", "/readyz"); code != 200 {
		t.Errorf("/readyz while ready: %d", code)
	}
	be.set(func(b *fakeBackend) { b.ready, b.problem = false, "disk full: 3 bytes free" })
	if code, body := httpGet(t, h, "GET", "/readyz"); code != 503 || body != "not ready: disk full: 3 bytes free\n" {
		t.Errorf("/readyz while not ready: %d %q (want the reason)", code, body)
	}
	if code, _ := httpGet(t, h, "GET", "/metrics"); code != 404 {
		t.Errorf("/metrics without a registry: %d", code)
	}
}

// TestHTTPReadyPerShard: a sharded node's /readyz has a line per shard, and
// /readyz?shard=N answers for shard N alone: 200 for one it serves, 503 for
// one without a leader or not held here, 404 for one the cluster lacks, 400
// for a number that is none.
func TestHTTPReadyPerShard(t *testing.T) {
	be := newFakeBackend(t)
	h := NewHTTP(Config{}, be).Handler()
	be.set(func(b *fakeBackend) {
		b.readyMap = &cluster.ShardReadiness{Shard: -1, Held: true, Leader: "n1", Role: "leader", CaughtUp: true, Serving: true}
		b.readyShards = []cluster.ShardReadiness{
			{Shard: 0, Held: true, Leader: "n1", Role: "leader", Applied: 7, Commit: 7, CaughtUp: true, Serving: true},
			{Shard: 1, Held: true, Role: "candidate", Applied: 5, Commit: 5, CaughtUp: true, Problem: "shard 1 has no leader among its replicas"},
			{Shard: 2, Leader: "n4"},
		}
	})
	code, body := httpGet(t, h, "GET", "/readyz")
	if code != 200 || !strings.HasPrefix(body, "ready\n") || !strings.Contains(body, "\nshard 1: no leader; this node: candidate, applied 5, commit 5, caught up\n") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	for _, c := range []struct {
		path string
		code int
		says string
	}{
		{"/readyz?shard=0", 200, "shard 0 ready\nshard 0: leader n1"},
		{"/readyz?shard=1", 503, "shard 1 not ready: shard 1 has no leader among its replicas\n"},
		{"/readyz?shard=2", 503, "holds no replica of shard 2"},
		{"/readyz?shard=3", 404, "no such shard: shard 3 of 3"},
		{"/readyz?shard=-1", 400, "bad shard"},
		{"/readyz?shard=x", 400, "bad shard \"x\""},
		{"/readyz?shard=", 400, "bad shard"},
	} {
		if code, body := httpGet(t, h, "GET", c.path); code != c.code || !strings.Contains(body, c.says) {
			t.Errorf("%s: %d %q, want %d and %q", c.path, code, body, c.code, c.says)
		}
	}
	// Without shards, shard 0 is the one group: it answers as the node does.
	be.set(func(b *fakeBackend) { b.readyMap, b.readyShards, b.ready, b.problem = nil, nil, false, "no leader" })
	if code, body := httpGet(t, h, "GET", "/readyz?shard=0"); code != 503 || body != "shard 0 not ready: no leader\n" {
		t.Errorf("/readyz?shard=0 without shards: %d %q", code, body)
	}
	if code, _ := httpGet(t, h, "GET", "/readyz?shard=1"); code != 404 {
		t.Errorf("/readyz?shard=1 without shards: %d", code)
	}
}

func TestHTTPStatusAndNodes(t *testing.T) {
	be := newFakeBackend(t)
	h := NewHTTP(Config{}, be).Handler()
	code, body := httpGet(t, h, "GET", "/v1/status")
	var st cluster.Status
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.ID != "n1" || st.Role != "leader" || st.Term != 3 {
		t.Errorf("/v1/status %d %q %v", code, body, err)
	}
	code, body = httpGet(t, h, "GET", "/v1/nodes")
	var nodes []cluster.NodeInfo
	if err := json.Unmarshal([]byte(body), &nodes); code != 200 || err != nil || len(nodes) != 2 || nodes[1].Health != "suspect" {
		t.Errorf("/v1/nodes %d %q %v", code, body, err)
	}
	if !strings.Contains(body, `"resp_addr": "127.0.0.1:6380"`) {
		t.Errorf("/v1/nodes field names: %s", body)
	}
}

func TestHTTPFilters(t *testing.T) {
	ts := mustStartServer(t, Config{})
	c := dialRaw(t, ts.addr)
	c.do("BF.RESERVE", "b", "0.01", "1000")
	c.do("BF.ADD", "b", "x")
	c.do("CF.ADD", "a", "x")
	h := NewHTTP(Config{}, ts.be).Handler()
	code, body := httpGet(t, h, "GET", "/v1/filters")
	var fs []filterJSON
	if err := json.Unmarshal([]byte(body), &fs); code != 200 || err != nil {
		t.Fatalf("/v1/filters %d %q %v", code, body, err)
	}
	if len(fs) != 2 || fs[0].Name != "a" || fs[0].Kind != "cuckoo" || fs[1].Name != "b" ||
		fs[1].Kind != "scalable-bloom" || fs[1].Capacity != 1000 || fs[1].Items != 1 || fs[1].Memory == 0 {
		t.Errorf("/v1/filters %+v", fs)
	}
}

// TestHTTPLeave: with no credentials configured, an operator on the node's own
// host can make it leave (authentication is in http_auth_test.go).
func TestHTTPLeave(t *testing.T) {
	const local = "127.0.0.1:40000"
	be := newFakeBackend(t)
	h := NewHTTP(Config{}, be).Handler()
	if code, _ := httpFrom(t, h, "GET", "/v1/leave", local); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/leave %d", code)
	}
	be.set(func(b *fakeBackend) { b.leaveErr = errors.New("would lose quorum") })
	if code, body := httpFrom(t, h, "POST", "/v1/leave", local); code != 503 || !strings.Contains(body, "would lose quorum") {
		t.Errorf("failed leave %d %q", code, body)
	}
	be.set(func(b *fakeBackend) { b.leaveErr = nil })
	if code, body := httpFrom(t, h, "POST", "/v1/leave", local); code != 200 || !strings.Contains(body, `"left": true`) {
		t.Errorf("leave %d %q", code, body)
	}
	be.mu.Lock()
	left := be.left
	be.mu.Unlock()
	if !left {
		t.Error("backend did not leave")
	}
}

// TestHTTPMetrics: command counts and latencies by command and outcome,
// connections, and the node gauges, on a registry shared with other collectors.
func TestHTTPMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	ts := mustStartServer(t, Config{Registry: reg})
	c := dialRaw(t, ts.addr)
	c.do("BF.ADD", "k", "a")
	c.do("BF.EXISTS", "k", "a")
	c.do("BF.RESERVE", "k", "x", "1")
	c.do("NOPE")
	h := NewHTTP(Config{Registry: reg}, ts.be).Handler()
	code, body := httpGet(t, h, "GET", "/metrics")
	if code != 200 {
		t.Fatalf("/metrics %d", code)
	}
	for _, want := range []string{
		`rookery_commands_total{command="bf.add",outcome="ok"} 1`,
		`rookery_commands_total{command="bf.exists",outcome="ok"} 1`,
		`rookery_commands_total{command="bf.reserve",outcome="error"} 1`,
		`rookery_commands_total{command="unknown",outcome="error"} 1`,
		`rookery_command_duration_seconds_count{command="bf.add",outcome="ok"} 1`,
		"rookery_client_connections 1",
		"rookery_client_connections_accepted_total 1",
		"rookery_raft_applied_index 1",
		"rookery_raft_commit_index 1",
		"rookery_raft_term 3",
		"rookery_filters 1",
		"rookery_filter_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
