package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// flipInLog flips one bit in every copy of needle in the files of a stopped
// node's log engine (DATA_DIR/raftlog), as a bad sector would. The engine
// keeps entries uncompressed, so an item's name is there as written.
func flipInLog(t *testing.T, dataDir, needle string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dataDir, "raftlog", "*"))
	n := 0
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // a directory
		}
		found := false
		for at := 0; ; {
			i := bytes.Index(b[at:], []byte(needle))
			if i < 0 {
				break
			}
			b[at+i+len(needle)-1] ^= 0x01
			at += i + len(needle)
			n++
			found = true
		}
		if found {
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("the log engine in %s does not hold %q", dataDir, needle)
	}
}

var damageAt = regexp.MustCompile(`corrupt log entry at index (\d+)`)

// TestFlippedBitInTheLog: one flipped bit in an item's name inside the log
// engine's files does not lose the item silently. The engine checks each
// block it reads, so every entry of the damaged block is unreadable: the node
// refuses to start and says where the damage begins; `rookery recover
// --check` agrees; `--truncate-at` says exactly what it loses; then the node
// starts with every write before the damage and none after.
func TestFlippedBitInTheLog(t *testing.T) {
	const items = 300
	dir := t.TempDir()
	p := devNode(t, dir)
	c := p.client(2)
	// A filter whose false positives would not hide a lost item.
	if err := c.Do(bg(), "BF.RESERVE", "users", "0.00001", "1000").Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < items; i++ {
		if err := c.BFAdd(bg(), "users", fmt.Sprintf("user-%04d-%s", i, strings.Repeat("x", 40))).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	flipInLog(t, dir, "user-0200-")

	err := p.Restart()
	if err == nil {
		t.Fatal("the node started on a damaged log")
	}
	m := damageAt.FindStringSubmatch(err.Error())
	if m == nil || !strings.Contains(err.Error(), "--truncate-at "+m[1]) {
		t.Fatalf("start on a damaged log: %v", err)
	}
	said := regexp.MustCompile(`(\d+) entries holding (\d+) writes \(and (\d+) entr(?:y|ies) too damaged to count\)`).FindStringSubmatch(err.Error())
	if said == nil {
		t.Fatalf("start on a damaged log does not count what truncating loses: %v", err)
	}
	out, err := exec.Command(bin(t), "recover", "--data-dir", dir, "--id", "n1", "--check").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "corrupt log entry at index "+m[1]) {
		t.Fatalf("recover --check: %v\n%s", err, out)
	}
	out, err = exec.Command(bin(t), "recover", "--data-dir", dir, "--id", "n1", "--truncate-at", m[1]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "deleted log entries "+m[1]+"..") ||
		!strings.Contains(string(out), fmt.Sprintf("holding %s writes, and %s of them too damaged to read", said[2], said[3])) {
		t.Fatalf("recover --truncate-at: %v\n%s", err, out)
	}
	lost := atoi(t, said[2]) + atoi(t, said[3]) // one write per entry, and the damaged entries held one each
	if lost < 1 || lost > items-100 {
		t.Fatalf("truncating loses %d of %d writes: the damage should be near item 200", lost, items)
	}
	p.restart()
	p.waitReady(10 * time.Second)
	c = p.client(2)
	for i := 0; i < items; i++ {
		if got, want := c.BFExists(bg(), "users", fmt.Sprintf("user-%04d-%s", i, strings.Repeat("x", 40))).Val(), i < items-lost; got != want {
			t.Fatalf("user-%04d present %v after a truncation that said it lost the last %d writes", i, got, lost)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRecoverCommandRejoins: a follower whose log was damaged while it was
// stopped refuses to start and names `rookery recover`; after it, started as
// before, the node rejoins and has every write, including those made while it
// was away.
func TestRecoverCommandRejoins(t *testing.T) {
	lc := startCluster(t, 3)
	leader := lc.leader(15 * time.Second)
	w := client(t, leader.RESP, 2)
	// Enough entries for several blocks of the log engine: the damaged one
	// is in the middle (a block holding the log's first or last entry is
	// the case of TestRecoverWithoutLogBounds).
	const n = 300
	name := func(i int) string { return fmt.Sprintf("C-%04d-%s", i, strings.Repeat("x", 40)) }
	for i := 0; i < n; i++ {
		if err := w.CFAdd(bg(), "coupons", name(i)).Err(); err != nil {
			t.Fatal(err)
		}
	}
	f := lc.followers()[0]
	fp := lc.proc(f)
	eventually(t, 10*time.Second, "the follower to have the writes", func() bool {
		r := redis.NewClient(&redis.Options{Addr: f.RESP, MaxRetries: -1})
		defer r.Close()
		return r.CFExists(bg(), "coupons", name(n-1)).Val()
	})
	if err := fp.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	flipInLog(t, f.Dir, "C-0150-")
	for i := n; i < n+10; i++ {
		if err := w.CFAdd(bg(), "coupons", name(i)).Err(); err != nil {
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
	for i := 0; i < n+10; i++ {
		if !r.CFExists(bg(), "coupons", name(i)).Val() {
			t.Fatalf("%s missing on the recovered node\n%s", name(i), f.Logs())
		}
	}
}
