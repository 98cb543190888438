// Package client is the Go client of a Rookery cluster, for services that
// depend on it. It speaks RESP over its own connections and imports nothing
// of the server.
//
//	go get github.com/rookerydb/rookery/client
//
// Before a release, use a checkout (the README has the details):
//
//	go mod edit -replace github.com/rookerydb/rookery=/path/to/rookery
//	go get github.com/rookerydb/rookery@v0.0.0-00010101000000-000000000000
//
// # Connecting
//
// New takes the RESP addresses of some nodes, learns the others and the leader
// from them (CLUSTER MEMBERS), and the slot map of a sharded cluster (CLUSTER
// SHARDS, or CLUSTER SLOTS of a node without it), all re-read every
// RefreshInterval and after a failure, and fails only if none answers.
// Options.Username and Options.Password are sent with AUTH on every
// connection it opens, to any node, the leaders it is sent to included (AUTH
// user password; AUTH password for the default user); Options.TLS, or
// Options.CAFile (with CertFile and KeyFile for --tls-client-auth), reaches
// nodes started with --resp-tls.
//
// # Routing
//
// A sharded cluster (nodes started with --shards) splits Redis Cluster's
// 16,384 hash slots among shards, each a Raft group of a few replicas; a key's
// slot is CRC16 of the key, or of its {hash tag}, mod 16384, as in Redis
// Cluster. A command on one key (every filter command, TYPE, EXISTS or DEL
// of one key) goes to the shard that holds the key's slot: a write to the
// shard's leader, a read to the shard's replicas in turn, since each of them
// serves linearizable reads and only they hold the shard's data. So does a
// pipeline whose keys are all in one shard. Everything else goes as on a
// cluster of one shard: writes to the cluster's leader, reads to every node
// in turn. A node that is not the right one either serves the command
// anyway (it forwards it, at the cost of a hop) or, since this client's
// connections ask for the slot map, answers MOVED with the address of the
// shard's leader: nothing ran, and the client sends it there at once (same
// session and sequence number) and re-reads the map. So a map that is out of
// date, or not known at all (a build before shards), costs time, never a
// wrong answer: a write whose shard has no known leader goes to the
// cluster's leader, or any node. A write that a shard's leader fails (not
// reachable, CLUSTERDOWN, TRYAGAIN, a lost reply) drops it as the leader and
// has the map re-read at once, so the write's retries, with the same session
// and sequence number, reach the shard's new leader once it is known. A
// cluster started without --shards is one shard of every slot.
//
// Each read names its consistency: linearizable by default, or stale with
// WithReadLevel(ctx, ReadStale), which reads the serving node's local state
// without a round trip to the leader (the server's READONLY).
//
// # Errors
//
// Every error a write returns says whether it may have been applied:
//
//   - An error wrapping ErrIndeterminate: it may have been applied (once at
//     most). The request was sent and its reply lost, the context ended while
//     it was in flight, or a node answered INDETERMINATE, and the retries did
//     not settle it. What to do: if the write was sent under a Key (WithKey),
//     send it again under the same Key, now or later, from this process or
//     another, within KeyLifetime: it is applied at most once in all and you
//     get the first answer. Without a Key, sending it again is a new write
//     (harmless for BF.ADD, a second copy for CF.ADD, possibly a second
//     deletion for CF.DEL); read the state instead.
//   - Any other error: it was not applied. ErrUnavailable says the cluster
//     could not take it now (no node reachable, no leader until the retries or
//     the context ran out): try again later. ErrAuth, ErrClosed and the domain
//     errors (ErrNotFound, ErrExists, ErrWrongType, ErrFull, ErrTooLarge) are
//     answers; retrying will not change them. ErrKeyExpired: the Key was too
//     old to send; see its documentation.
//
// Errors wrap a *NodeError naming the node and what happened there, and the
// network or context error, so errors.Is(err, context.DeadlineExceeded) and
// errors.Is(err, syscall.ECONNREFUSED) hold where they apply. Reads are never
// indeterminate: a read that fails is ErrUnavailable.
//
// # Retries
//
// Within one call the client retries by itself, and gives up as follows:
//
//   - A node it cannot reach (connection refused, dial, TLS or AUTH timed
//     out: nothing was sent) is passed over for the rest of the call, and the
//     next node is tried at once. When every node has been passed over, the
//     call fails at once with ErrUnavailable (or ErrIndeterminate, if an
//     earlier attempt was sent and lost). So a call to a cluster whose nodes
//     are all down fails within a dial timeout per node, never after retries.
//   - A node's "not applied, try again" (CLUSTERDOWN, TRYAGAIN, SHUTDOWN,
//     LOADING) is retried after a pause of RetryBackoff, doubling to a second,
//     at most Retries times (about 15 s with the defaults, enough for an
//     election): ErrUnavailable after that. A read goes to the next node at
//     once instead (the next replica of its shard, for a read of one key),
//     and pauses only when it has been round them all.
//   - A write sent whose reply was lost (connection reset, ReadTimeout) or
//     answered INDETERMINATE is sent again with the same session and sequence
//     number, counted in Retries too; the first answer that comes back is the
//     write's answer, however many attempts reached the cluster.
//   - The context bounds it all: dials, writes and reads take its deadline,
//     and when it ends the call returns at once.
//
// AUTH refusals (ErrAuth) and domain errors are never retried.
//
// # Exactly-once writes
//
// Every mutation travels as IDEM session seq <command>: the cluster applies each
// (session, seq) at most once and answers a repeat with the first answer
// (PROTOCOL.md; it keeps a session's latest 128 answers, for 15 minutes after
// the session's last request). The client lends each call a session of its own
// pool and never has more than 64 writes of one session outstanding, so every
// retry within a call finds its answer. A write that must be retried across
// calls takes a Key: NewKey names one write, WithKey sends it under that name.
// Keys can be stored (String, ParseKey) and re-sent by another process.
// KeyLifetime bounds how long after NewKey a key is sent; a key is for one
// command with one set of arguments.
//
// # Batches
//
// A Pipeline queues commands and sends them in one round trip, each write
// still exactly-once. A Bulk (or AddAll, for a slice) streams many items into
// one filter in chunks of BF.MADD / CF.INSERT / CBF.MADD, several chunks
// outstanding at once, and reports per item whether it was new.
package client
