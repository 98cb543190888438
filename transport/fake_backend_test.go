package transport

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/fsm"
)

// fakeBackend applies writes to a real state machine with ApplyCommand, in
// submission order, and records what transport asked of it.
type fakeBackend struct {
	mu       sync.Mutex
	fsm      *fsm.FSM
	index    uint64
	events   []string       // "submit", "resolve", "barrier:lin", "barrier:stale"
	commands []*fsm.Command // as submitted

	// Knobs tests set before use.
	submitErr  error         // resolve every write with this error, unapplied
	barrierErr error         // fail every read barrier
	gate       chan struct{} // when set, writes wait for it to close before applying
	never      bool          // futures never resolve
	ready      bool
	problem    string // Status().Problem
	// readyMap and readyShards are what Readiness reports of a sharded node.
	readyMap    *cluster.ShardReadiness
	readyShards []cluster.ShardReadiness
	leaveErr    error
	left        bool
	follower    bool  // backups and restores answer ErrNotLeader, Status says so
	backupErr   error // OpenBackup, RestoreBackup and TakeSnapshot fail with it
	restores    int   // backups restored
	queue       chan queued
	stop        chan struct{}
	stopped     sync.WaitGroup

	// clock stamps each command's Time, as a leader does (nil: time.Now).
	clock func() time.Time
}

type queued struct {
	cmd *fsm.Command
	fut *cluster.Future
}

func newFakeBackend(t testing.TB) *fakeBackend { return newFakeBackendWith(t, fsm.Options{}) }

// newFakeBackendWith is a fake backend whose state machine has opts (the
// users, for a server's).
func newFakeBackendWith(t testing.TB, opts fsm.Options) *fakeBackend {
	b := &fakeBackend{fsm: fsm.New(opts), ready: true,
		queue: make(chan queued, 1<<16), stop: make(chan struct{})}
	b.stopped.Add(1)
	go b.applier()
	t.Cleanup(func() { close(b.stop); b.stopped.Wait() })
	return b
}

// applier applies queued writes one by one, in order, as a Raft log would.
func (b *fakeBackend) applier() {
	defer b.stopped.Done()
	for {
		select {
		case <-b.stop:
			return
		case q := <-b.queue:
			b.mu.Lock()
			gate := b.gate
			b.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-b.stop:
					return
				}
			}
			b.apply(q)
		}
	}
}

func (b *fakeBackend) apply(q queued) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.never {
		return
	}
	b.events = append(b.events, "resolve")
	if b.submitErr != nil {
		q.fut.Resolve(nil, b.submitErr)
		return
	}
	b.index++
	q.fut.Resolve(b.fsm.ApplyCommand(b.index, q.cmd), nil)
}

func (b *fakeBackend) Submit(cmd *fsm.Command) *cluster.Future {
	f := cluster.NewFuture()
	b.mu.Lock()
	if b.clock != nil {
		cmd.Time = b.clock().UnixNano()
	} else {
		cmd.Time = time.Now().UnixNano()
	}
	b.events = append(b.events, "submit")
	b.commands = append(b.commands, cmd)
	b.mu.Unlock()
	b.queue <- queued{cmd, f}
	return f
}

func (b *fakeBackend) ReadBarrier(ctx context.Context, level cluster.ReadLevel) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if level == cluster.ReadStale {
		b.events = append(b.events, "barrier:stale")
	} else {
		b.events = append(b.events, "barrier:lin")
	}
	return b.barrierErr
}

func (b *fakeBackend) FSM() *fsm.FSM { return b.fsm }

// Leads: the fake leads unless it was made a follower.
func (b *fakeBackend) Leads() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.follower
}

func (b *fakeBackend) Status() cluster.Status {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := cluster.Status{ID: "n1", Role: "leader", LeaderID: "n1", LeaderRESP: "127.0.0.1:6379",
		Term: 3, CommitIndex: b.index, AppliedIndex: b.index, Filters: b.fsm.Len(),
		MemoryBytes: b.fsm.MemoryBytes(), Ready: b.ready, Problem: b.problem}
	if b.follower {
		st.ID, st.Role = "n2", "follower"
	}
	return st
}

func (b *fakeBackend) Nodes() []cluster.NodeInfo {
	return []cluster.NodeInfo{
		{ID: "n1", RESPAddr: "127.0.0.1:6379", HTTPAddr: "127.0.0.1:8080", RaftAddr: "127.0.0.1:7000",
			Role: "leader", Voter: true, Health: "alive"},
		{ID: "n2", RESPAddr: "127.0.0.1:6380", HTTPAddr: "", RaftAddr: "127.0.0.1:7001",
			Role: "follower", Voter: false, Health: "suspect"},
	}
}

func (b *fakeBackend) Shards() []cluster.ShardInfo {
	return []cluster.ShardInfo{{ID: 0, First: 0, Last: 16383, Leader: "n1", Replicas: []cluster.ShardReplica{
		{ID: "n1", RESPAddr: "127.0.0.1:6379", RaftAddr: "127.0.0.1:7000", Voter: true, Health: "alive"},
		{ID: "n2", RESPAddr: "127.0.0.1:6380", RaftAddr: "127.0.0.1:7001", Voter: false, Health: "suspect"},
	}}}
}

// The fake is a cluster of one group: one shard, here, nothing routed; the
// fake is its own replica of it.
func (b *fakeBackend) ShardCount() int    { return 1 }
func (b *fakeBackend) Sharded() bool      { return false }
func (b *fakeBackend) ShardOf(string) int { return 0 }
func (b *fakeBackend) Shard() int         { return 0 }
func (b *fakeBackend) Replicas() []Replica {
	return []Replica{b}
}
func (b *fakeBackend) SubmitUsers(cmd *fsm.Command) *cluster.Future { return b.Submit(cmd) }
func (b *fakeBackend) UsersReplica() (Replica, error)               { return b, nil }
func (b *fakeBackend) UsersApplied(context.Context, time.Duration)  {}
func (b *fakeBackend) Replica(s int) (Replica, error) {
	if s != 0 {
		return nil, cluster.ErrNotHosted
	}
	return b, nil
}
func (b *fakeBackend) Memory() cluster.MemoryUse {
	used := b.fsm.MemoryBytes()
	return cluster.MemoryUse{Used: used, Shards: map[int]uint64{0: used}}
}
func (b *fakeBackend) Forward(context.Context, int, [][]byte, int, bool) ([]byte, error) {
	return nil, cluster.ErrNotHosted
}

func (b *fakeBackend) Leave(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.leaveErr != nil {
		return b.leaveErr
	}
	b.left = true
	return nil
}

func (b *fakeBackend) Readiness() cluster.Readiness {
	b.mu.Lock()
	defer b.mu.Unlock()
	return cluster.Readiness{Ready: b.ready, Problem: b.problem, Map: b.readyMap, Shards: b.readyShards}
}

func (b *fakeBackend) TakeSnapshot() (cluster.SnapshotInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.backupErr != nil {
		return cluster.SnapshotInfo{}, b.backupErr
	}
	return cluster.SnapshotInfo{ID: "3-7-1", Index: b.index, Term: 3, Size: 1234}, nil
}

// OpenBackup backs up the fake's state machine as the cluster would, with a
// made-up raft meta.
func (b *fakeBackend) OpenBackup(ctx context.Context, stale bool) (*cluster.Backup, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.backupErr != nil:
		return nil, b.backupErr
	case b.follower && !stale:
		return nil, cluster.ErrNotLeader
	}
	snap, err := b.fsm.Snapshot()
	if err != nil {
		return nil, err
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		return nil, err
	}
	meta := cluster.BackupMeta{
		Index:               max(b.index, 1),
		Term:                3,
		RaftSnapshotVersion: 1,
		Configuration:       []cluster.BackupServer{{ID: "n1", Address: "127.0.0.1:7000", Suffrage: "Voter"}},
		StateBytes:          int64(sink.Len()),
		Node:                "n1",
		Created:             time.Now(),
	}
	return cluster.NewBackup(meta, io.NopCloser(&sink.Buffer))
}

// RestoreBackup verifies the backup in r and restores the fake's state
// machine from it, as raft.Restore would.
func (b *fakeBackend) RestoreBackup(ctx context.Context, r io.Reader, size int64) (*cluster.Restored, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.backupErr != nil:
		return nil, b.backupErr
	case b.follower:
		return nil, cluster.ErrNotLeader
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("receive backup: %w", err)
	}
	info, err := cluster.VerifyBackup(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	state := data[info.FileBytes-info.Meta.StateBytes-sha256.Size : info.FileBytes-sha256.Size]
	if err := b.fsm.Restore(io.NopCloser(bytes.NewReader(state))); err != nil {
		return nil, err
	}
	b.restores++
	b.index = max(b.index, info.Meta.Index) + 1
	return &cluster.Restored{BackupInfo: info, Index: b.index}, nil
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { return nil }
func (s *memSink) Cancel() error { return nil }

func (b *fakeBackend) set(f func(b *fakeBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

func (b *fakeBackend) eventLog() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.events...)
}

func (b *fakeBackend) submitted() []*fsm.Command {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*fsm.Command(nil), b.commands...)
}

// testServer is a RESP server on 127.0.0.1:0 with a fake backend.
type testServer struct {
	s    *Server
	be   *fakeBackend
	addr string
	reg  *prometheus.Registry
	done chan error
}

func mustStartServer(t testing.TB, cfg Config) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Users == nil {
		reg, err := ACLRegistry()
		if err != nil {
			t.Fatal(err)
		}
		cfg.Users = acl.NewStore(reg, cfg.RequirePass)
	}
	be := newFakeBackendWith(t, fsm.Options{Users: cfg.Users, RequirePass: cfg.RequirePass})
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	ts := &testServer{s: New(cfg, be), be: be, addr: ln.Addr().String(), reg: cfg.Registry,
		done: make(chan error, 1)}
	go func() { ts.done <- ts.s.Serve(ln) }()
	t.Cleanup(func() {
		ts.s.Close()
		select {
		case err := <-ts.done:
			if err != ErrServerClosed {
				t.Errorf("Serve returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after Close")
		}
	})
	return ts
}

// waitFor polls cond for up to 5 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func count(events []string, e string) int {
	n := 0
	for _, x := range events {
		if x == e {
			n++
		}
	}
	return n
}
