package transport

import (
	"context"
	"io"

	"github.com/rookerydb/rookery/cluster"
	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Backend is what transport needs from a node; cluster.Node implements it.
type Backend interface {
	// Submit queues a write; writes submitted one after another from one goroutine
	// are applied in that order.
	Submit(cmd *fsm.Command) *cluster.Future
	// ReadBarrier returns once this node's state is fresh enough for level, or
	// with an error once it has waited as long as it allows
	// (linearizable: read index from the leader, then wait for it to be applied).
	ReadBarrier(ctx context.Context, level cluster.ReadLevel) error
	// FSM is the node's state machine, read through its query methods.
	FSM() *fsm.FSM
	// Status is the node's view of itself (ROLE, INFO, /v1/status).
	Status() cluster.Status
	// Nodes lists the cluster's members (CLUSTER MEMBERS and NODES, /v1/nodes).
	Nodes() []cluster.NodeInfo
	// Shards lists the cluster's shards with their slots, replicas and leaders
	// (CLUSTER SLOTS, SHARDS, NODES and INFO).
	Shards() []cluster.ShardInfo
	// ShardCount is the number of shards, 0 for a cluster without a map (one
	// group on every node: nothing is routed).
	ShardCount() int
	// ShardOf is the shard that owns key.
	ShardOf(key string) int
	// Hosts reports whether this node holds a replica of shard s.
	Hosts(s int) bool
	// FSMOf is shard s's state machine here (nil if not held), and LocalFSMs
	// every shard's this node holds.
	FSMOf(s int) *fsm.FSM
	LocalFSMs() []*fsm.FSM
	// ReadBarrierOf is ReadBarrier for shard s, held here.
	ReadBarrierOf(ctx context.Context, s int, level cluster.ReadLevel) error
	// SubmitTo queues a write to shard s.
	SubmitTo(s int, cmd *fsm.Command) *cluster.Future
	// OpenBackupOf and RestoreBackupOf are OpenBackup and RestoreBackup of
	// shard s (a sharded cluster backs up each shard on its own).
	OpenBackupOf(ctx context.Context, s int, stale bool) (*cluster.Backup, error)
	RestoreBackupOf(ctx context.Context, s int, r io.Reader, size int64) (*cluster.Restored, error)
	// Forward runs a command on a node holding shard s and returns its reply.
	Forward(ctx context.Context, s int, args [][]byte, proto int, stale bool) ([]byte, error)
	// Leave removes this node from the cluster for good (POST /v1/leave).
	Leave(ctx context.Context) error
	// Ready reports whether the node has a leader and has caught up (/readyz).
	Ready() bool
	// TakeSnapshot has raft snapshot this node's state now (POST /v1/snapshot).
	TakeSnapshot() (cluster.SnapshotInfo, error)
	// OpenBackup opens a fresh snapshot as a backup file (GET /v1/snapshot). A
	// follower answers cluster.ErrNotLeader unless stale, when it backs up its
	// own state.
	OpenBackup(ctx context.Context, stale bool) (*cluster.Backup, error)
	// RestoreBackup restores the cluster to the backup file read from r, of
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
