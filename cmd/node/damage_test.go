package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// flipInFile flips one bit in every copy of needle in a file, as a bad sector
// would (bbolt keeps stale copies of pages; one of the copies is live).
func flipInFile(t *testing.T, path, needle string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for at := 0; ; {
		i := bytes.Index(b[at:], []byte(needle))
		if i < 0 {
			break
		}
		b[at+i+len(needle)-1] ^= 0x01
		at += i + len(needle)
		n++
	}
	if n == 0 {
		t.Fatalf("%s does not hold %q", path, needle)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

var damageAt = regexp.MustCompile(`corrupt log entry at index (\d+)`)

// TestFlippedBitInTheLog: one flipped bit in an item's name inside raft.db no
// longer loses the item silently. The node refuses to start and says where;
// `rookery recover --check` agrees; `--truncate-at` says exactly what it
// loses; then the node starts with everything before the damage.
func TestFlippedBitInTheLog(t *testing.T) {
	dir := t.TempDir()
	p := devNode(t, dir)
	c := p.client(2)
	for i := 0; i < 30; i++ {
		if err := c.BFAdd(bg(), "users", fmt.Sprintf("user-%04d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	flipInFile(t, filepath.Join(dir, "raft.db"), "user-0020")

	err := p.Restart()
	if err == nil {
		t.Fatal("the node started on a damaged log")
	}
	m := damageAt.FindStringSubmatch(err.Error())
	if m == nil || !strings.Contains(err.Error(), "--truncate-at "+m[1]) || !strings.Contains(err.Error(), "10 entries holding 9 writes (and 1 entry too damaged to count)") {
		t.Fatalf("start on a damaged log: %v", err)
	}
	out, err := exec.Command(bin(t), "recover", "--data-dir", dir, "--id", "n1", "--check").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "corrupt log entry at index "+m[1]) {
		t.Fatalf("recover --check: %v\n%s", err, out)
	}
	out, err = exec.Command(bin(t), "recover", "--data-dir", dir, "--id", "n1", "--truncate-at", m[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deleted log entries "+m[1]+"..") || !strings.Contains(string(out), "holding 9 writes, and 1 of them too damaged to read") ||
		!strings.Contains(string(out), `"users": 9 writes lost`) {
		t.Fatalf("recover --truncate-at: %v\n%s", err, out)
	}
	p.restart()
	p.waitReady(10 * time.Second)
	c = p.client(2)
	for i := 0; i < 30; i++ {
		if got, want := c.BFExists(bg(), "users", fmt.Sprintf("user-%04d", i)).Val(), i < 20; got != want {
			t.Fatalf("user-%04d present %v after the truncation", i, got)
		}
	}
}

// TestRecoverCommandRejoins: a follower whose log was damaged while it was
// stopped refuses to start and names `rookery recover`; after it, started as
// before, the node rejoins and has every write, including those made while it
// was away.
func TestRecoverCommandRejoins(t *testing.T) {
	lc := startCluster(t, 3)
	leader := lc.leader(15 * time.Second)
	w := client(t, leader.RESP, 2)
	for i := 0; i < 30; i++ {
		if err := w.CFAdd(bg(), "coupons", fmt.Sprintf("C-%04d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	f := lc.followers()[0]
	fp := lc.proc(f)
	eventually(t, 10*time.Second, "the follower to have the writes", func() bool {
		r := redis.NewClient(&redis.Options{Addr: f.RESP, MaxRetries: -1})
		defer r.Close()
		return r.CFExists(bg(), "coupons", "C-0029").Val()
	})
	if err := fp.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	flipInFile(t, filepath.Join(f.Dir, "raft.db"), "C-0015")
	for i := 30; i < 40; i++ {
		if err := w.CFAdd(bg(), "coupons", fmt.Sprintf("C-%04d", i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	err := f.Restart()
	if err == nil || !strings.Contains(err.Error(), "rookery recover --data-dir "+f.Dir) {
		t.Fatalf("start of the damaged follower: %v", err)
	}
	out, err := exec.Command(bin(t), "recover", "--data-dir", f.Dir, "--id", f.ID).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "moved the log and snapshots to") {
		t.Fatalf("rookery recover: %v\n%s", err, out)
	}
	fp.restart()
	fp.waitReady(30 * time.Second)
	eventually(t, 30*time.Second, "three voters again", func() bool {
		v, err := leader.Voters()
		return err == nil && len(v) == 3
	})
	r := client(t, f.RESP, 2)
	for i := 0; i < 40; i++ {
		if !r.CFExists(bg(), "coupons", fmt.Sprintf("C-%04d", i)).Val() {
			t.Fatalf("C-%04d missing on the recovered node\n%s", i, f.Logs())
		}
	}
}
