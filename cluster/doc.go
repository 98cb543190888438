// Package cluster runs a Rookery node: hashicorp/raft with raft-boltdb/v2 as log
// and stable store and file snapshots, all under the data directory; gossip
// membership with hashicorp/memberlist; and the two gates every request passes.
//
// Writes go through Submit. On the leader one proposer goroutine gathers every
// write waiting at that moment into a single log entry, so a burst costs one
// append and one fsync; on a follower the write is forwarded to the leader over a
// multiplexed connection that keeps submission order. Every error a caller sees
// is in one class of Contract (errors.go): not applied for now (ErrNoLeader,
// ErrNotLeader, ErrShutdown, ErrRemoved), refused until something changes (ErrTooLarge,
// ErrDiskFull, ErrDiskError, ErrNeedsUpgrade) or indeterminate
// (ErrIndeterminate, and any error Contract does not list); only a write
// carrying a session may be retried after an indeterminate error.
//
// Reads go through ReadBarrier, which implements the read-index protocol on every
// node (see readindex.go); concurrent reads share one leadership confirmation.
//
// Membership follows the leader-loop pattern of Consul and Nomad: gossip decides
// who is alive; the leader adds alive members as non-voters, promotes them when
// caught up, and removes members dead (or gone) longer than a timeout only
// while a healthy quorum remains. Gossip alone never makes a voter or moves a
// member's Raft address: the node at that address must answer with the
// member's id first. Shutdown is not a departure: the node stays in the
// configuration and rejoins as itself; Leave is explicit, and has the leader
// remove the node before it says goodbye to gossip.
//
// Raft's own traffic and node-to-node requests share one TCP port (stream.go);
// with Config.PeerTLS every connection to it completes a mutual TLS handshake
// with a certificate of the cluster CA before a byte of it is read, and a
// peer then speaks only as the node its certificate names (peerauth.go,
// raftguard.go): client certificates open nothing here.
package cluster
