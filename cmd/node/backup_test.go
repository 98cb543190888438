package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// runSnapshot runs `rookery snapshot args...` with env added and returns what
// it printed and its exit code.
func runSnapshot(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin(t), append([]string{"snapshot"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("rookery snapshot %v: %v\n%s", args, err, out)
	return "", -1
}

// mustSnapshot runs `rookery snapshot args...` and fails the test unless it
// succeeds.
func mustSnapshot(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, code := runSnapshot(t, env, args...)
	if code != 0 {
		t.Fatalf("rookery snapshot %v: exit %d\n%s", args, code, out)
	}
	return out
}

// refuses runs `rookery snapshot args...` and fails the test unless it exits 1
// saying each of want.
func refuses(t *testing.T, env []string, args []string, want ...string) {
	t.Helper()
	out, code := runSnapshot(t, env, args...)
	if code != 1 {
		t.Fatalf("rookery snapshot %v: exit %d, want 1\n%s", args, code, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("rookery snapshot %v says %q, which lacks %q", args, out, w)
		}
	}
}

// TestBackupRestoreEndToEnd is the operator's backup story with the real
// binary, secured as in production (TLS everywhere, a password): items
// written to one three-node cluster are saved through a follower with
// `rookery snapshot save`, the cluster is thrown away, and `rookery snapshot
// restore` into a fresh cluster on new data directories makes every item
// readable on every node and on a node that joins afterwards. A damaged copy
// of the file is refused by inspect and by restore, and changes nothing;
// nothing is served or taken without the password.
func TestBackupRestoreEndToEnd(t *testing.T) {
	dir := t.TempDir()
	certDir := filepath.Join(dir, "certs")
	if err := nodeproc.MakeCerts(bin(t), certDir, "n1", "n2", "n3", "n4"); err != nil {
		t.Fatal(err)
	}
	sec := nodeproc.Security{CertDir: certDir, GossipKey: base64.StdEncoding.EncodeToString([]byte("0123456789abcdef")),
		Password: "s3cret", RESPTLS: true, HTTPTLS: true}
	ca := filepath.Join(certDir, "ca.pem")
	env := []string{"ROOKERY_REQUIREPASS=" + sec.Password}
	start := func(name string) *localCluster {
		c, err := nodeproc.StartSecureCluster(bin(t), filepath.Join(dir, name), 3, sec, "--log-level", "debug")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return &localCluster{Cluster: c, t: t}
	}

	src := start("src")
	src.leader(15 * time.Second)
	f := src.followers()
	c := tlsClient(t, f[0].RESP, sec)
	var users, coupons, kept []any
	for i := 0; i < 600; i++ {
		users = append(users, fmt.Sprintf("user-%d", i))
	}
	for i := 0; i < 300; i++ {
		coupons = append(coupons, fmt.Sprintf("C-%d", i))
	}
	for i := 0; i < len(users); i += 100 {
		noErr(t, c.BFMAdd(bg(), "users", users[i:i+100]...).Err())
	}
	noErr(t, c.BFReserve(bg(), "exact", 0.001, 1000).Err())
	noErr(t, c.BFAdd(bg(), "exact", "one").Err())
	for i, it := range coupons {
		noErr(t, c.CFAdd(bg(), "coupons", it).Err())
		if i%3 == 0 {
			noErr(t, c.CFDel(bg(), "coupons", it).Err())
		} else {
			kept = append(kept, it)
		}
	}
	wantInfo := fmt.Sprint(c.Do(bg(), "CF.INFO", "coupons").Val())

	// The endpoints and the command want the password.
	refuseWithout(t, f[1], sec)
	refuses(t, nil, []string{"save", "--addr", f[1].HTTP, "--cacert", ca, filepath.Join(dir, "nope.backup")},
		"401", "authentication required")
	if _, err := os.Stat(filepath.Join(dir, "nope.backup")); !os.IsNotExist(err) {
		t.Fatalf("a refused save left a file: %v", err)
	}

	// Saved through a follower, which sends the command on to the leader.
	file := filepath.Join(dir, "cluster.backup")
	out := mustSnapshot(t, env, "save", "--addr", f[1].HTTP, "--cacert", ca, file)
	if !strings.Contains(out, "is not the leader") || !strings.Contains(out, "saved "+file) || !strings.Contains(out, "3 filters") {
		t.Fatalf("save says:\n%s", out)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v, want mode 0600", st, err)
	}
	out = mustSnapshot(t, env, "save", "--stale", "--addr", f[1].HTTP, "--cacert", ca, filepath.Join(dir, "stale.backup"))
	if strings.Contains(out, "is not the leader") || !strings.Contains(out, "3 filters") {
		t.Fatalf("save --stale on a follower says:\n%s", out)
	}
	out = mustSnapshot(t, nil, "inspect", file)
	for _, want := range []string{"every checksum holds", `"users"`, "scalable-bloom", `"coupons"`, "cuckoo", `"exact"`} {
		if !strings.Contains(out, want) {
			t.Fatalf("inspect lacks %q:\n%s", want, out)
		}
	}
	src.Close() // the backup is all that is left of it

	// A damaged copy: inspect and restore refuse it and say what is wrong.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "damaged.backup")
	damaged := bytes.Clone(data)
	damaged[len(damaged)*2/3] ^= 0x01
	if err := os.WriteFile(bad, damaged, 0o600); err != nil {
		t.Fatal(err)
	}
	refuses(t, nil, []string{"inspect", bad}, "damaged")

	dst := start("dst")
	dl := dst.leader(15 * time.Second)
	df := dst.followers()
	dc := tlsClient(t, df[0].RESP, sec)
	noErr(t, dc.BFAdd(bg(), "before", "x").Err())
	refuses(t, env, []string{"restore", "--addr", df[0].HTTP, "--cacert", ca, bad}, "refusing to restore", "damaged")
	if !dc.BFExists(bg(), "before", "x").Val() || dc.Exists(bg(), "users").Val() != 0 {
		t.Fatal("a refused restore changed the cluster")
	}

	out = mustSnapshot(t, env, "restore", "--addr", df[1].HTTP, "--cacert", ca, file)
	if !strings.Contains(out, "is not the leader") || !strings.Contains(out, "restored "+file) || !strings.Contains(out, "3 filters") {
		t.Fatalf("restore says:\n%s", out)
	}
	n4, err := dst.Add("n4")
	if err != nil {
		t.Fatal(err)
	}
	if err := n4.WaitReady(30 * time.Second); err != nil {
		t.Fatalf("%v\n%s", err, n4.Logs())
	}
	for _, m := range dst.Nodes {
		mc := tlsClient(t, m.RESP, sec)
		checkAll(t, m.ID, "BF.MEXISTS users", mc.BFMExists(bg(), "users", users...))
		checkAll(t, m.ID, "CF.MEXISTS coupons", mc.CFMExists(bg(), "coupons", kept...))
		if !mc.BFExists(bg(), "exact", "one").Val() {
			t.Fatalf("%s lacks exact/one", m.ID)
		}
		if got := fmt.Sprint(mc.Do(bg(), "CF.INFO", "coupons").Val()); got != wantInfo {
			t.Fatalf("%s: CF.INFO coupons %s, the backed-up cluster said %s", m.ID, got, wantInfo)
		}
		if n := mc.Exists(bg(), "before").Val(); n != 0 {
			t.Fatalf("%s still holds a filter the backup does not", m.ID)
		}
	}
	// The cluster keeps its own members, and goes on from the restored state.
	var nodes []struct {
		Raft string `json:"raft_addr"`
	}
	httpJSON(t, dl.Proc, "GET", "/v1/nodes", &nodes)
	for _, n := range nodes {
		if !slices.ContainsFunc(dst.Nodes, func(m *nodeproc.Member) bool { return m.Raft == n.Raft }) {
			t.Fatalf("after the restore the configuration names %s, not one of this cluster's nodes", n.Raft)
		}
	}
	noErr(t, dc.BFAdd(bg(), "users", "after-restore").Err())
	if !tlsClient(t, n4.RESP, sec).BFExists(bg(), "users", "after-restore").Val() {
		t.Fatal("a write after the restore is not visible on the new node")
	}

	// POST /v1/snapshot compacts a node's log on request.
	var snap struct {
		Index uint64 `json:"index"`
		Size  int64  `json:"size_bytes"`
	}
	httpJSON(t, df[0].Proc, "POST", "/v1/snapshot", &snap)
	if snap.Index == 0 || snap.Size == 0 {
		t.Fatalf("POST /v1/snapshot: %+v", snap)
	}
}

// refuseWithout checks that m answers every snapshot route with 401 to a
// client without the password.
func refuseWithout(t *testing.T, m *nodeproc.Member, sec nodeproc.Security) {
	t.Helper()
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: sec.ClientTLS()}}
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/snapshot"}, {"POST", "/v1/snapshot"}, {"POST", "/v1/snapshot/restore"},
	} {
		req, _ := http.NewRequest(r.method, "https://"+m.HTTP+r.path, strings.NewReader("RKYBACK"))
		resp, err := stranger.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"error"`) {
			t.Fatalf("%s %s without the password: %s %s", r.method, r.path, resp.Status, body)
		}
	}
}

func checkAll(t *testing.T, node, what string, cmd *redis.BoolSliceCmd) {
	t.Helper()
	got, err := cmd.Result()
	if err != nil {
		t.Fatalf("%s: %s: %v", node, what, err)
	}
	for i, ok := range got {
		if !ok {
			t.Fatalf("%s: %s: item %d of %d missing after the restore", node, what, i, len(got))
		}
	}
}

// httpJSON sends method path to p with its credentials and decodes a 200
// answer into v.
func httpJSON(t *testing.T, p *nodeproc.Proc, method, path string, v any) {
	t.Helper()
	resp, err := p.HTTPDo(method, path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s %s: %v in %s", method, path, err, body)
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
