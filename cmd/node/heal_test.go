package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Membership that heals (issue 10): the README's topology, n1 started without
// --join and n2, n3 joining it.

// TestSeedRestartHeals: the leader n1, the seed started without --join, is
// killed and started again as before. Within 10 s every node lists all three
// alive, and with --dead-server-timeout 5s the live seed is never removed
// (watched for three times that).
func TestSeedRestartHeals(t *testing.T) {
	c, err := nodeproc.StartCluster(bin(t), t.TempDir(), 3, "--log-level", "debug", "--dead-server-timeout", "5s")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	lc := &localCluster{Cluster: c, t: t}
	seed := c.Nodes[0]
	// StartCluster gives the first node no --join, the others --join of it.
	if seed.ID != "n1" {
		t.Fatalf("the seed is %s, want n1", seed.ID)
	}
	// Make the seed the leader, as in the report.
	if l := lc.leader(10 * time.Second); l != seed {
		mustPost(t, l.Proc, "/v1/raft/transfer-leader?id=n1")
		eventually(t, 10*time.Second, "n1 to lead", func() bool {
			st, err := seed.Status()
			return err == nil && st.Role == "leader"
		})
	}
	if err := lc.proc(seed).client(2).BFAdd(bg(), "heal", "before").Err(); err != nil {
		t.Fatal(err)
	}

	seed.Kill()
	lc.leader(10 * time.Second) // n2 or n3 takes over
	eventually(t, 10*time.Second, "the others to see n1 gone", func() bool {
		return nodeHealth(c.Nodes[1])["n1"] != "alive"
	})
	if err := seed.Restart(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	eventually(t, 10*time.Second, "every node to list n1, n2 and n3 alive", func() bool {
		for _, m := range c.Nodes {
			h := nodeHealth(m)
			for _, id := range []string{"n1", "n2", "n3"} {
				if h[id] != "alive" {
					return false
				}
			}
		}
		return true
	})
	t.Logf("all three alive everywhere %v after the restart", time.Since(restarted).Round(10*time.Millisecond))
	if !strings.Contains(seed.Logs(), "joined gossip") {
		t.Errorf("n1 does not say it joined gossip:\n%s", seed.Logs())
	}

	// Never removed while alive: watch three dead-server timeouts.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		l, err := c.Leader(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if voters, err := l.Voters(); err == nil && !slices.Contains(voters, "n1") {
			t.Fatalf("the leader %s removed the live n1: voters %v\n%s", l.ID, voters, l.Logs())
		}
		time.Sleep(250 * time.Millisecond)
	}
	lc.proc(seed).waitReady(10 * time.Second)
	if ok, err := lc.proc(seed).client(2).BFExists(bg(), "heal", "before").Result(); err != nil || !ok {
		t.Fatalf("n1 lost a write: %v %v", ok, err)
	}
}

// TestRemovedNodeReports: a node removed while it runs (remove-peer), and a
// node that left and is started again on its data directory, say so on
// /readyz, /v1/status, ROLE and in their log, and are not added back with
// their old state.
func TestRemovedNodeReports(t *testing.T) {
	c := startCluster(t, 3)
	l := c.leader(10 * time.Second)
	f := c.followers()
	removed, leaving := f[0], f[1]
	defer func() {
		if t.Failed() {
			for _, m := range c.Nodes {
				t.Logf("%s\n%s", m.ID, m.Logs())
			}
		}
	}()

	// A node counts itself a member, and gossips so, once the entry that
	// added it is committed; the leader adds back a node removed before it
	// has heard so, as a new one, so remove again if that happened.
	eventually(t, 10*time.Second, removed.ID+"'s members file to say it is a member", func() bool {
		b, err := os.ReadFile(filepath.Join(removed.Dir, "members.json"))
		return err == nil && strings.Contains(string(b), `"member": true`)
	})
	for attempt := 1; ; attempt++ {
		mustPost(t, l.Proc, "/v1/raft/remove-peer?id="+removed.ID)
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !reportsRemoved(t, c.proc(removed), "removed from the cluster's configuration") {
			time.Sleep(50 * time.Millisecond)
		}
		if reportsRemoved(t, c.proc(removed), "removed from the cluster's configuration") {
			break
		}
		if attempt == 3 {
			st, _ := removed.Status()
			t.Fatalf("%s does not report it was removed: status %+v", removed.ID, st)
		}
	}
	if !strings.Contains(removed.Logs(), "level=ERROR msg=\"this node was removed from the cluster's configuration") {
		t.Errorf("no ERROR line says the node was removed:\n%s", removed.Logs())
	}

	// The other follower leaves for good (it exits), then is started again.
	mustPost(t, leaving.Proc, "/v1/leave")
	select {
	case <-leaving.Exited():
	case <-time.After(30 * time.Second):
		t.Fatal("the node that left did not exit")
	}
	if err := leaving.Restart(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, leaving.ID+" to report it left", func() bool {
		return reportsRemoved(t, c.proc(leaving), "left the cluster for good")
	})

	// Neither is added back with its old state.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if voters, err := l.Voters(); err == nil && len(voters) != 1 {
			t.Fatalf("a removed node was added back: voters %v", voters)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := c.proc(l).client(2).BFAdd(bg(), "k", "after").Err(); err != nil {
		t.Fatalf("the remaining voter does not serve: %v", err)
	}
}

// reportsRemoved reports whether p says, on every face, that it is out of the
// configuration for the reason why.
func reportsRemoved(t *testing.T, p *proc, why string) bool {
	resp, err := p.HTTPDo("GET", "/readyz")
	if err != nil {
		return false
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), why) ||
		!strings.Contains(string(body), "move its data directory") {
		return false
	}
	st, err := p.Status()
	if err != nil || st.Role != "removed" {
		return false
	}
	role, err := p.client(2).Do(bg(), "ROLE").Slice()
	return err == nil && len(role) == 6 && role[0] == "removed"
}

// nodeHealth is a node's GET /v1/nodes as id -> health (empty on error).
func nodeHealth(m *nodeproc.Member) map[string]string {
	out := map[string]string{}
	resp, err := m.HTTPDo("GET", "/v1/nodes")
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	var nodes []struct {
		ID     string `json:"id"`
		Health string `json:"health"`
	}
	if json.NewDecoder(resp.Body).Decode(&nodes) == nil {
		for _, n := range nodes {
			out[n.ID] = n.Health
		}
	}
	return out
}

func mustPost(t *testing.T, p *nodeproc.Proc, path string) {
	t.Helper()
	resp, err := p.HTTPDo("POST", path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", path, resp.Status, b)
	}
}
