package cluster

import (
	"time"

	"github.com/hashicorp/raft"
)

// raftAPI is the part of hashicorp/raft that the cluster's decisions and
// their effects use: reading the state a decision needs, and the calls that
// carry a decision out. *raft.Raft satisfies it; the unit tests give a fake
// (fakeraft_test.go), so the membership planner, the read index and the
// proposer are tested step by step without starting raft. The node's
// lifecycle (start, bootstrap, snapshots, observers, shutdown) uses
// *raft.Raft directly.
type raftAPI interface {
	State() raft.RaftState
	CurrentTerm() uint64
	CommitIndex() uint64
	AppliedIndex() uint64
	LastIndex() uint64
	LastContact() time.Time
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	GetConfiguration() raft.ConfigurationFuture

	VerifyLeader() raft.Future
	Barrier(timeout time.Duration) raft.Future
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture

	AddVoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	DemoteVoter(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	LeadershipTransfer() raft.Future
	LeadershipTransferToServer(id raft.ServerID, addr raft.ServerAddress) raft.Future
}

var _ raftAPI = (*raft.Raft)(nil)

// latestServers reads the latest configuration's servers (nil and the error
// when raft cannot say).
func latestServers(r raftAPI) ([]raft.Server, error) {
	f := r.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	return f.Configuration().Servers, nil
}

// countVoters counts the voters among servers.
func countVoters(servers []raft.Server) int {
	c := 0
	for _, s := range servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}
