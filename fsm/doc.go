// Package fsm is Rookery's replicated state machine: the codec of log entries,
// a registry of named filters, the session table that makes retries
// exactly-once, and the snapshot format.
//
// Every replica applies the same log to its own FSM and must end in the same
// state, so Apply is a pure function of (state, entry): it reads no clock (time
// comes from the leader, stamped into each command), draws no random numbers
// and never depends on map iteration order. Domain outcomes (a missing key, a
// full filter, a wrong kind) are values in a Result, identical on every replica.
// An entry that cannot be read (its checksum does not match, or it does not
// decode) halts the state machine before it (see Halt): applying anything else
// would fork the replicas and skipping it would lose a write, so the node stops
// applying and says where, and the operator recovers it from its peers.
//
// # Log entries
//
// An entry is [Type][CodecVersion][payload][CRC-32C] (see codec.go; version 1
// entries, from older builds, have no checksum and are still read). Types are only ever
// appended; a type with IgnoreUnknownFlag set may be skipped by an older node.
// A TypeBatch entry carries several commands, so the cluster can make one log
// append (and one fsync) of a burst of writes; multi-item commands such as
// BF.MADD are one command.
//
// # Concurrency
//
// raft calls Apply, ApplyBatch, Snapshot and Restore from one goroutine. Queries
// run on any goroutine: they find a filter under the registry's read lock, drop
// it, and read under that filter's own read lock, so a read waits only for a
// mutation of the filter it reads. Snapshot freezes the state without copying
// filters: a filter that a live snapshot may be streaming is copied by its next
// mutation (copy-on-write), and Persist streams the frozen objects while later
// entries apply.
//
// # Sessions
//
// A command may carry (client id, sequence number). The FSM keeps the results
// of each client's latest sequence numbers and answers a replay with the stored
// result instead of applying it again (Raft dissertation, section 6.3). Sessions
// expire by the leader's clock as stamped into the log, never by a replica's.
//
// # Expiry
//
// A key may have a deadline (EXPIRE and its kin, expire.go). It is removed
// before the first command whose leader-stamped time reaches the deadline, so
// every replica removes it at the same log position; the leader proposes a
// tick when its clock passes the earliest deadline, so keys expire with no
// other writes.
//
// # Windowed filters
//
// A windowed filter's generations retire by the same clock (window.go): before
// each command, the filters whose oldest generation holding items is due are
// moved to the log's clock, and the next retirement counts as a deadline for
// the leader's tick, so every replica forgets an item at the same log position
// and an idle filter still forgets.
package fsm
