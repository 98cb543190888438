package cluster

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// groupRaft is a group's raft: its leadership transfers counted
// (transfer.go), and every future it hands out answered once raft has shut
// down.
//
// raft never answers a future still queued when it stops: writes and
// barriers wait in applyCh (buffered), VerifyLeader in verifyCh, a
// leadership transfer in leadershipTransferCh, and Shutdown leaves them
// there. A loop of the node waiting on one (the membership executor handing
// leadership over, a read round's barrier) then waited for ever once its
// group closed under it, and the node's own close waited for that loop: a
// test package hung until its timeout. Every future handed out here answers
// raft.ErrRaftShutdown once the group's raft has been told to stop, unless
// raft answered it first.
type groupRaft struct {
	*raft.Raft
	down      <-chan struct{} // closed once Shutdown has been called
	transfers atomic.Int32
}

// Apply is raft's, answered at shutdown.
func (r *groupRaft) Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture {
	f := r.Raft.Apply(cmd, timeout)
	return &stopAwareApply{stopAwareIndex: stopAwareIndex{stopAware: stopAware{f: f, down: r.down}, xf: f}, af: f}
}

// Barrier is raft's, answered at shutdown.
func (r *groupRaft) Barrier(timeout time.Duration) raft.Future {
	return r.future(r.Raft.Barrier(timeout))
}

// VerifyLeader is raft's, answered at shutdown.
func (r *groupRaft) VerifyLeader() raft.Future { return r.future(r.Raft.VerifyLeader()) }

// BootstrapCluster is raft's, answered at shutdown.
func (r *groupRaft) BootstrapCluster(c raft.Configuration) raft.Future {
	return r.future(r.Raft.BootstrapCluster(c))
}

// AddVoter is raft's, answered at shutdown.
func (r *groupRaft) AddVoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, timeout time.Duration) raft.IndexFuture {
	return r.index(r.Raft.AddVoter(id, addr, prev, timeout))
}

// AddNonvoter is raft's, answered at shutdown.
func (r *groupRaft) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prev uint64, timeout time.Duration) raft.IndexFuture {
	return r.index(r.Raft.AddNonvoter(id, addr, prev, timeout))
}

// RemoveServer is raft's, answered at shutdown.
func (r *groupRaft) RemoveServer(id raft.ServerID, prev uint64, timeout time.Duration) raft.IndexFuture {
	return r.index(r.Raft.RemoveServer(id, prev, timeout))
}

// DemoteVoter is raft's, answered at shutdown.
func (r *groupRaft) DemoteVoter(id raft.ServerID, prev uint64, timeout time.Duration) raft.IndexFuture {
	return r.index(r.Raft.DemoteVoter(id, prev, timeout))
}

// Snapshot is raft's, answered at shutdown.
func (r *groupRaft) Snapshot() raft.SnapshotFuture {
	f := r.Raft.Snapshot()
	return &stopAwareSnapshot{stopAware: stopAware{f: f, down: r.down}, sf: f}
}

func (r *groupRaft) future(f raft.Future) raft.Future {
	return &stopAware{f: f, down: r.down}
}

func (r *groupRaft) index(f raft.IndexFuture) raft.IndexFuture {
	return &stopAwareIndex{stopAware: stopAware{f: f, down: r.down}, xf: f}
}

// stopAware is a raft future that answers raft.ErrRaftShutdown once down is
// closed, unless raft has answered by then. Any number of goroutines may
// wait on it.
type stopAware struct {
	f    raft.Future
	down <-chan struct{}
	once sync.Once
	err  error
	real bool // raft answered: what it answered may be read
}

func (s *stopAware) Error() error {
	s.once.Do(func() {
		done := make(chan error, 1)
		go func() { done <- s.f.Error() }()
		select {
		case err := <-done:
			s.err, s.real = err, true
		case <-s.down:
			select {
			case err := <-done:
				s.err, s.real = err, true
			default:
				s.err = raft.ErrRaftShutdown
			}
		}
	})
	return s.err
}

// answered waits for s and reports whether raft answered it.
func (s *stopAware) answered() bool {
	s.Error()
	return s.real
}

type stopAwareIndex struct {
	stopAware
	xf raft.IndexFuture
}

func (s *stopAwareIndex) Index() uint64 {
	if !s.answered() {
		return 0
	}
	return s.xf.Index()
}

// stopAwareApply is an index future with raft's response besides.
type stopAwareApply struct {
	stopAwareIndex
	af raft.ApplyFuture
}

func (s *stopAwareApply) Response() any {
	if !s.answered() {
		return nil
	}
	return s.af.Response()
}

type stopAwareSnapshot struct {
	stopAware
	sf raft.SnapshotFuture
}

func (s *stopAwareSnapshot) Open() (*raft.SnapshotMeta, io.ReadCloser, error) {
	if !s.answered() {
		return nil, nil, s.err
	}
	return s.sf.Open()
}

var _ raftAPI = (*groupRaft)(nil)
