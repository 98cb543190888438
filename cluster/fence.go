package cluster

import "fmt"

// fenceAdvice says what to do about this node's replica of shard s that a
// recovery of the shard cut off.
func (n *Node) fenceAdvice(s int) string {
	return fmt.Sprintf("a recovery of shard %d left this node's replica out; its files in %s may hold writes the shard lacks: "+
		"copy what you need, then remove that directory, and the cluster may place a fresh replica here",
		s, ShardDir(n.cfg.DataDir, s))
}
