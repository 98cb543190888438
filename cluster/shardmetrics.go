package cluster

import (
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// shardCollector exports, at each scrape, the state of every shard this node
// holds a replica of (docs/SHARDING.md, "Operators"), labelled by shard.
type shardCollector struct{ n *Node }

var (
	shardLeaderDesc = prometheus.NewDesc("rookery_shard_leader",
		"1 if this node leads the shard's Raft group.", []string{"shard"}, nil)
	shardCommitDesc = prometheus.NewDesc("rookery_shard_commit_index",
		"The shard group's commit index this node knows.", []string{"shard"}, nil)
	shardAppliedDesc = prometheus.NewDesc("rookery_shard_applied_index",
		"The last log index of the shard applied on this node.", []string{"shard"}, nil)
	shardFiltersDesc = prometheus.NewDesc("rookery_shard_filters",
		"Filters of the shard on this node.", []string{"shard"}, nil)
	shardMemoryDesc = prometheus.NewDesc("rookery_shard_memory_bytes",
		"Memory held by the shard's filters on this node.", []string{"shard"}, nil)
	shardsHeldDesc = prometheus.NewDesc("rookery_shards_held",
		"Shards this node holds a replica of (0 in a cluster that is not sharded).", nil, nil)
)

func (c shardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{shardLeaderDesc, shardCommitDesc, shardAppliedDesc, shardFiltersDesc, shardMemoryDesc, shardsHeldDesc} {
		ch <- d
	}
}

func (c shardCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.n.clusterMap()
	held := 0
	if m != nil {
		for _, g := range c.n.openGroups() {
			if g.id == 0 || g.raft == nil {
				continue
			}
			held++
			label := itoa(shardOfGroup(m, g.id))
			leader := 0.0
			if g.raft.State() == raft.Leader {
				leader = 1
			}
			gauge := func(d *prometheus.Desc, v float64) {
				ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label)
			}
			gauge(shardLeaderDesc, leader)
			gauge(shardCommitDesc, float64(g.raft.CommitIndex()))
			gauge(shardAppliedDesc, float64(g.fsm.AppliedIndex()))
			gauge(shardFiltersDesc, float64(g.fsm.Len()))
			gauge(shardMemoryDesc, float64(g.fsm.MemoryBytes()))
		}
	}
	ch <- prometheus.MustNewConstMetric(shardsHeldDesc, prometheus.GaugeValue, float64(held))
}
