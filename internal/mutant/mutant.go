// Package mutant plants deliberate bugs in a node, one at a time, so that
// jepsen-lite's own tests can prove the checker catches each of them. The bugs
// exist only in a binary built with the tag rookery_mutants; in every other
// build On is a constant false and the hooks compile away.
//
//	go build -tags rookery_mutants -o rookery-mutants ./cmd/node
//	rookery-mutants --mutant delete-twice ...
package mutant

// The mutants.
const (
	// SessionsOff: the session table never finds an earlier result, so a
	// client's retried write (same session, same sequence) applies again.
	SessionsOff = "sessions-off"
	// FollowerLocalReads: a follower serves linearizable reads from its own
	// state, without a read index.
	FollowerLocalReads = "follower-local-reads"
	// AckAtProposal: the leader acknowledges a write when it hands it to Raft,
	// before it is committed.
	AckAtProposal = "ack-at-proposal"
	// DeleteTwice: the node applies every delete twice (planted in one node,
	// that replica diverges).
	DeleteTwice = "delete-twice"
	// AddTwice: the node applies every add twice.
	AddTwice = "add-twice"
	// SkipVerifyLeader: the leader serves reads without confirming with a
	// quorum that it still leads.
	SkipVerifyLeader = "skip-verify-leader"
	// RestoreDropsNewest: restoring a snapshot drops its last filter.
	RestoreDropsNewest = "restore-drops-newest"
	// WindowEarly: windowed filters age at twice the pace of the log's
	// clock, so items answer absent halfway through their window.
	WindowEarly = "window-early"
	// WatchIgnored: EXEC applies whatever the client WATCHed, as if no
	// watched key had changed.
	WatchIgnored = "watch-ignored"
)

// Names lists every mutant.
var Names = []string{SessionsOff, FollowerLocalReads, AckAtProposal, DeleteTwice, AddTwice, SkipVerifyLeader,
	RestoreDropsNewest, WindowEarly, WatchIgnored}
