package cluster

import (
	"slices"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/slot"
)

// ShardInfo is one shard as this node sees it: its slots, its replicas and
// which of them leads (CLUSTER SLOTS, SHARDS and NODES; /v1/shards).
type ShardInfo struct {
	ID       int            `json:"id"`
	First    int            `json:"first_slot"`
	Last     int            `json:"last_slot"`
	Leader   string         `json:"leader"` // node id; "" when none is known
	Replicas []ShardReplica `json:"replicas"`
}

// ShardReplica is one replica of a shard: its node, and how it is doing.
type ShardReplica struct {
	ID       string `json:"id"`
	RESPAddr string `json:"resp_addr"`
	RaftAddr string `json:"raft_addr"`
	Voter    bool   `json:"voter"`
	Health   string `json:"health"` // alive, suspect, dead, left, unknown
}

// Shards lists the cluster's shards. A cluster of one group is one shard of
// every slot, whose replicas are the servers of the Raft configuration; a
// sharded one's are the map's, each led by the node that gossips it leads
// the shard's group.
func (n *Node) Shards() []ShardInfo {
	if m := n.clusterMap(); m != nil {
		return n.mappedShards(m)
	}
	lid, _ := n.meta.Leader()
	sh := ShardInfo{ID: 0, First: 0, Last: slot.Count - 1, Leader: lid}
	servers, err := latestServers(n.meta.raft)
	if err != nil {
		return []ShardInfo{sh}
	}
	members := map[string]member{}
	for _, m := range n.members() {
		members[m.ID] = m
	}
	for _, s := range servers {
		r := ShardReplica{ID: string(s.ID), RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter, Health: "unknown"}
		if m, ok := members[r.ID]; ok {
			r.RESPAddr, r.Health = m.RESP, healthOf(m.state)
		} else if r.ID == n.cfg.ID {
			r.RESPAddr, r.Health = n.cfg.RESPAddr, "alive"
		}
		sh.Replicas = append(sh.Replicas, r)
	}
	return []ShardInfo{sh}
}

// mappedShards is Shards under map m.
func (n *Node) mappedShards(m *fsm.Map) []ShardInfo {
	members := map[string]member{}
	for _, mem := range n.members() {
		members[mem.ID] = mem
	}
	out := make([]ShardInfo, m.Shards())
	tab := n.reports.snapshot()
	live := n.liveness()
	for s, mg := range m.Groups {
		gid := groupOf(m, s)
		sh := ShardInfo{ID: s, First: mg.First, Last: mg.Last}
		// The leader of the newest term a replica reports, if any does;
		// else the one gossip names.
		reported, _, ok := groupLeader(tab, gid)
		if ok && !slices.Contains(mg.Replicas, reported) {
			reported = ""
		}
		for _, id := range mg.Replicas {
			r := ShardReplica{ID: id, Voter: true, Health: "unknown"}
			if id == n.cfg.ID {
				r.RESPAddr, r.RaftAddr, r.Health = n.cfg.RESPAddr, n.raftAdvertise, "alive"
				if g := n.groupByID(gid); g != nil && g.raft != nil && g.IsLeader() {
					sh.Leader = id
				}
			} else if mem, ok := members[id]; ok {
				r.RESPAddr, r.RaftAddr, r.Health = mem.RESP, mem.Raft, healthOf(mem.state)
				if mem.state == memberlist.StateAlive && slices.Contains(mem.Leads, gid) {
					sh.Leader = id
				}
			}
			sh.Replicas = append(sh.Replicas, r)
		}
		switch {
		case reported == n.cfg.ID || reported != "" && live[reported].State == liveAlive:
			sh.Leader = reported
		case reported != "":
			sh.Leader = "" // it stopped, or is handing over: its successor reports soon
		}
		if !mg.Created {
			sh.Leader = "" // it takes no write yet (SubmitTo)
		}
		out[s] = sh
	}
	return out
}
