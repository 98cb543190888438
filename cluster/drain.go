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
	if !n.meta.IsLeader() {
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
	Fenced  []string                `json:"fenced,omitempty"` // nodes a recovery cut off the shard
	Index   uint64                  `json:"commit_index"`
	Filters int                     `json:"filters"`
	Bytes   uint64                  `json:"memory_bytes"`
	Status  map[string]ReplicaState `json:"replica_state,omitempty"`
}

// ReplicaState is what a replica's group says of itself.
type ReplicaState struct {
	State   string `json:"state"` // leader, follower, nonvoter, stopping, unreachable
	Applied uint64 `json:"applied_index"`
}

// ShardReports describes every shard from the reports this node holds
// (reports.go): no replica is asked anything, so it answers at once. A
// replica whose node has not reported within a few seconds, or whose report
// lacks the shard's group, is "unreachable".
func (n *Node) ShardReports(ctx context.Context) ([]ShardReport, error) {
	m := n.clusterMap()
	if m == nil {
		return nil, ErrNotSharded
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.reports.put(n.localReport(), time.Now())
	tab := n.reports.snapshot()
	live := n.liveness()
	now := time.Now()
	infos := n.mappedShards(m)
	out := make([]ShardReport, len(infos))
	for s, info := range infos {
		gid := groupOf(m, s)
		r := ShardReport{ShardInfo: info, Created: m.Groups[s].Created, Fenced: m.Groups[s].Fenced,
			Status: map[string]ReplicaState{}}
		_, lead, led := groupLeader(tab, gid)
		if led {
			r.Index, r.Filters, r.Bytes = lead.Commit, lead.Filters, lead.Bytes
		}
		for _, rep := range info.Replicas {
			st := ReplicaState{State: "unreachable"}
			rc, ok := tab[rep.ID]
			gr, has := rc.r.group(gid)
			switch l := live[rep.ID].State; {
			case rep.ID == n.cfg.ID:
			case l == liveStopping:
				// Stopping, or leaving: what it last said of the group no
				// longer holds, and a restart opens it again only later.
				st.State, ok = "stopping", false
			case l != liveAlive:
				ok = false
			}
			if ok && has && now.Sub(rc.at) <= reportFresh {
				st = ReplicaState{State: "follower", Applied: gr.Applied}
				switch {
				case gr.leads(rep.ID):
					st.State = "leader"
				case led && slices.Contains(lead.Nonvoters, rep.ID):
					st.State = "nonvoter"
				}
				if !led && r.Filters == 0 {
					r.Filters, r.Bytes = gr.Filters, gr.Bytes
				}
			}
			r.Status[rep.ID] = st
		}
		out[s] = r
	}
	return out, nil
}
