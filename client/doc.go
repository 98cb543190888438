// Package client is the Go client of a Rookery cluster. It speaks RESP through
// go-redis and imports nothing of the server.
//
// # Routing
//
// Writes go to the leader, found with ROLE and followed when it changes; reads go
// to every node in turn, since every node serves linearizable reads. Each read
// names its consistency: linearizable by default, or stale with
// WithReadLevel(ctx, ReadStale), which reads the serving node's local state
// without a round trip to the leader (the server's READONLY).
//
// # Exactly-once writes
//
// Every mutation travels as IDEM session seq <command>: the cluster applies each
// (session, seq) at most once and answers a repeat with the first answer. A
// write whose fate is unknown (a timeout, a connection lost after sending, a
// leader lost after proposing) is therefore retried with the same session and
// sequence number, and lands exactly once: a retried CF.ADD stores one copy, a
// retried CF.DEL deletes one. The client keeps a pool of sessions and never has
// two writes of one session in flight, so a retry always finds its result in
// the server's window. Only when every retry fails does a write return an error
// wrapping ErrIndeterminate, which means "may or may not have been applied";
// every other error means it was not.
//
// Sessions are forgotten by the server after 15 minutes without a request;
// a write retried for longer than that could be applied twice.
package client
