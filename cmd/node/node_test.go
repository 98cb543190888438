package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rookerydb/rookery/internal/nodeproc"
)

// TestQuickstart is the README's session: BF.ADD / BF.EXISTS and a cuckoo
// add, delete and check, with go-redis under both protocols and with redis-cli.
func TestQuickstart(t *testing.T) {
	p := devNode(t, t.TempDir())
	for _, proto := range []int{2, 3} {
		c := p.client(proto)
		users, coupons := fmt.Sprint("users", proto), fmt.Sprint("coupons", proto)
		if !c.BFAdd(bg(), users, "alice").Val() || !c.BFExists(bg(), users, "alice").Val() {
			t.Fatalf("RESP%d: BF.ADD/BF.EXISTS", proto)
		}
		if c.BFExists(bg(), users, "mallory").Val() {
			t.Errorf("RESP%d: BF.EXISTS of an absent item", proto)
		}
		if !c.CFAdd(bg(), coupons, "C1").Val() || !c.CFDel(bg(), coupons, "C1").Val() || c.CFExists(bg(), coupons, "C1").Val() {
			t.Fatalf("RESP%d: CF.ADD/CF.DEL/CF.EXISTS", proto)
		}
		info, err := c.BFInfo(bg(), users).Result()
		if err != nil || info.Capacity != 100 || info.ItemsInserted != 1 || info.ExpansionRate != 2 {
			t.Errorf("RESP%d: BF.INFO %+v %v", proto, info, err)
		}
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redis-cli is needed (Debian's redis-tools; .ci/run installs it)")
	}
	host, port, _ := strings.Cut(p.RESP, ":")
	for _, step := range []struct{ args, want string }{
		{"BF.ADD users alice", "1"}, {"BF.EXISTS users alice", "1"},
		{"CF.ADD coupons C1", "1"}, {"CF.DEL coupons C1", "1"}, {"CF.EXISTS coupons C1", "0"},
		{"bf.add", "ERR wrong number of arguments for 'bf.add' command"}, {"BF.ADD", "ERR wrong number of arguments for 'BF.ADD' command"},
	} {
		out, err := exec.Command(cli, append([]string{"-h", host, "-p", port}, strings.Fields(step.args)...)...).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != step.want {
			t.Errorf("redis-cli %s: %q %v, want %q", step.args, got, err, step.want)
		}
	}
}

// TestKill9KeepsAcknowledgedWrites: writes acknowledged before a SIGKILL are all
// there after a restart on the same data directory, and the node comes back as
// itself without bootstrapping again.
func TestKill9KeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	p := devNode(t, dir)
	c := p.client(2)
	if err := c.Do(bg(), "CF.RESERVE", "coupons", "100000", "BUCKETSIZE", "4").Err(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]string{} // item -> key
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				item := fmt.Sprintf("w%d-%d", w, i)
				key, cmd := "users", c.BFAdd(bg(), "users", item).Err()
				if i%2 == 1 {
					key, cmd = "coupons", c.CFAdd(bg(), "coupons", item).Err()
				}
				if cmd != nil {
					return // the node died under us
				}
				mu.Lock()
				acked[item] = key
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	p.Kill()
	close(stop)
	wg.Wait()
	if len(acked) < 50 {
		t.Fatalf("only %d writes acknowledged before the kill", len(acked))
	}
	p.restart()
	p.waitReady(15 * time.Second)
	if strings.Contains(p.Logs(), "bootstrapping cluster") {
		t.Error("the restarted node bootstrapped again")
	}
	c = p.client(3)
	for item, key := range acked {
		var ok bool
		var err error
		if key == "users" {
			ok, err = c.BFExists(bg(), key, item).Result()
		} else {
			ok, err = c.CFExists(bg(), key, item).Result()
		}
		if err != nil || !ok {
			t.Fatalf("acknowledged %s in %s lost after kill -9 (%v); %d acknowledged", item, key, err, len(acked))
		}
	}
	t.Logf("%d acknowledged writes survived kill -9", len(acked))
}

// TestSIGTERMIsClean: SIGTERM ends the process with status 0 and keeps the data.
func TestSIGTERMIsClean(t *testing.T) {
	dir := t.TempDir()
	p := devNode(t, dir)
	c := p.client(2)
	if err := c.BFAdd(bg(), "k", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.stop(syscall.SIGTERM, 15*time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, p.Logs())
	}
	p.restart()
	p.waitReady(15 * time.Second)
	if !p.client(2).BFExists(bg(), "k", "v").Val() {
		t.Fatal("item lost across a clean restart")
	}
}

// TestFlagsFromEnvironment: ROOKERY_<FLAG> sets a flag; a password set that way
// is required.
func TestFlagsFromEnvironment(t *testing.T) {
	args := append([]string{"--id", "n1", "--data-dir", t.TempDir(), "--bootstrap-expect", "1"}, nodeproc.EphemeralAddrs()...)
	p := startProc(t, []string{"ROOKERY_REQUIREPASS=s3cret", "ROOKERY_MAX_MEMORY=1mb"}, args...)
	p.waitReady(10 * time.Second)
	if err := p.client(2).BFExists(bg(), "k", "v").Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Fatalf("BF.EXISTS without a password: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.RESP, Password: "s3cret", MaxRetries: -1})
	defer c.Close()
	if err := c.BFAdd(bg(), "k", "v").Err(); err != nil {
		t.Fatal(err)
	}
	// --max-memory (1 MiB, from the environment) refuses a filter that would pass
	// it before it reaches the log, and creates nothing.
	err := c.BFReserve(bg(), "huge", 0.001, 10_000_000).Err()
	if err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("oversized BF.RESERVE: %v", err)
	}
	if n := c.Exists(bg(), "huge").Val(); n != 0 {
		t.Fatal("a refused filter was created")
	}
	// Growth is admitted too: an insert that could make a cuckoo filter add a
	// sub-filter 32 times its size is refused whole; one that surely fits is not.
	if err := c.CFReserveWithArgs(bg(), "coupons", &redis.CFReserveOptions{Capacity: 100000, Expansion: 32}).Err(); err != nil {
		t.Fatal(err)
	}
	many := make([]any, 60000)
	for i := range many {
		many[i] = fmt.Sprint("c", i)
	}
	if err := c.CFInsert(bg(), "coupons", nil, many...).Err(); err == nil || !strings.HasPrefix(err.Error(), "OOM") {
		t.Fatalf("CF.INSERT that could grow past --max-memory: %v", err)
	}
	if info := c.CFInfo(bg(), "coupons").Val(); info.NumItemsInserted != 0 {
		t.Fatalf("a refused insert added %d items", info.NumItemsInserted)
	}
	if err := c.CFInsert(bg(), "coupons", nil, many[:40000]...).Err(); err != nil {
		t.Fatalf("CF.INSERT that fits: %v", err)
	}
}

// TestBadFlagsFail: a bad flag value stops the binary with an error.
func TestBadFlagsFail(t *testing.T) {
	for _, args := range [][]string{
		{"--data-dir", t.TempDir(), "--max-memory", "lots"},
		{"--bootstrap-expect", "1"}, // no data dir
		{"--dev", "--gossip-key", "short"},
		{"--dev", "--log-level", "loud"},
	} {
		out, err := exec.Command(bin(t), args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "rookery:") {
			t.Errorf("%v: exit %v, output %q", args, err, out)
		}
	}
}

// TestHTTPFaces: health, readiness, status, filters and metrics.
func TestHTTPFaces(t *testing.T) {
	p := devNode(t, t.TempDir())
	c := p.client(2)
	if err := c.BFMAdd(bg(), "users", "a", "b", "c").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.CFAdd(bg(), "coupons", "x").Err(); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + p.HTTP + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _ := get(path); code != 200 {
			t.Errorf("%s: %d", path, code)
		}
	}
	_, body := get("/v1/status")
	var st struct {
		ID           string `json:"id"`
		Role         string `json:"role"`
		Term         uint64 `json:"term"`
		CommitIndex  uint64 `json:"commit_index"`
		AppliedIndex uint64 `json:"applied_index"`
		Filters      int    `json:"filters"`
		MemoryBytes  uint64 `json:"memory_bytes"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if st.ID != "n1" || st.Role != "leader" || st.Term == 0 || st.CommitIndex == 0 || st.AppliedIndex == 0 ||
		st.Filters != 2 || st.MemoryBytes == 0 {
		t.Errorf("/v1/status %s", body)
	}
	_, body = get("/v1/filters")
	var fl []struct {
		Name     string  `json:"name"`
		Kind     string  `json:"kind"`
		Items    uint64  `json:"items"`
		Capacity uint64  `json:"capacity"`
		Memory   uint64  `json:"memory_bytes"`
		FPP      float64 `json:"estimated_fpp"`
	}
	if err := json.Unmarshal([]byte(body), &fl); err != nil {
		t.Fatal(err)
	}
	if len(fl) != 2 || fl[0].Name != "coupons" || fl[1].Name != "users" || fl[1].Items != 3 || fl[1].Capacity != 100 || fl[1].Memory == 0 {
		t.Errorf("/v1/filters %s", body)
	}
	_, body = get("/metrics")
	for _, m := range []string{"rookery_raft_apply_seconds", "rookery_raft_commit_index", "rookery_raft_applied_index",
		"rookery_filter_memory_bytes", "rookery_snapshot_persist_seconds", "bf.madd"} {
		if !strings.Contains(body, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// TestProbe: `rookery probe` is the container health check.
func TestProbe(t *testing.T) {
	p := devNode(t, t.TempDir())
	if out, err := exec.Command(bin(t), "probe", "http://"+p.HTTP+"/readyz").CombinedOutput(); err != nil {
		t.Fatalf("probe of a ready node: %v %s", err, out)
	}
	err := exec.Command(bin(t), "probe", "http://"+p.HTTP+"/nope").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("probe of a 404: %v", err)
	}
}
