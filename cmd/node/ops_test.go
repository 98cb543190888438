package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runOps runs command name in this process, through the binary's table of
// commands as `rookery NAME ARGS` would, with an empty environment.
func runOps(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	cmd, ok := commands().Lookup(name)
	if !ok {
		t.Fatalf("no command %q", name)
	}
	var out, errb bytes.Buffer
	code := cmd.Run(args, func(string) (string, bool) { return "", false }, &out, &errb)
	t.Logf("rookery %s %s -> %d\n%s%s", name, strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// tableRows are the lines of a table after its header.
func tableRows(out string) []string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 2 {
		return nil
	}
	return lines[1:]
}

func startOpsCluster(t *testing.T) *nodeproc.Cluster {
	t.Helper()
	c, err := nodeproc.StartCluster(bin(t), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestOpsMembersStatusListPeers: the read-only commands against a real
// three-node cluster.
func TestOpsMembersStatusListPeers(t *testing.T) {
	c := startOpsCluster(t)
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	addr := c.Nodes[1].HTTP

	// Gossip may take a moment to tell every node of every other, and Raft
	// to bring it the configuration.
	var rows []string
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, out, _ := runOps(t, "members", "--addr", addr)
		rows = tableRows(out)
		alive := 0
		for _, r := range rows {
			// Alive to gossip, and a voter in this node's configuration: a
			// node ready with a leader may not have the configuration yet.
			if f := strings.Fields(r); f[2] == "alive" && f[4] == "voter" {
				alive++
			}
		}
		if code == 0 && len(rows) == 3 && alive == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("members: want 3 alive, got %d rows:\n%s", len(rows), out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, r := range rows {
		f := strings.Fields(r)
		if f[0] != c.Nodes[i].ID || f[1] != c.Nodes[i].Raft || f[4] != "voter" || f[5] != c.Nodes[i].RESP {
			t.Errorf("members row %q: want %s at %s, a voter, RESP %s", r, c.Nodes[i].ID, c.Nodes[i].Raft, c.Nodes[i].RESP)
		}
	}

	code, out, _ := runOps(t, "raft", "list-peers", "--addr", addr)
	if code != 0 {
		t.Fatalf("list-peers: exit %d", code)
	}
	states := map[string]int{}
	for _, r := range tableRows(out) {
		f := strings.Fields(r)
		states[f[2]]++
		if f[3] != "true" {
			t.Errorf("list-peers row %q: want a voter", r)
		}
		if f[2] == "leader" && f[0] != l.ID {
			t.Errorf("list-peers names %s the leader, /v1/status says %s", f[0], l.ID)
		}
	}
	if states["leader"] != 1 || states["follower"] != 2 {
		t.Errorf("list-peers: want 1 leader and 2 followers, got %v", states)
	}

	code, out, _ = runOps(t, "raft", "list-peers", "--addr", addr, "-format", "json")
	var peers cluster.RaftPeers
	if code != 0 || json.Unmarshal([]byte(out), &peers) != nil || len(peers.Servers) != 3 || peers.Leader != l.ID {
		t.Errorf("list-peers -format json: exit %d, %+v", code, peers)
	}

	code, out, _ = runOps(t, "status", "--addr", addr)
	if code != 0 || !strings.Contains(out, "Node           "+c.Nodes[1].ID+"\n") || !strings.Contains(out, "Ready          yes\n") ||
		!strings.Contains(out, "Leader         "+l.ID+" (RESP "+l.RESP+")\n") {
		t.Errorf("status: exit %d\n%s", code, out)
	}

	if code, _, errs := runOps(t, "raft", "list-peers", "--addr", addr, "--bogus"); code != 2 || strings.Count(errs, "\n") != 1 {
		t.Errorf("an unknown flag: exit %d, want 2 and one line: %q", code, errs)
	}
}

// TestOpsTransferAndRemove: transfer-leader moves leadership (sent to a
// follower, which redirects to the leader), remove-peer removes a follower
// gone for good and refuses an unknown id.
func TestOpsTransferAndRemove(t *testing.T) {
	c := startOpsCluster(t)
	fs, err := c.Followers(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	to, via := fs[0], fs[1]
	if code, out, _ := runOps(t, "raft", "transfer-leader", to.ID, "--addr", via.HTTP); code != 0 ||
		out != "leadership transferred: "+to.ID+" leads now\n" {
		t.Fatalf("transfer-leader %s: exit %d %q", to.ID, code, out)
	}
	if l, err := c.Leader(10 * time.Second); err != nil || l != to {
		t.Fatalf("after transfer-leader %s the leader is %v (%v)", to.ID, l, err)
	}

	// Any voter: leadership leaves the leader.
	if code, _, _ := runOps(t, "raft", "transfer-leader", "--addr", to.HTTP); code != 0 {
		t.Fatalf("transfer-leader to any: exit %d", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if l, err := c.Leader(time.Second); err == nil && l != to {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still leads after transfer-leader", to.ID)
		}
	}

	fs, err = c.Followers(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gone := fs[0]
	gone.Kill()
	var keep *nodeproc.Member
	for _, m := range c.Nodes {
		if m != gone {
			keep = m
		}
	}
	if code, _, errs := runOps(t, "raft", "remove-peer", "n9", "--addr", keep.HTTP); code != 1 ||
		!strings.Contains(errs, "no such server in the raft configuration: n9") {
		t.Errorf("remove-peer of an unknown id: exit %d %q", code, errs)
	}
	if code, out, _ := runOps(t, "raft", "remove-peer", gone.ID, "--addr", keep.HTTP); code != 0 ||
		out != "removed "+gone.ID+" from the raft configuration\n" {
		t.Fatalf("remove-peer %s: exit %d %q", gone.ID, code, out)
	}
	code, out, _ := runOps(t, "raft", "list-peers", "--addr", keep.HTTP)
	rows := tableRows(out)
	if code != 0 || len(rows) != 2 || strings.Contains(out, gone.ID+" ") {
		t.Errorf("list-peers after removing %s: exit %d\n%s", gone.ID, code, out)
	}
	if voters, err := keep.Voters(); err != nil || len(voters) != 2 {
		t.Errorf("voters after removing %s: %v (%v)", gone.ID, voters, err)
	}
}

// TestOpsWait: wait returns once a starting node is ready, and fails with the
// reason once its timeout passes on a node that cannot become ready.
func TestOpsWait(t *testing.T) {
	args := append([]string{"--id", "n1", "--data-dir", filepath.Join(t.TempDir(), "n1"), "--bootstrap-expect", "1"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, args...)
	if code, out, _ := runOps(t, "wait", "--addr", p.HTTP, "--timeout", "30s"); code != 0 || out != p.HTTP+" is ready\n" {
		t.Fatalf("wait: exit %d %q", code, out)
	}
	if resp, err := p.HTTPDo("GET", "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("wait returned but /readyz: %v %v", resp, err)
	}

	// Waiting for a second member that never comes: never ready.
	args = append([]string{"--id", "m1", "--data-dir", filepath.Join(t.TempDir(), "m1"), "--bootstrap-expect", "2"},
		nodeproc.EphemeralAddrs()...)
	q := startProc(t, nil, args...)
	start := time.Now()
	code, _, errs := runOps(t, "wait", "--addr", q.HTTP, "--timeout", "1s")
	if code != 1 || !strings.Contains(errs, "not ready within 1s: "+q.HTTP+" (last: not ready: no leader)") {
		t.Errorf("wait on a node that cannot be ready: exit %d %q", code, errs)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("wait --timeout 1s took %v", el)
	}
}
