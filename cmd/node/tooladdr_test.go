package main

import (
	"encoding/base64"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runToolEnv is runTool with env entries added to the environment (and no
// ROOKERY_ variable of this process's).
func runToolEnv(t *testing.T, env []string, name string, args ...string) (int, string, string) {
	t.Helper()
	code, out, errOut := runBin(t, env, append([]string{name}, args...)...)
	t.Logf("%v rookery %s %s -> %d\n%s%s", env, name, strings.Join(args, " "), code, out, errOut)
	return code, out, errOut
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestToolsTryTheNextNode is issue 19's point 2: with the node at the first
// address down, members, raft list-peers and status go on to the next one
// (from --addr or ROOKERY_ADDR) and say so; with none answering, the error
// names every address tried and --addr / ROOKERY_ADDR.
func TestToolsTryTheNextNode(t *testing.T) {
	c := startOpsCluster(t)
	down := c.Nodes[0]
	down.Kill()
	list := down.HTTP + "," + c.Nodes[1].HTTP

	code, out, errOut := runToolEnv(t, nil, "members", "--addr", list)
	if code != 0 || len(tableRows(out)) != 3 || !strings.Contains(errOut, down.HTTP+": connection refused; trying "+c.Nodes[1].HTTP) {
		t.Errorf("members --addr %s: exit %d\n%s%s", list, code, out, errOut)
	}
	code, out, _ = runToolEnv(t, []string{"ROOKERY_ADDR=" + list}, "raft", "list-peers")
	if code != 0 || len(tableRows(out)) != 3 {
		t.Errorf("ROOKERY_ADDR=%s raft list-peers: exit %d\n%s", list, code, out)
	}
	code, out, _ = runToolEnv(t, []string{"ROOKERY_ADDR=" + list}, "status")
	if code != 0 || !strings.Contains(out, "Node           "+c.Nodes[1].ID+"\n") {
		t.Errorf("ROOKERY_ADDR=%s status: exit %d\n%s", list, code, out)
	}

	dead := deadAddr(t)
	code, _, errOut = runToolEnv(t, nil, "status", "--addr", down.HTTP+","+dead)
	for _, want := range []string{"no node answered", down.HTTP + " (connection refused)", dead + " (connection refused)", "--addr", "ROOKERY_ADDR"} {
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("status with no node up: exit %d, want %q in\n%s", code, want, errOut)
		}
	}
}

// TestToolsTryTheLocalDefaults is issue 19's point 2 as the operator met it:
// no --addr, no ROOKERY_ADDR, nothing on 127.0.0.1:6480 and a node on
// 127.0.0.1:6580: members, raft list-peers and status find it, saying they
// passed 6480 over; with no node on any default, the error names the three.
// It needs those ports free, as the README's blocks do.
func TestToolsTryTheLocalDefaults(t *testing.T) {
	mustHaveFree(t, 6480, 6580, 6680)
	code, _, errOut := runToolEnv(t, nil, "members")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:6480 (connection refused), 127.0.0.1:6580 (connection refused), "+
		"127.0.0.1:6680 (connection refused), the local defaults as neither --addr nor ROOKERY_ADDR is set") {
		t.Errorf("members with no node at the defaults: exit %d\n%s", code, errOut)
	}

	args := append([]string{"--id", "n2", "--data-dir", filepath.Join(t.TempDir(), "n2"), "--bootstrap-expect", "1"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, append(args, "--http-addr", "127.0.0.1:6580")...)
	p.waitReady(15 * time.Second)
	for _, tool := range [][]string{{"members"}, {"raft", "list-peers"}, {"status"}} {
		code, out, errOut := runToolEnv(t, nil, tool[0], tool[1:]...)
		if code != 0 || !strings.Contains(out, "n2") || !strings.Contains(errOut, "127.0.0.1:6480: connection refused; trying 127.0.0.1:6580") {
			t.Errorf("%v with 6480 down: exit %d\n%s%s", tool, code, out, errOut)
		}
	}
}

// mustHaveFree fails the test, saying why, unless nothing listens on
// 127.0.0.1 at ports: the test uses them as written.
func mustHaveFree(t *testing.T, ports ...int) {
	t.Helper()
	for _, p := range ports {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d is in use (%v): this test reproduces the tools' local defaults, 127.0.0.1:6480, :6580 and :6680; "+
				"stop what listens there and run it again", p, err)
		}
		ln.Close()
	}
}

// TestToolsNameTheFlagThatFixesIt is issue 19's point 3 against a node with
// --http-tls and --requirepass: plain http, a CA that did not sign the node's
// certificate and a missing password each get a message naming --cacert or
// --password and their ROOKERY_ variables; wait gives up at once on those
// instead of spending its timeout; ROOKERY_CACERT and ROOKERY_PASSWORD
// reach the tools.
func TestToolsNameTheFlagThatFixesIt(t *testing.T) {
	dir := t.TempDir()
	certDir, otherDir := filepath.Join(dir, "certs"), filepath.Join(dir, "other")
	if err := nodeproc.MakeCerts(bin(t), certDir, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := nodeproc.MakeCerts(bin(t), otherDir); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: certDir, GossipKey: base64.StdEncoding.EncodeToString(make([]byte, 16)),
		Password: "s3cret", HTTPTLS: true}
	args := append([]string{"--id", "n1", "--data-dir", filepath.Join(dir, "n1"), "--bootstrap-expect", "1"},
		nodeproc.EphemeralAddrs()...)
	p := startProc(t, nil, append(args, sec.Flags("n1")...)...)
	p.Sec = sec
	p.waitReady(10 * time.Second)
	ca := filepath.Join(certDir, "ca.pem")

	start := time.Now()
	code, _, errOut := runToolEnv(t, nil, "wait", "--addr", p.HTTP, "--timeout", "60s")
	if code != 1 || !strings.Contains(errOut, "speaks https") || !strings.Contains(errOut, "--cacert FILE (or ROOKERY_CACERT)") {
		t.Errorf("wait in plain http: exit %d\n%s", code, errOut)
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("wait in plain http took %v of its 60s: it should see at once that waiting cannot help", el)
	}
	code, _, errOut = runToolEnv(t, nil, "members", "--addr", p.HTTP)
	if code != 1 || !strings.Contains(errOut, "--cacert FILE (or ROOKERY_CACERT)") || strings.Contains(errOut, "400 Bad Request") {
		t.Errorf("members in plain http: exit %d\n%s", code, errOut)
	}
	// http:// written out, with the CA given (issue 29): write https://.
	code, _, errOut = runToolEnv(t, nil, "members", "--addr", "http://"+p.HTTP, "--cacert", ca)
	if code != 1 || !strings.Contains(errOut, "the address says http:// though --cacert is given: write https://"+p.HTTP) ||
		strings.Contains(errOut, "give the cluster's CA") {
		t.Errorf("members --addr http://... --cacert: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runToolEnv(t, nil, "probe", "--cacert", ca, "http://"+p.HTTP+"/readyz")
	if code != 1 || !strings.Contains(errOut, "write https://"+p.HTTP+" in the URL") {
		t.Errorf("probe --cacert http://...: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runToolEnv(t, nil, "wait", "--addr", p.HTTP, "--cacert", filepath.Join(otherDir, "ca.pem"), "--timeout", "60s")
	if code != 1 || !strings.Contains(errOut, "not signed by the CA") || !strings.Contains(errOut, "--cacert (or ROOKERY_CACERT)") {
		t.Errorf("wait with another CA: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runToolEnv(t, nil, "members", "--addr", p.HTTP, "--cacert", ca)
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "--password (or ROOKERY_PASSWORD)") {
		t.Errorf("members without a password: exit %d\n%s", code, errOut)
	}
	code, _, errOut = runToolEnv(t, []string{"ROOKERY_PASSWORD=wrong"}, "members", "--addr", p.HTTP, "--cacert", ca)
	if code != 1 || !strings.Contains(errOut, "the password from ROOKERY_PASSWORD is not the nodes' --requirepass") {
		t.Errorf("members with a wrong password: exit %d\n%s", code, errOut)
	}

	// The container health check says the same.
	code, _, errOut = runToolEnv(t, nil, "probe", "http://"+p.HTTP+"/readyz")
	if code != 1 || !strings.Contains(errOut, "--cacert") {
		t.Errorf("probe in plain http: exit %d\n%s", code, errOut)
	}
	if code, _, errOut := runToolEnv(t, nil, "probe", "--cacert", ca, "https://"+p.HTTP+"/readyz"); code != 0 {
		t.Errorf("probe with the CA: exit %d\n%s", code, errOut)
	}

	env := []string{"ROOKERY_ADDR=" + p.HTTP, "ROOKERY_CACERT=" + ca, "ROOKERY_PASSWORD=s3cret"}
	if code, out, _ := runToolEnv(t, env, "wait"); code != 0 || out != p.HTTP+" is ready\n" {
		t.Errorf("wait from the environment: exit %d %q", code, out)
	}
	if code, out, _ := runToolEnv(t, env, "members"); code != 0 || len(tableRows(out)) != 1 {
		t.Errorf("members from the environment: exit %d\n%s", code, out)
	}
	// https to a plain port: drop the CA.
	q := devNode(t, filepath.Join(dir, "plain"))
	code, _, errOut = runToolEnv(t, []string{"ROOKERY_CACERT=" + ca}, "status", "--addr", q.HTTP)
	if code != 1 || !strings.Contains(errOut, "plain http") || !strings.Contains(errOut, "leave out ROOKERY_CACERT") {
		t.Errorf("https to a plain node: exit %d\n%s", code, errOut)
	}
}

// TestSnapshotSaveNotesADeadNodeOnce is issue 29's "snapshot save prints
// its retry line twice": with the first address down, save passes it over
// and says so once, though it asks the cluster twice (its shards, then the
// backup).
func TestSnapshotSaveNotesADeadNodeOnce(t *testing.T) {
	p := devNode(t, t.TempDir())
	dead := deadAddr(t)
	file := filepath.Join(t.TempDir(), "backup.snap")
	code, out, errOut := runToolEnv(t, nil, "snapshot", "save", "--addr", dead+","+p.HTTP, file)
	if code != 0 || !strings.Contains(out, "saved "+file) {
		t.Fatalf("snapshot save: exit %d\n%s%s", code, out, errOut)
	}
	if n := strings.Count(errOut, dead+": connection refused; trying "+p.HTTP); n != 1 {
		t.Errorf("the line passing %s over, %d times:\n%s", dead, n, errOut)
	}
}
