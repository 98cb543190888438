package main

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testdata/bolt-datadirs.tgz holds the data directories of a three-node
// cluster with two shards written by the release before the log engine
// (commit 253e8e7), each group's log in a raft.db of its own: 8 cuckoo
// filters reserved (cf0..cf7), items c0..c999 added to cf<i%8> and c0..c199
// deleted, items item0..item2999 added to bf<i%8>, then item3000 on added
// while every node was killed with SIGKILL; the adds of item3000..item4040
// had been acknowledged. The nodes listened for Raft on 127.0.0.1:16581-16583
// and for gossip on 16681-16683, which their configurations and members
// files name.
const boltLastAcked = 4040

// TestUpgradeFromBoltDataDirs: the release with the log engine, started node
// by node on those data directories, moves every group's raft.db into the
// engine and serves every acknowledged write; restarted, it serves them
// again from the engine alone.
func TestUpgradeFromBoltDataDirs(t *testing.T) {
	dir := t.TempDir()
	untar(t, "testdata/bolt-datadirs.tgz", dir)
	start := func(i int) *proc {
		return startProc(t, nil, "--id", fmt.Sprintf("n%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("d%d", i)),
			"--log-level", "info", "--shards", "2", "--bootstrap-expect", "3",
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", 16580+i), "--gossip-addr", fmt.Sprintf("127.0.0.1:%d", 16680+i),
			"--resp-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0")
	}
	nodes := []*proc{start(1)}
	// One upgraded node of three holds no quorum; the second makes one.
	time.Sleep(time.Second)
	nodes = append(nodes, start(2))
	nodes[0].waitReady(30 * time.Second)
	nodes = append(nodes, start(3))
	for _, p := range nodes {
		p.waitReady(30 * time.Second)
		if !strings.Contains(p.Logs(), "moved a group's log into the node's log engine") {
			t.Fatalf("no group's raft.db was moved:\n%s", p.Logs())
		}
	}
	for i := range 3 {
		for _, g := range []string{"", "shards/1", "shards/2"} {
			d := filepath.Join(dir, fmt.Sprintf("d%d", i+1), g)
			if _, err := os.Stat(filepath.Join(d, "raft.db")); !os.IsNotExist(err) {
				t.Fatalf("%s still holds raft.db (%v)", d, err)
			}
		}
	}
	checkBoltWrites(t, nodes)
	// The engine alone, after a restart of every node.
	for _, p := range nodes {
		p.stop(syscall.SIGTERM, 20*time.Second)
	}
	for _, p := range nodes {
		p.restart()
	}
	for _, p := range nodes {
		p.waitReady(60 * time.Second) // three nodes at once, on a loaded machine
	}
	checkBoltWrites(t, nodes)
}

// checkBoltWrites reads every acknowledged write of the bolt data
// directories through each node (reads on any node are linearizable).
func checkBoltWrites(t *testing.T, nodes []*proc) {
	t.Helper()
	for _, p := range nodes {
		c := p.client(2)
		for f := range 8 {
			var bf, cf []any
			bf = append(bf, "BF.MEXISTS", fmt.Sprintf("bf%d", f))
			for i := f; i <= boltLastAcked; i += 8 {
				bf = append(bf, fmt.Sprintf("item%d", i))
			}
			cf = append(cf, "CF.MEXISTS", fmt.Sprintf("cf%d", f))
			for i := 200 + f; i < 1000; i += 8 {
				cf = append(cf, fmt.Sprintf("c%d", i))
			}
			for _, args := range [][]any{bf, cf} {
				var got []int64
				var err error
				for try := 0; try < 50; try++ {
					if got, err = c.Do(bg(), args...).Int64Slice(); err == nil {
						break
					}
					time.Sleep(200 * time.Millisecond) // the shard's leader may still be elected
				}
				if err != nil {
					t.Fatalf("%s %v on %s: %v", args[0], args[1], p.RESP, err)
				}
				for j, v := range got {
					if v != 1 {
						t.Fatalf("%s %v on %s: %v is gone after the upgrade", args[0], args[1], p.RESP, args[2+j])
					}
				}
			}
		}
	}
}

// untar extracts the gzipped tar file src into dir.
func untar(t *testing.T, src, dir string) {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Clean(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			out.Close()
		}
	}
}
