package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fullDisk is a volume that fills up on demand: while full, an append fails
// with ENOSPC unless the node has given up its ballast (which frees room for
// a few more), and statfs reports almost nothing free.
type fullDisk struct {
	full atomic.Bool
	dir  string
}

type fullStore struct {
	raft.LogStore
	v *fullDisk
}

func (s fullStore) StoreLogs(logs []*raft.Log) error {
	if s.v.full.Load() {
		if _, err := os.Stat(filepath.Join(s.v.dir, ballastName)); err == nil {
			return &os.PathError{Op: "write", Path: "raft.db", Err: syscall.ENOSPC}
		}
	}
	return s.LogStore.StoreLogs(logs)
}

func (s fullStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// free reports plenty of room even while full, as when another program fills
// the disk between a look at the free space and an append: the append itself
// must find out (the ballast path); cmd/node's test on a real tmpfs covers
// the look ahead.
func (v *fullDisk) free() (uint64, error) { return 100 << 30, nil }

// withFullDisk makes node i's disk a fullDisk.
func withFullDisk(tc *testCluster, i int) *fullDisk {
	v := &fullDisk{dir: tc.cfgs[i].DataDir}
	tc.cfgs[i].testLogStore = func(s raft.LogStore) raft.LogStore { return fullStore{LogStore: s, v: v} }
	return v
}

func (v *fullDisk) attach(n *Node) {
	n.disk.mu.Lock()
	n.disk.free = v.free
	n.disk.reserve = func(path string, size int64) error {
		if v.full.Load() {
			return &os.PathError{Op: "fallocate", Path: path, Err: syscall.ENOSPC}
		}
		return reserveFile(path, size)
	}
	n.disk.mu.Unlock()
}

// A single node whose disk fills: the write that hits the full disk still
// lands (the ballast gives way), later writes are refused at once with a
// disk-full error that says they were not applied, the term does not move,
// linearizable reads go on, the status says why, and writes resume by
// themselves once there is room. Every acknowledged write is there.
func TestDiskFullRefusesWritesAndRecovers(t *testing.T) {
	skipShort(t)
	tc := &testCluster{t: t, faults: NewFaults()}
	cfg := tc.config("n1")
	cfg.BootstrapExpect = 1
	tc.cfgs = append(tc.cfgs, cfg)
	v := withFullDisk(tc, 0)
	tc.start(0)
	t.Cleanup(tc.stopAll)
	_, n := tc.leader(10 * time.Second)
	v.attach(n)
	var acked []string
	for i := 0; i < 10; i++ {
		item := fmt.Sprint("before-", i)
		mustSubmit(t, n, bfAdd("k", item))
		acked = append(acked, item)
	}
	term := n.meta.raft.CurrentTerm()

	v.full.Store(true)
	refused := 0
	for i := 0; i < 50; i++ {
		item := fmt.Sprint("during-", i)
		start := time.Now()
		_, err := submit(t.Context(), n, bfAdd("k", item))
		switch {
		case err == nil:
			acked = append(acked, item)
		case errors.Is(err, ErrDiskFull):
			refused++
			if d := time.Since(start); d > time.Second {
				t.Fatalf("a refused write took %v", d)
			}
		default:
			t.Fatalf("write on a full disk: %v (want a disk-full refusal)", err)
		}
	}
	if refused < 45 {
		t.Fatalf("only %d of 50 writes refused on a full disk", refused)
	}
	time.Sleep(2 * time.Second) // elections would show here
	if got := n.meta.raft.CurrentTerm(); got != term || !n.meta.IsLeader() {
		t.Fatalf("term %d -> %d, leader %v: the leader flapped", term, got, n.meta.IsLeader())
	}
	for _, item := range acked {
		if !exists(t, n, "k", item) {
			t.Fatalf("linearizable read of %s on a full disk", item)
		}
	}
	if st := n.Status(); st.Ready || !strings.Contains(st.Problem, "disk full") {
		t.Fatalf("status on a full disk: %+v", st)
	}

	v.full.Store(false)
	eventually(t, 10*time.Second, "writes to resume", func() bool {
		_, err := submit(t.Context(), n, bfAdd("k", "after"))
		return err == nil
	})
	acked = append(acked, "after")
	if !n.Ready() {
		t.Fatalf("not ready once there is room: %s", n.Problem())
	}
	tc.crash(0)
	tc.start(0)
	_, n = tc.leader(10 * time.Second)
	for _, item := range acked {
		if !exists(t, n, "k", item) {
			t.Fatalf("acknowledged %s lost", item)
		}
	}
}

// The leader's disk fills in a three-node cluster: it hands leadership to a
// node whose disk has room, and writes go on there.
func TestDiskFullLeaderStepsAside(t *testing.T) {
	tc := newTestCluster(t, 3, nil)
	li, _ := tc.leader(10 * time.Second)
	// Restart the leader with a disk that can fill.
	tc.crash(li)
	v := withFullDisk(tc, li)
	tc.start(li)
	eventually(t, 10*time.Second, "the node to rejoin", func() bool { return tc.nodes[li].Ready() })
	v.attach(tc.nodes[li])
	for !tc.nodes[li].meta.IsLeader() {
		_, l := tc.leader(10 * time.Second)
		if err := l.meta.raft.LeadershipTransferToServer(raft.ServerID(tc.cfgs[li].ID), raft.ServerAddress(tc.nodes[li].RaftAddr())).Error(); err != nil {
			t.Logf("transfer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.full.Store(true)
	eventually(t, 20*time.Second, "a write to land through the full node", func() bool {
		_, err := submit(t.Context(), tc.nodes[li], bfAdd("k", "x"))
		return err == nil
	})
	eventually(t, 10*time.Second, "leadership to move off the full disk", func() bool {
		_, l := tc.leader(5 * time.Second)
		return l != tc.nodes[li]
	})
	_, l := tc.leader(5 * time.Second)
	for i := 0; i < 20; i++ {
		mustSubmit(t, l, bfAdd("k", fmt.Sprint("y-", i)))
	}
}
