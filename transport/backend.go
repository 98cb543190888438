package transport

import (
	"context"
	"io"
	"time"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Backend is what transport needs from a node (a cluster.Node, through
// cmd/node's wiring). The node is a store of shard replicas: a command that
// runs here asks for its shard's replica once and holds it (Replica), so a
// replica the node closes meanwhile answers an error, never nil. A cluster
// of one group is one shard, held by every node.
type Backend interface {
	// Submit queues a write to its key's shard, wherever it is; writes
	// submitted one after another from one goroutine are applied in that
	// order.
	Submit(cmd *fsm.Command) *cluster.Future
	// SubmitUsers queues a change to the users (an ACL op) to the group
	// that holds them: the map group, or the only group.
	SubmitUsers(cmd *fsm.Command) *cluster.Future
	// UsersReplica is this node's replica of the group that holds the
	// users, for a read that catches them up.
	UsersReplica() (Replica, error)
	// UsersApplied waits, for at most wait, until every other node that
	// answers has applied the changes to the users this node has seen.
	UsersApplied(ctx context.Context, wait time.Duration)
	// Replica is this node's replica of shard s (cluster.ErrNotHosted when
	// it holds none); Replicas lists every one it holds.
	Replica(s int) (Replica, error)
	Replicas() []Replica
	// ShardCount is the number of shards (1 for a cluster of one group);
	// Sharded reports whether the cluster has a map of shards (its backups
	// then go shard by shard); ShardOf is the shard that owns key.
	ShardCount() int
	Sharded() bool
	ShardOf(key string) int
	// Forward runs a command on a node holding shard s and returns its reply.
	Forward(ctx context.Context, s int, args [][]byte, proto int, stale bool) ([]byte, error)
	// Status is the node's view of itself (ROLE, INFO, /v1/status).
	Status() cluster.Status
	// Memory is the node's filter memory under --max-memory, every shard's
	// together, and each one's share (INFO memory).
	Memory() cluster.MemoryUse
	// Nodes lists the cluster's members (CLUSTER MEMBERS and NODES, /v1/nodes).
	Nodes() []cluster.NodeInfo
	// Shards lists the cluster's shards with their slots, replicas and leaders
	// (CLUSTER SLOTS, SHARDS, NODES and INFO).
	Shards() []cluster.ShardInfo
	// Leave removes this node from the cluster for good (POST /v1/leave).
	Leave(ctx context.Context) error
	// Readiness says whether the node should take clients, and each shard's
	// state as it sees it (/readyz; cluster.Readiness has the rule).
	Readiness() cluster.Readiness
	// TakeSnapshot has raft snapshot this node's state now (POST /v1/snapshot).
	TakeSnapshot() (cluster.SnapshotInfo, error)
}

// Replica is one shard's replica on this node; *cluster.Replica provides it.
type Replica interface {
	// Shard is the shard it holds.
	Shard() int
	// FSM is its state machine, read through its query methods.
	FSM() *fsm.FSM
	// Leads reports whether it leads the shard now.
	Leads() bool
	// ReadBarrier returns once its state is fresh enough for level, or with
	// an error once it has waited as long as it allows (linearizable: read
	// index from the shard's leader, then wait for it to be applied).
	ReadBarrier(ctx context.Context, level cluster.ReadLevel) error
	// Submit queues a write to the shard.
	Submit(cmd *fsm.Command) *cluster.Future
	// OpenBackup opens a fresh snapshot of the shard as a backup file (GET
	// /v1/snapshot). A follower answers cluster.ErrNotLeader unless stale,
	// when it backs up its own state.
	OpenBackup(ctx context.Context, stale bool) (*cluster.Backup, error)
	// RestoreBackup restores the shard to the backup file read from r, of
	// size bytes (-1: unknown), after verifying all of it (POST
	// /v1/snapshot/restore). A follower answers cluster.ErrNotLeader without
	// reading r.
	RestoreBackup(ctx context.Context, r io.Reader, size int64) (*cluster.Restored, error)
}

// queries is the read side of the state machine that commands use; *fsm.FSM
// provides it. Keeping reads behind this interface keeps the command layer
// testable on its own.
type queries interface {
	Exists(fam fsm.Family, key string, items [][]byte) []bool
	Count(fam fsm.Family, key string, item []byte) uint64
	Card(key string) (uint64, error)
	Info(fam fsm.Family, key string) (fsm.Info, error)
	ScanDump(fam fsm.Family, key string, iter int64) (int64, []byte, error)
	KindOf(key string) (filters.Kind, bool)
	Expiry(key string) (deadline int64, exists bool)
	Expires() int
	ExpiredKeys() uint64
	Scan(cursor uint64, count int, match func(key string, k filters.Kind) bool) (uint64, []string)
	Len() int
	MemoryBytes() uint64
	MemoryUsage(key string) (uint64, bool)
	List() []fsm.Info
}
