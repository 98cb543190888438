package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// Users (Redis ACLs) on real clusters. Users are state of group 0 (the only
// group, or the map group of a sharded cluster), so a user set through one
// node holds on every node at once: a node that has not applied the change
// yet catches up before it refuses an AUTH or a command. They survive a
// kill -9 of every node, and travel in a backup into a fresh cluster. One
// test per kind of cluster, each reusing its clusters for every step: these
// start real processes, built with -race.

const (
	checkerPass = "checker-pw"
	doomedPass  = "doomed-pw"
)

// userClient is a go-redis client of addr running as user (HELLO 3 AUTH).
func userClient(t *testing.T, addr, user, pass string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 3, Username: user, Password: pass,
		MaxRetries: -1, DialTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second})
	t.Cleanup(func() { c.Close() })
	return c
}

// mustRun runs f as a client would (notApplied) and fails the test on an
// error.
func mustRun(t *testing.T, what string, f func() error) {
	t.Helper()
	if err := notApplied(f); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// setUpUsers, through m: the filter names holding x, a user checker who may
// only BF.EXISTS in it, and a user doomed who may do anything.
func setUpUsers(t *testing.T, m *nodeproc.Member) {
	t.Helper()
	admin := client(t, m.RESP, 2)
	mustRun(t, "BF.ADD names x", func() error { return admin.BFAdd(bg(), "names", "x").Err() })
	mustRun(t, "ACL SETUSER checker", func() error {
		return admin.Do(bg(), "ACL", "SETUSER", "checker", "on", ">"+checkerPass, "~names", "+bf.exists").Err()
	})
	mustRun(t, "ACL SETUSER doomed", func() error {
		return admin.Do(bg(), "ACL", "SETUSER", "doomed", "on", ">"+doomedPass, "~*", "+@all").Err()
	})
}

// checkChecker asserts on each of nodes what checker may do there: BF.EXISTS
// names x, and nothing else.
func checkChecker(t *testing.T, when string, nodes []*nodeproc.Member) {
	t.Helper()
	for _, m := range nodes {
		u := userClient(t, m.RESP, "checker", checkerPass)
		var ok bool
		err := notApplied(func() (err error) { ok, err = u.BFExists(bg(), "names", "x").Result(); return err })
		if err != nil || !ok {
			t.Fatalf("%s: %s: checker's BF.EXISTS names x: %v %v", when, m.ID, ok, err)
		}
		for _, tc := range []struct {
			args []any
			want string
		}{
			{[]any{"BF.ADD", "names", "x"}, "NOPERM User checker has no permissions to run the 'bf.add' command"},
			{[]any{"BF.EXISTS", "other", "x"}, "NOPERM No permissions to access a key"},
			{[]any{"FLUSHALL"}, "NOPERM User checker has no permissions to run the 'flushall' command"},
		} {
			if err := notApplied(func() error { return u.Do(bg(), tc.args...).Err() }); err == nil || err.Error() != tc.want {
				t.Errorf("%s: %s: checker's %v: %v, want %q", when, m.ID, tc.args, err, tc.want)
			}
		}
		u.Close()
		// Nor may it drain a node over HTTP.
		req, err := http.NewRequest("POST", "http://"+m.HTTP+"/v1/drain?id="+m.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth("checker", checkerPass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %s: POST /v1/drain: %v", when, m.ID, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "needs +@admin") {
			t.Errorf("%s: %s: checker's POST /v1/drain: %d %s, want 403 naming +@admin", when, m.ID, resp.StatusCode, body)
		}
	}
}

// rawRESP is a bare connection, to see exactly what the server does to it.
type rawRESP struct {
	nc net.Conn
	br *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *rawRESP {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second))
	return &rawRESP{nc: nc, br: bufio.NewReader(nc)}
}

// do sends args and reads a one-line reply (+, -, :); err is the
// connection's end.
func (r *rawRESP) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(r.nc, b.String()); err != nil {
		return "", err
	}
	line, err := r.br.ReadString('\n')
	return strings.TrimRight(line, "\r\n"), err
}

// checkDeletedUser deletes doomed through a while doomed holds a connection
// on b: DELUSER answers once every node has applied the deletion, so b
// refuses that connection's very next command and closes it.
func checkDeletedUser(t *testing.T, a, b *nodeproc.Member) {
	t.Helper()
	conn := dialRESP(t, b.RESP)
	if got, err := conn.do("AUTH", "doomed", doomedPass); got != "+OK" {
		t.Fatalf("AUTH doomed on %s: %q %v", b.ID, got, err)
	}
	if got, err := conn.do("PING"); got != "+PONG" {
		t.Fatalf("doomed's PING on %s: %q %v", b.ID, got, err)
	}
	admin := client(t, a.RESP, 2)
	var n int64
	mustRun(t, "ACL DELUSER doomed", func() (err error) { n, err = admin.Do(bg(), "ACL", "DELUSER", "doomed").Int64(); return err })
	if n != 1 {
		t.Fatalf("ACL DELUSER doomed through %s: %d", a.ID, n)
	}
	got, err := conn.do("PING")
	switch {
	case err != nil:
		return // closed at once
	case got != "-NOAUTH the user this connection authenticated as was deleted":
		t.Fatalf("%s: a deleted user's connection, right after DELUSER answered on %s: %q", b.ID, a.ID, got)
	}
	if got, err := conn.do("PING"); err == nil {
		t.Fatalf("%s answered %q on a deleted user's connection after refusing it", b.ID, got)
	}
}

// checkGone asserts that no node lets doomed in.
func checkGone(t *testing.T, when string, nodes []*nodeproc.Member) {
	t.Helper()
	for _, m := range nodes {
		conn := dialRESP(t, m.RESP)
		if got, _ := conn.do("AUTH", "doomed", doomedPass); got != "-WRONGPASS invalid username-password pair or user is disabled." {
			t.Errorf("%s: %s: AUTH doomed: %q", when, m.ID, got)
		}
	}
}

// killAndRestart kills every node with SIGKILL, then starts each again on
// its data directory.
func killAndRestart(t *testing.T, c *localCluster) {
	t.Helper()
	for _, m := range c.Nodes {
		m.Kill()
	}
	for _, m := range c.Nodes {
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range c.Nodes {
		if err := m.WaitReady(60 * time.Second); err != nil {
			t.Fatalf("%s after the restart: %v\n%s", m.ID, err, m.Logs())
		}
	}
}

// saveBackup saves a backup of c through m into a new file and returns its
// path and what the command printed.
func saveBackup(t *testing.T, m *nodeproc.Member) (file, out string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "users.backup")
	code, out, errOut := runTool(t, "snapshot", nil, "save", "--addr", m.HTTP, file)
	if code != 0 {
		t.Fatalf("snapshot save: %d\n%s%s", code, out, errOut)
	}
	return file, out
}

// restoreBackup restores file into a cluster through m and returns what the
// command printed.
func restoreBackup(t *testing.T, m *nodeproc.Member, file string) string {
	t.Helper()
	code, out, errOut := runTool(t, "snapshot", nil, "restore", "--addr", m.HTTP, file)
	if code != 0 {
		t.Fatalf("snapshot restore: %d\n%s%s", code, out, errOut)
	}
	return out
}

// TestACLClusterUsers: on a three-node cluster, a user set through one node
// holds at once on the others, a deleted user's connection on another node
// is closed, and the users survive a kill -9 of every node and a backup
// (saved before the kill, while leadership is settled) restored into a
// fresh cluster.
func TestACLClusterUsers(t *testing.T) {
	c := startCluster(t, 3)
	setUpUsers(t, c.Nodes[0])
	checkChecker(t, "at once", c.Nodes[1:])
	checkDeletedUser(t, c.Nodes[0], c.Nodes[1])
	file, _ := saveBackup(t, c.Nodes[2])

	killAndRestart(t, c)
	checkChecker(t, "after kill -9 of every node", c.Nodes)
	checkGone(t, "after kill -9 of every node", c.Nodes)
	c.Close()
	dst := startCluster(t, 3)
	restoreBackup(t, dst.Nodes[1], file)
	checkChecker(t, "restored into a fresh cluster", dst.Nodes)
	checkGone(t, "restored into a fresh cluster", dst.Nodes)
}

// TestACLShardedUsers is TestACLClusterUsers on a sharded cluster of three
// nodes, three shards of two replicas: every node holds the users (group
// 0), but not every shard, so some of checker's commands are forwarded to
// a node that holds the key, after the node that took them checked them.
//
// A sharded backup is a bundle of the shards' backups, and the users live
// in group 0, which no shard's backup holds: the bundle carries group 0's
// users beside them, and the restore puts them back after the shards.
func TestACLShardedUsers(t *testing.T) {
	c := startSharded(t, 3, 3, 2)
	setUpUsers(t, c.Nodes[0])
	checkChecker(t, "at once", c.Nodes[1:])
	checkDeletedUser(t, c.Nodes[0], c.Nodes[2])
	file, out := saveBackup(t, c.Nodes[1])
	if !strings.Contains(out, "saved the cluster's users") || !strings.Contains(out, ": 1 user\n") {
		t.Fatalf("snapshot save does not say it saved checker:\n%s", out)
	}

	killAndRestart(t, c)
	c.waitShardsOK(60 * time.Second)
	checkChecker(t, "after kill -9 of every node", c.Nodes)
	checkGone(t, "after kill -9 of every node", c.Nodes)
	c.Close()
	t.Run("restored into a fresh cluster", func(t *testing.T) {
		dst := startSharded(t, 3, 3, 2)
		if out := restoreBackup(t, dst.Nodes[2], file); !strings.Contains(out, "restored the cluster's users") ||
			!strings.Contains(out, ": 1 user\n") {
			t.Fatalf("snapshot restore does not say it restored checker:\n%s", out)
		}
		admin := client(t, dst.Nodes[0].RESP, 2)
		var ok bool
		err := notApplied(func() (err error) { ok, err = admin.BFExists(bg(), "names", "x").Result(); return err })
		if err != nil || !ok {
			t.Fatalf("names x after the restore: %v %v", ok, err)
		}
		checkChecker(t, "restored into a fresh cluster", dst.Nodes)
		checkGone(t, "restored into a fresh cluster", dst.Nodes)
	})
}
