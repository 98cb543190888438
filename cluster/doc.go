// Package cluster runs a Rookery node: a store of Raft groups
// (hashicorp/raft, every group's log and stable store in the node's one
// log engine, internal/logengine, and file snapshots, all under the data
// directory; logstore.go), gossip membership with
// hashicorp/memberlist, and the two gates every request passes.
//
// The node is a store (Node; cluster/DESIGN.md, "The store"). What is per
// node it owns once: the groups it hosts (groups.go) and their lifecycle
// (lifecycle.go: Shutdown hands over every group it leads, Leave leaves
// every group and the map), the Raft port, one memory budget for all its
// groups (budget.go), one view of who is alive (liveness.go) and the reports
// it pushes to its peers (reports.go). Group 0, the metadata group, is one of
// its groups: its configuration is the cluster's membership, and on a sharded
// cluster it holds the map of shards; on a cluster of one group it is also
// the only shard. Each shard's group is a replica the store holds; a command
// holds its shard's replica handle (Replica) for as long as it runs.
//
// Writes go through Submit, or a replica's Submit. On a group's leader one
// proposer goroutine gathers every write waiting at that moment into a
// single log entry, so a burst costs one append and one fsync; on a follower
// the write is forwarded to the leader over a multiplexed connection that
// keeps submission order. Every error a caller sees is in one class of
// Contract (errors.go): not applied for now (ErrNoLeader, ErrNotLeader,
// ErrShutdown, ErrRemoved, ErrNotHosted), refused until something changes
// (ErrTooLarge, ErrDiskFull, ErrDiskError, ErrNeedsUpgrade) or indeterminate
// (ErrIndeterminate, and any error Contract does not list); only a write
// carrying a session may be retried after an indeterminate error.
//
// Reads go through a replica's ReadBarrier, which implements the read-index
// protocol on every node (see readindex.go); concurrent reads share one
// leadership confirmation.
//
// Membership follows the leader-loop pattern of Consul and Nomad: group 0's
// leader adds alive members as non-voters, promotes them when caught up, and
// removes members dead longer than a timeout only while a healthy quorum
// remains; dead means dead to gossip and to the Raft port alike (liveness.go).
// Gossip alone never makes a voter or moves a member's Raft address: the node
// at that address must answer with the member's id first. Placement of
// shards is the controller's (controller.go), on group 0's leader; each
// shard's leader follows the map (groupplan.go). Shutdown is not a
// departure: the node stays in every configuration and rejoins as itself;
// Leave is explicit.
//
// Raft's own traffic and node-to-node requests share one TCP port (stream.go);
// with Config.PeerTLS every connection to it completes a mutual TLS handshake
// with a certificate of the cluster CA before a byte of it is read, and a
// peer then speaks only as the node its certificate names (peerauth.go,
// raftguard.go): client certificates open nothing here.
package cluster
