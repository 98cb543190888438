package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// Errors of the shard operations.
var (
	// ErrNotSharded: the cluster has no map (it was not started with
	// --shards), so there is nothing to drain or list by shard.
	ErrNotSharded = errors.New("the cluster is not sharded (start it with --shards)")
	// ErrUnknownNode: no member of that id is known.
	ErrUnknownNode = errors.New("no such node")
)

// Drain has the controller move every replica and leadership off node id
// (undo: take it back as a node that may hold replicas), by recording it in
// the map's draining list; the moves follow, paced, as for a dead node
// (docs/SHARDING.md, "Operators"). Only group 0's leader can change the map
// (ErrNotLeader elsewhere).
func (n *Node) Drain(ctx context.Context, id string, undo bool) error {
	m := n.clusterMap()
	if m == nil {
		return ErrNotSharded
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	if _, ok := n.memberMeta(id); !ok && id != n.cfg.ID {
		return fmt.Errorf("%w: %s", ErrUnknownNode, id)
	}
	for {
		next := m.Clone()
		i, found := slices.BinarySearch(next.Draining, id)
		switch {
		case undo && !found, !undo && found:
			return nil
		case undo:
			next.Draining = slices.Delete(next.Draining, i, i+1)
		default:
			next.Draining = slices.Insert(next.Draining, i, id)
		}
		next.Version = m.Version + 1
		err := n.proposeMap(next)
		if err == nil {
			n.log.Info("drain", "node", id, "undo", undo, "map_version", next.Version)
			n.kickShards()
			return nil
		}
		if !errors.Is(err, fsm.ErrStaleMap) || ctx.Err() != nil {
			return err
		}
		// The controller changed the map meanwhile: again, on the new one.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		m = n.clusterMap()
	}
}

// ShardReport is one shard for operators (rookery shards, GET /v1/shards):
// ShardInfo, and what its replicas' groups say of themselves.
type ShardReport struct {
	ShardInfo
	Created bool                    `json:"created"`
	Index   uint64                  `json:"commit_index"`
	Filters int                     `json:"filters"`
	Bytes   uint64                  `json:"memory_bytes"`
	Status  map[string]ReplicaState `json:"replica_state,omitempty"`
}

// ReplicaState is what a replica's group says of itself.
type ReplicaState struct {
	State   string `json:"state"` // leader, follower, nonvoter, unreachable
	Applied uint64 `json:"applied_index"`
}

// ShardReports describes every shard, asking each replica about its group
// (a second at most each).
func (n *Node) ShardReports(ctx context.Context) ([]ShardReport, error) {
	m := n.clusterMap()
	if m == nil {
		return nil, ErrNotSharded
	}
	infos := n.mappedShards(m)
	out := make([]ShardReport, len(infos))
	for s, info := range infos {
		r := ShardReport{ShardInfo: info, Created: m.Groups[s].Created, Status: map[string]ReplicaState{}}
		for _, rep := range info.Replicas {
			ps, ok := n.shardStatus(s, rep.ID)
			st := ReplicaState{State: "unreachable"}
			if ok {
				st = ReplicaState{State: "follower", Applied: ps.AppliedIndex}
				switch {
				case ps.Leader == rep.ID:
					st.State = "leader"
					r.Index, r.Filters, r.Bytes = ps.Commit, ps.Filters, ps.Bytes
				case slices.Contains(ps.Nonvoters, rep.ID):
					st.State = "nonvoter"
				}
				if r.Index == 0 {
					r.Filters, r.Bytes = ps.Filters, ps.Bytes
				}
			}
			r.Status[rep.ID] = st
		}
		out[s] = r
	}
	return out, nil
}
