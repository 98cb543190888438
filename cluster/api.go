package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/rookerydb/rookery/fsm"
)

// ReadLevel is the consistency a read asks for.
type ReadLevel uint8

// Read levels.
const (
	// ReadLinearizable learns the leader's commit index after the leader has
	// confirmed its leadership, waits until this node has applied it, then reads.
	ReadLinearizable ReadLevel = iota
	// ReadStale reads this node's applied state with no coordination.
	ReadStale
)

// Errors a caller of Node can see. Each is either definitely-not-applied or
// indeterminate; the comment says which.
var (
	// ErrNoLeader: no leader is known; the write was not applied (safe to retry).
	ErrNoLeader = errors.New("no leader")
	// ErrNotLeader: this node stopped being leader before proposing; not applied.
	ErrNotLeader = errors.New("not the leader")
	// ErrIndeterminate: the write was proposed but its fate is unknown (leadership
	// lost after proposing, a timeout, a forwarding connection lost after sending).
	// It may or may not be applied; retry only with a session.
	ErrIndeterminate = errors.New("outcome unknown")
	// ErrShutdown: the node is shutting down; not applied.
	ErrShutdown = errors.New("node is shutting down")
	// ErrTooLarge: admitting the request would pass the node's memory limit; not applied.
	ErrTooLarge = errors.New("memory limit exceeded")
	// ErrNeedsUpgrade: the command needs a log format a member of the cluster
	// does not read yet (fsm.MinCodec); not applied.
	ErrNeedsUpgrade = errors.New("not every node of the cluster can apply this command")
	// ErrNotHosted: the request reached a node that holds no replica of the
	// shard it names (its map was behind or ahead of the sender's); not
	// applied.
	ErrNotHosted = errors.New("this node holds no replica of that shard")
	// ErrHalted: this node's state machine stopped at a log entry it could not
	// read (fsm.Halt); it serves no reads until it is recovered.
	ErrHalted = errors.New("node halted")
	// ErrRemoved: this node is out of the cluster's configuration (removed,
	// or it left) and serves nothing; not applied. Other nodes may serve.
	ErrRemoved = errors.New("not a member of the cluster")
)

// Status is a node's view of itself and its cluster (ROLE, /v1/status).
type Status struct {
	ID           string `json:"id"`
	Role         string `json:"role"` // "leader", "follower", "candidate", "shutdown"; "removed": out of the configuration (Problem says more)
	LeaderID     string `json:"leader_id"`
	LeaderRESP   string `json:"leader_resp_addr"`
	Term         uint64 `json:"term"`
	CommitIndex  uint64 `json:"commit_index"`
	AppliedIndex uint64 `json:"applied_index"`
	LastContact  string `json:"last_contact,omitempty"`
	Filters      int    `json:"filters"`
	MemoryBytes  uint64 `json:"memory_bytes"`
	Ready        bool   `json:"ready"`
	// LogFormat is the highest log format the node applies (and advertises);
	// LogFormatUse, on the leader, is the one it writes entries in now.
	LogFormat    int `json:"log_format"`
	LogFormatUse int `json:"log_format_in_use,omitempty"`
	// Problem says what keeps the node from serving, when something does.
	Problem string `json:"problem,omitempty"`
	// Sharded: the cluster has a map of shards; Role, LeaderID, Term and the
	// indexes above are then the map group's (group 0).
	Sharded bool `json:"sharded,omitempty"`
	// Shards lists this node's replicas of the shards of a sharded cluster
	// (Filters and MemoryBytes are then theirs together).
	Shards []ShardStatus `json:"shards,omitempty"`
}

// NodeInfo is one member of the cluster (the node list, /v1/nodes).
type NodeInfo struct {
	ID       string `json:"id"`
	RESPAddr string `json:"resp_addr"`
	HTTPAddr string `json:"http_addr"`
	RaftAddr string `json:"raft_addr"`
	Role     string `json:"role"`   // leader, follower, candidate, unknown
	Voter    bool   `json:"voter"`  // a voter in the Raft configuration
	Health   string `json:"health"` // alive, suspect, dead, left
}

// Future is a write submitted to the log. Writes submitted one after another from
// one goroutine are applied in that order.
type Future struct {
	done chan struct{}
	res  *fsm.Result
	err  error
}

// NewFuture returns an unresolved Future.
func NewFuture() *Future { return &Future{done: make(chan struct{})} }

// Resolve sets the outcome. It must be called exactly once.
func (f *Future) Resolve(r *fsm.Result, err error) {
	f.res, f.err = r, err
	close(f.done)
}

// Done is closed once the outcome is known.
func (f *Future) Done() <-chan struct{} { return f.done }

// Result returns the outcome; call it after Done is closed.
func (f *Future) Result() (*fsm.Result, error) { return f.res, f.err }

// Wait blocks until the outcome is known or ctx ends; a write still pending when
// ctx ends is reported as ErrIndeterminate, since it may yet be applied.
func (f *Future) Wait(ctx context.Context) (*fsm.Result, error) {
	select {
	case <-f.done:
		return f.res, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %v", ErrIndeterminate, ctx.Err())
	}
}
