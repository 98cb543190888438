package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smallVolume mounts a tmpfs of size bytes for the test, or skips it where
// mounting is not allowed (it needs root). The in-process test of the same
// behaviour (cluster's TestDiskFullRefusesWritesAndRecovers) runs everywhere.
func smallVolume(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("a real full disk needs a small file system, and mounting a tmpfs failed (this needs root): %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestDiskFullEndToEnd fills a real (tmpfs) disk with writes: they are
// refused with "ERR disk full", never "no leader"; the term holds still;
// reads go on; /readyz says why; once space is freed writes resume by
// themselves, and every acknowledged write survives a restart.
func TestDiskFullEndToEnd(t *testing.T) {
	vol := smallVolume(t, "48m")
	filler := filepath.Join(vol, "filler")
	if err := os.WriteFile(filler, make([]byte, 16<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	p := devNode(t, filepath.Join(vol, "data"))
	c := p.client(2)
	if err := c.BFReserve(bg(), "urls", 0.01, 100000).Err(); err != nil {
		t.Fatal(err)
	}
	item := func(batch, i int) string { return fmt.Sprintf("%05d-%03d-", batch, i) + strings.Repeat("x", 60_000) }
	var acked [][2]int
	refusedAt := -1
	for batch := 0; batch < 200 && refusedAt < 0; batch++ {
		args := []any{}
		for i := 0; i < 20; i++ {
			args = append(args, item(batch, i))
		}
		err := c.BFMAdd(bg(), "urls", args...).Err()
		switch {
		case err == nil:
			for i := 0; i < 20; i++ {
				acked = append(acked, [2]int{batch, i})
			}
		case strings.HasPrefix(err.Error(), "ERR disk full"):
			refusedAt = batch
		default:
			t.Fatalf("batch %d on a filling disk: %v\n%s", batch, err, p.Logs())
		}
	}
	if refusedAt < 0 {
		t.Fatal("48 MB never filled")
	}
	st, err := p.Status()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := c.BFAdd(bg(), "urls", "one-more").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR disk full") {
			t.Fatalf("write on the full disk: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if now, err := p.Status(); err != nil || now.Term != st.Term || now.Role != "leader" {
		t.Fatalf("term %d -> %+v (%v): the leader flapped", st.Term, now, err)
	}
	for _, a := range acked[len(acked)-20:] {
		if !c.BFExists(bg(), "urls", item(a[0], a[1])).Val() {
			t.Fatalf("read of an acknowledged item on the full disk failed")
		}
	}
	resp, err := p.HTTPDo("GET", "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(body), "disk full") {
		t.Fatalf("/readyz on a full disk: %d %s", resp.StatusCode, body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 15*time.Second, "writes to resume", func() bool {
		return c.BFAdd(bg(), "urls", "after").Err() == nil
	})
	if err := p.stop(syscall.SIGTERM, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	p.restart()
	p.waitReady(20 * time.Second)
	c = p.client(2)
	for _, a := range acked {
		if !c.BFExists(bg(), "urls", item(a[0], a[1])).Val() {
			t.Fatalf("acknowledged item %v lost", a)
		}
	}
	if !c.BFExists(bg(), "urls", "after").Val() {
		t.Fatal("the write after recovery was lost")
	}
}
