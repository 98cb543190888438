package cluster

import "fmt"

// Two states in which a node answers clients but can serve nothing, each
// with an error that says what to do rather than "no leader": a node that
// can never form or find a cluster from how it was started, and a node the
// cluster removed while it was running.

// cannotFormMsg is what a node started with nothing to form or find a
// cluster with says, at start and on /readyz, until another node joins it.
const cannotFormMsg = "this node cannot form a cluster: it has no --bootstrap-expect, no --join and no cluster of its own " +
	"in its data directory, so it waits for another node to join it; " +
	"start it with --bootstrap-expect 1 (a single node), --bootstrap-expect N --join HOST:PORT,... naming the others' " +
	"gossip addresses (a new cluster of N), or --join HOST:PORT naming a member (to join a running cluster)"

// cannotForm says why this node can neither bootstrap a cluster nor find
// one, "" when it can (or when another node has found it since).
func (n *Node) cannotForm() string {
	if n.cfg.BootstrapExpect > 0 || len(n.cfg.Join) > 0 || len(n.heal.book.get().Peers) > 0 {
		return ""
	}
	if f := n.meta.raft.GetConfiguration(); f.Error() != nil || len(f.Configuration().Servers) > 0 {
		return ""
	}
	if n.ml.NumMembers() > 1 {
		return "" // someone joined it: a node with --bootstrap-expect may take it in
	}
	return cannotFormMsg
}

// removedErr is the error of a client request to a node out of the
// configuration, nil while it is a member.
func (n *Node) removedErr() error {
	why := n.removedWhy()
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s; send requests to another node, and to bring this one back, %s", ErrRemoved, why, n.rejoinAdvice())
}
