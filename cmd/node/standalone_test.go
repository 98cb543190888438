package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestNodeThatCannotFormACluster is issue 19's point 6, with point 7's PING:
// a node started with neither --bootstrap-expect nor --join, on an empty data
// directory, says at start (a WARN line) and on /readyz (503) that it cannot
// form a cluster and which flags to add; `rookery wait` and `status` pass
// that on. It still answers PING with PONG before any leader is known, as
// Redis does while it loads.
func TestNodeThatCannotFormACluster(t *testing.T) {
	args := append([]string{"--id", "n1", "--data-dir", filepath.Join(t.TempDir(), "n1")}, nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, args...)
	const says = "this node cannot form a cluster"
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := p.HTTPDo(http.MethodGet, "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, says) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz never said %q; last %q\n%s", says, body, p.Logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, flag := range []string{"--bootstrap-expect 1", "--bootstrap-expect N --join", "--join HOST:PORT"} {
		if !strings.Contains(body, flag) {
			t.Errorf("/readyz does not name %q: %q", flag, body)
		}
	}
	if logs := p.Logs(); !strings.Contains(logs, "level=WARN msg=\""+says) {
		t.Errorf("no WARN line at start:\n%s", logs)
	}

	c := p.client(2)
	if pong, err := c.Ping(bg()).Result(); err != nil || pong != "PONG" {
		t.Errorf("PING before a leader is known: %q %v", pong, err)
	}
	if err := c.Do(bg(), "BF.ADD", "k", "a").Err(); err == nil || !strings.HasPrefix(err.Error(), "CLUSTERDOWN") {
		t.Errorf("a write with no leader: %v", err)
	}

	code, _, errOut := runToolEnv(t, nil, "wait", "--addr", p.HTTP, "--timeout", "1s")
	if code != 1 || !strings.Contains(errOut, says) {
		t.Errorf("wait: exit %d\n%s", code, errOut)
	}
	code, out, _ := runToolEnv(t, nil, "status", "--addr", p.HTTP)
	if code != 0 || !strings.Contains(out, "Ready          no: "+says) {
		t.Errorf("status: exit %d\n%s", code, out)
	}
}

// TestRemovedNodeSaysSo is issue 19's point 7: a running node removed with
// `rookery raft remove-peer` answers writes and reads with REMOVED, saying
// what to do, not CLUSTERDOWN, while the others serve; `rookery raft
// transfer-leader` naming the leader says nothing moved.
func TestRemovedNodeSaysSo(t *testing.T) {
	c := startOpsCluster(t)
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := runToolEnv(t, nil, "raft", "transfer-leader", l.ID, "--addr", l.HTTP)
	if code != 0 || out != l.ID+" leads already: nothing moved\n" {
		t.Errorf("transfer-leader to the leader: exit %d %q", code, out)
	}
	if now, err := c.Leader(10 * time.Second); err != nil || now != l {
		t.Errorf("after a transfer to the leader, the leader is %v (%v)", now, err)
	}

	fs, err := c.Followers(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gone := fs[0]
	// A node counts itself a member, and gossips so, once the entry that
	// added it is committed; the leader adds back a node removed before it
	// has heard so, as a new one (heal_test.go): wait for it, and remove
	// again if that happened all the same.
	eventually(t, 10*time.Second, gone.ID+"'s members file to say it is a member", func() bool {
		b, err := os.ReadFile(filepath.Join(gone.Dir, "members.json"))
		return err == nil && strings.Contains(string(b), `"member": true`)
	})
	rc := gone.Proc.RESP
	cl := client(t, rc, 2)
	var werr error
	for attempt := 1; ; attempt++ {
		if code, _, errOut := runToolEnv(t, nil, "raft", "remove-peer", gone.ID, "--addr", l.HTTP); code != 0 && attempt == 1 {
			t.Fatalf("remove-peer %s: exit %d\n%s", gone.ID, code, errOut)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			werr = cl.Do(bg(), "BF.ADD", "k", "a").Err()
			if werr != nil && strings.HasPrefix(werr.Error(), "REMOVED") || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if werr != nil && strings.HasPrefix(werr.Error(), "REMOVED") {
			break
		}
		if attempt == 3 {
			t.Fatalf("a write to the removed %s: %v, want REMOVED\n%s", gone.ID, werr, gone.Proc.Logs())
		}
	}
	for _, want := range []string{"removed from the cluster's configuration", "send requests to another node", "--join"} {
		if !strings.Contains(werr.Error(), want) {
			t.Errorf("the removed node's error lacks %q: %v", want, werr)
		}
	}
	if err := cl.Do(bg(), "BF.EXISTS", "k", "a").Err(); err == nil || !strings.HasPrefix(err.Error(), "REMOVED") {
		t.Errorf("a read on the removed node: %v, want REMOVED", err)
	}
	if pong, err := cl.Ping(bg()).Result(); err != nil || pong != "PONG" {
		t.Errorf("PING on the removed node: %q %v", pong, err)
	}
	if err := client(t, l.RESP, 2).Do(bg(), "BF.ADD", "k", "a").Err(); err != nil {
		t.Errorf("the leader after the removal: %v", err)
	}
}
