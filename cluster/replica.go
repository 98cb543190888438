package cluster

import (
	"context"
	"fmt"
	"io"

	"github.com/rookerydb/rookery/fsm"
)

// Replica is this node's replica of one shard: the handle a command holds
// for as long as it runs (transport asks the store for it once). Each group
// has one handle, made when it opens: the same replica gives the same
// pointer, so a run of reads on one shard shares a read barrier. The store
// may close the group under it (the map moved the shard away); from then on
// its methods answer ErrNotHosted, and its state machine still reads (the
// last state it applied), so a command in flight never finds nil.
//
// On a cluster of one group, shard 0 is group 0, on every node.
type Replica struct {
	n     *Node
	g     *group
	shard int
}

// Shard is the shard this replica holds.
func (r *Replica) Shard() int { return r.shard }

// FSM is the replica's state machine, for reads after ReadBarrier.
func (r *Replica) FSM() *fsm.FSM { return r.g.fsm }

// Leads reports whether this replica leads its shard's group now (a
// transport answers MOVED to a cluster client's write elsewhere).
func (r *Replica) Leads() bool { return r.g.raft != nil && !r.g.closed() && r.g.IsLeader() }

// gone reports, as ErrNotHosted, that the store closed the replica's group.
func (r *Replica) gone() error {
	if r.g.closed() {
		return fmt.Errorf("%w: shard %d was closed here", ErrNotHosted, r.shard)
	}
	return nil
}

// ReadBarrier returns once this replica's state is fresh enough for level
// (linearizable: the shard leader's commit index, applied here).
func (r *Replica) ReadBarrier(ctx context.Context, level ReadLevel) error {
	if err := r.gone(); err != nil {
		return err
	}
	return r.g.ReadBarrier(ctx, level)
}

// Submit queues a write to the shard: proposed on its leader (forwarded to
// it from a follower), held while no leader is known.
func (r *Replica) Submit(cmd *fsm.Command) *Future {
	if err := r.n.refuseClient(); err != nil {
		return failed(err)
	}
	if err := r.gone(); err != nil {
		return failed(err)
	}
	if r.g == r.n.meta && r.n.clusterMap() != nil || r.n.awaitingMap() {
		// Group 0 holds the map alone on a sharded cluster (or is about
		// to): the write goes to its key's shard once the map is known.
		return r.n.Submit(cmd)
	}
	return r.g.submit(cmd)
}

// OpenBackup takes a snapshot of the shard and opens it as a backup file (on
// the shard's leader unless stale).
func (r *Replica) OpenBackup(ctx context.Context, stale bool) (*Backup, error) {
	if err := r.gone(); err != nil {
		return nil, err
	}
	return r.g.OpenBackup(ctx, stale)
}

// RestoreBackup restores the shard from a backup file, on its leader.
func (r *Replica) RestoreBackup(ctx context.Context, rd io.Reader, size int64) (*Restored, error) {
	if err := r.gone(); err != nil {
		return nil, err
	}
	return r.g.RestoreBackup(ctx, rd, size)
}

// Replica returns this node's replica of shard s, or ErrNotHosted when the
// node holds none (the map places it elsewhere, or its group is not open).
func (n *Node) Replica(s int) (*Replica, error) {
	m := n.clusterMap()
	if m == nil {
		if s != 0 {
			return nil, fmt.Errorf("%w: shard %d of a cluster of one", ErrNotHosted, s)
		}
		return n.meta.handle, nil
	}
	if s < 0 || s >= m.Shards() || !n.wants(m, s) {
		return nil, fmt.Errorf("%w: shard %d", ErrNotHosted, s)
	}
	g := n.groupByID(groupOf(m, s))
	if g == nil {
		return nil, fmt.Errorf("%w: shard %d is not open here yet", ErrNotHosted, s)
	}
	return g.handle, nil
}

// Replicas lists this node's replicas of the cluster's shards, by shard.
func (n *Node) Replicas() []*Replica {
	m := n.clusterMap()
	if m == nil {
		return []*Replica{n.meta.handle}
	}
	var out []*Replica
	for s := range m.Groups {
		if r, err := n.Replica(s); err == nil {
			out = append(out, r)
		}
	}
	return out
}

// Hosts reports whether this node holds a replica of shard s.
func (n *Node) Hosts(s int) bool {
	_, err := n.Replica(s)
	return err == nil
}

// ShardCount is the number of shards: the map's, or 1 for a cluster of one
// group (whose shard 0 is group 0, on every node).
func (n *Node) ShardCount() int {
	if m := n.clusterMap(); m != nil {
		return m.Shards()
	}
	return 1
}

// Sharded reports whether the cluster has a map of shards (it was started
// with --shards), even of one shard: its backups then go shard by shard.
func (n *Node) Sharded() bool { return n.clusterMap() != nil }

// failed is a Future resolved with err.
func failed(err error) *Future {
	fut := NewFuture()
	fut.Resolve(nil, err)
	return fut
}
