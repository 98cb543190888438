package client

import (
	"errors"
	"fmt"
	"strings"
)

// Errors. Every error a write returns either wraps ErrIndeterminate (it may
// have been applied) or means that it was not applied. See the package
// documentation for what to do after each.
var (
	// ErrIndeterminate: the write was sent and may or may not have been
	// applied: its reply was lost, the deadline passed while it was in
	// flight, or a node answered that its outcome is unknown, and retrying
	// did not settle it. It was applied at most once. Retrying it with the
	// same Key (WithKey) applies it at most once in all and returns the
	// first answer.
	ErrIndeterminate = errors.New("rookery: write outcome unknown")
	// ErrUnavailable: nothing was applied, and the cluster could not take the
	// request now: no node could be reached (refused, timed out, TLS or
	// connection set-up failed), the request never left the client, or the
	// nodes reached answered that they could not apply it (no leader, an
	// election) until the retries or the context ran out. Retrying later is
	// safe.
	ErrUnavailable = errors.New("rookery: cluster unavailable")
	// ErrKeyExpired: a write given a Key (WithKey) older than KeyLifetime was
	// not sent, or the cluster had forgotten the key's answer and did not
	// apply it again. Whether its first attempt was applied cannot be known
	// from the cluster any more; decide from the data (read it) before
	// writing again under a new key.
	ErrKeyExpired = errors.New("rookery: write key too old to retry safely")
	// ErrAuth: the node refused the password; nothing was applied.
	ErrAuth = errors.New("rookery: authentication failed")
	// ErrClosed: the client was closed; nothing was applied.
	ErrClosed = errors.New("rookery: client closed")

	// ErrNotFound: the filter does not exist.
	ErrNotFound = errors.New("rookery: not found")
	// ErrExists: a filter of that name exists already.
	ErrExists = errors.New("rookery: filter exists")
	// ErrWrongType: the name holds a filter of another kind.
	ErrWrongType = errors.New("rookery: wrong kind of filter")
	// ErrFull: the filter has no room and cannot grow (a full non-scaling Bloom
	// filter, a full cuckoo filter, or one at its most sub-filters).
	ErrFull = errors.New("rookery: filter is full")
	// ErrTooLarge: the node's memory limit refused the filter or its growth.
	ErrTooLarge = errors.New("rookery: memory limit exceeded")
)

// NodeError is a failure at one node: its RESP address and what happened
// there. The errors a call returns wrap one (or several, one per node, when no
// node could be reached), so errors.As finds the node.
type NodeError struct {
	Addr string
	Err  error
}

// Error is "addr: what happened".
func (e *NodeError) Error() string { return e.Addr + ": " + e.Err.Error() }

// Unwrap returns what happened at the node.
func (e *NodeError) Unwrap() error { return e.Err }

// nodeErrors is every node's failure when none could be reached.
type nodeErrors []error

func (e nodeErrors) Error() string {
	parts := make([]string, len(e))
	for i, err := range e {
		parts[i] = err.Error()
	}
	return "no node reachable: " + strings.Join(parts, "; ")
}

func (e nodeErrors) Unwrap() []error { return e }

// callError is a call the client gave up on: ErrIndeterminate or
// ErrUnavailable, the command, the failure that decided the class, and why
// the client stopped retrying.
type callError struct {
	class error
	cmd   string
	cause error
	stop  error
}

func (e *callError) Error() string {
	s := e.class.Error() + ": " + e.cmd
	switch {
	case e.cause == nil && e.stop != nil:
		s += ": " + e.stop.Error()
	case e.cause != nil && e.stop != nil:
		s += ": " + e.cause.Error() + " (gave up: " + e.stop.Error() + ")"
	case e.cause != nil:
		s += ": " + e.cause.Error()
	}
	return s
}

func (e *callError) Unwrap() []error {
	out := []error{e.class}
	for _, err := range []error{e.cause, e.stop} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// ErrorClass is what an error reply from a node says about a write.
type ErrorClass int

const (
	// Final: the command's own answer or refusal (not found, full, out of
	// memory, a bad argument); trying again gives the same answer.
	Final ErrorClass = iota
	// NotApplied: the write was not applied, for a passing reason (no
	// leader, an election, a node shutting down or full of clients): trying
	// it again, after a pause, is safe.
	NotApplied
	// Indeterminate: the write may or may not have been applied: retry it
	// only with the same idempotency key (WithKey), which applies it once.
	Indeterminate
)

// notAppliedPrefixes start the error replies that nodes send for "not
// applied, try again" (transport/DESIGN.md, Error classes); the server's
// tests pin this list against what it actually sends.
// MOVED (a connection that asked for the slot map, as this client's do, is
// redirected to the shard's leader) ran nothing: the call follows it
// (attempts.follow).
var notAppliedPrefixes = []string{"CLUSTERDOWN", "TRYAGAIN", "SHUTDOWN", "LOADING", "REMOVED", "MOVED ",
	"ERR max number of clients reached", "ERR Protocol error: server request buffers are full"}

// ClassifyError says what an error reply (its text, as any Redis client
// returns it) means for a write, so code that talks to Rookery through
// another Redis client can retry as this package does.
func ClassifyError(reply string) ErrorClass {
	if strings.HasPrefix(reply, "INDETERMINATE") {
		return Indeterminate
	}
	for _, p := range notAppliedPrefixes {
		if strings.HasPrefix(reply, p) {
			return NotApplied
		}
	}
	return Final
}

// replyClass says what a reply means for a retry.
type replyClass int

const (
	answer     replyClass = iota // success or a domain error: final
	notApplied                   // nothing happened: retry, with a pause
	unknown                      // may have happened: retry with the same key only
)

// classify reads a reply.
func classify(r reply) replyClass {
	if !r.isError() {
		return answer
	}
	switch ClassifyError(r.str) {
	case NotApplied:
		return notApplied
	case Indeterminate:
		return unknown
	}
	return answer
}

func hasNotAppliedPrefix(msg string) bool { return ClassifyError(msg) == NotApplied }

// serverErr turns a node's error reply into one of the package's errors,
// keeping the node's text.
func serverErr(msg string) error {
	var kind error
	switch {
	case msg == "ERR not found" || msg == "Not found":
		kind = ErrNotFound
	case msg == "ERR item exists":
		kind = ErrExists
	case strings.HasPrefix(msg, "WRONGTYPE"):
		kind = ErrWrongType
	case msg == "Filter is full" || msg == "Maximum expansions reached" || msg == "ERR non scaling filter is full":
		kind = ErrFull
	case strings.HasPrefix(msg, "OOM"):
		kind = ErrTooLarge
	case strings.HasPrefix(msg, "ERR IDEM sequence number too old"):
		kind = ErrKeyExpired
	case strings.HasPrefix(msg, "NOAUTH"), strings.HasPrefix(msg, "WRONGPASS"):
		kind = ErrAuth
	default:
		return fmt.Errorf("rookery: %s", msg)
	}
	return fmt.Errorf("%w (%s)", kind, msg)
}
