package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// fakeRaft is a raftAPI whose state a test sets and whose calls it records,
// so decisions and their effects run step by step without raft.
type fakeRaft struct {
	mu          sync.Mutex
	state       raft.RaftState
	term        uint64
	commit      uint64
	applied     uint64
	last        uint64
	lastContact time.Time
	leaderAddr  string
	leaderID    string
	servers     []raft.Server
	confErr     error

	verifyErr  error // what VerifyLeader answers
	barrierErr error // what Barrier answers
	barriers   int   // Barrier calls
	verifies   int   // VerifyLeader calls

	// changeErr, when set, is what the next membership change answers.
	changeErr error
	calls     []string // membership changes and transfers, in order

	// apply decides each Apply's outcome; nil: the future stays pending
	// until the test resolves it through pending.
	apply   func(data []byte) (any, error)
	entries [][]byte      // every Apply's data, in order
	pending []*fakeFuture // Apply futures not yet resolved
}

func newFakeRaft(self string, voters ...string) *fakeRaft {
	f := &fakeRaft{state: raft.Leader, term: 1, leaderID: self, leaderAddr: self + ":raft"}
	for _, v := range voters {
		f.servers = append(f.servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(v), Address: raft.ServerAddress(v + ":raft")})
	}
	return f
}

func (f *fakeRaft) State() raft.RaftState {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeRaft) CurrentTerm() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.term
}

func (f *fakeRaft) CommitIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commit
}

func (f *fakeRaft) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

func (f *fakeRaft) LastIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *fakeRaft) LastContact() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastContact
}

func (f *fakeRaft) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return raft.ServerAddress(f.leaderAddr), raft.ServerID(f.leaderID)
}

func (f *fakeRaft) GetConfiguration() raft.ConfigurationFuture {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &fakeFuture{err: f.confErr, conf: raft.Configuration{Servers: append([]raft.Server(nil), f.servers...)}, done: closed()}
}

func (f *fakeRaft) VerifyLeader() raft.Future {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.verifies++
	return &fakeFuture{err: f.verifyErr, done: closed()}
}

func (f *fakeRaft) Barrier(time.Duration) raft.Future {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.barriers++
	return &fakeFuture{err: f.barrierErr, done: closed()}
}

func (f *fakeRaft) Apply(data []byte, _ time.Duration) raft.ApplyFuture {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries = append(f.entries, data)
	f.last++
	fut := &fakeFuture{index: f.last, done: make(chan struct{})}
	if f.apply != nil {
		fut.resp, fut.err = f.apply(data)
		close(fut.done)
		return fut
	}
	f.pending = append(f.pending, fut)
	return fut
}

// resolveNext resolves the oldest pending Apply.
func (f *fakeRaft) resolveNext(resp any, err error) bool {
	f.mu.Lock()
	if len(f.pending) == 0 {
		f.mu.Unlock()
		return false
	}
	fut := f.pending[0]
	f.pending = f.pending[1:]
	f.mu.Unlock()
	fut.resp, fut.err = resp, err
	close(fut.done)
	return true
}

func (f *fakeRaft) pendingApplies() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

func (f *fakeRaft) change(call string, apply func()) raft.IndexFuture {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	if err := f.changeErr; err != nil {
		f.changeErr = nil
		return &fakeFuture{err: err, done: closed()}
	}
	apply()
	f.last++
	return &fakeFuture{index: f.last, done: closed()}
}

// setServer adds or updates a server of the configuration (f.mu held).
func (f *fakeRaft) setServer(s raft.Server) {
	for i := range f.servers {
		if f.servers[i].ID == s.ID {
			f.servers[i] = s
			return
		}
	}
	f.servers = append(f.servers, s)
}

func (f *fakeRaft) AddVoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return f.change(fmt.Sprintf("add-voter %s %s", id, addr), func() {
		f.setServer(raft.Server{Suffrage: raft.Voter, ID: id, Address: addr})
	})
}

func (f *fakeRaft) AddNonvoter(id raft.ServerID, addr raft.ServerAddress, _ uint64, _ time.Duration) raft.IndexFuture {
	return f.change(fmt.Sprintf("add-nonvoter %s %s", id, addr), func() {
		f.setServer(raft.Server{Suffrage: raft.Nonvoter, ID: id, Address: addr})
	})
}

func (f *fakeRaft) RemoveServer(id raft.ServerID, _ uint64, _ time.Duration) raft.IndexFuture {
	return f.change(fmt.Sprintf("remove %s", id), func() {
		for i := range f.servers {
			if f.servers[i].ID == id {
				f.servers = append(f.servers[:i], f.servers[i+1:]...)
				return
			}
		}
	})
}

func (f *fakeRaft) DemoteVoter(id raft.ServerID, _ uint64, _ time.Duration) raft.IndexFuture {
	return f.change(fmt.Sprintf("demote %s", id), func() {
		for i := range f.servers {
			if f.servers[i].ID == id {
				f.servers[i].Suffrage = raft.Nonvoter
			}
		}
	})
}

func (f *fakeRaft) LeadershipTransfer() raft.Future {
	return f.change("transfer", func() {})
}

func (f *fakeRaft) LeadershipTransferToServer(id raft.ServerID, _ raft.ServerAddress) raft.Future {
	return f.change(fmt.Sprintf("transfer-to %s", id), func() {})
}

func (f *fakeRaft) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// fakeFuture is every kind of raft future.
type fakeFuture struct {
	done  chan struct{}
	err   error
	resp  any
	index uint64
	conf  raft.Configuration
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

func (f *fakeFuture) Error() error {
	<-f.done
	return f.err
}
func (f *fakeFuture) Response() any                     { return f.resp }
func (f *fakeFuture) Index() uint64                     { return f.index }
func (f *fakeFuture) Configuration() raft.Configuration { return f.conf }

// discardLogger is a logger for effects whose lines a test does not read.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
