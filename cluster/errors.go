package cluster

import (
	"errors"

	"github.com/rookerydb/rookery/fsm"
)

// Class is what an error tells the caller of a write about it. Every error
// the package returns from a write is in exactly one class, decided here,
// once; the node-to-node RPC, RESP (transport) and HTTP render from it, and
// the Go client's classification is pinned against what transport sends
// (transport/contract_test.go).
type Class uint8

const (
	// ClassAnswer is the command's own outcome: the state machine's answer
	// (including its refusals: not found, full, wrong type), or an operator
	// request refused for a reason of its own. Final: retrying changes
	// nothing.
	ClassAnswer Class = iota
	// ClassNotApplied is definitely not applied, for a passing reason (no
	// leader, an election, a node shutting down): try again shortly.
	ClassNotApplied
	// ClassRefused is definitely not applied, for a reason that stays until
	// something changes (memory, disk, an upgrade): trying again at once
	// does not help.
	ClassRefused
	// ClassIndeterminate may or may not have been applied (leadership lost
	// after proposing, a timeout, a forwarding connection lost after
	// sending): retry only under the same session, which applies it once.
	ClassIndeterminate
)

func (c Class) String() string {
	switch c {
	case ClassNotApplied:
		return "not applied"
	case ClassRefused:
		return "refused"
	case ClassIndeterminate:
		return "indeterminate"
	}
	return "answer"
}

// ErrorKind is one error of the contract: its class and how it travels.
type ErrorKind struct {
	Err   error
	Class Class
	// Code is its response code on the node-to-node RPC (rpc.go): stable
	// across versions, since nodes of two builds talk during an upgrade.
	Code byte
	// RESP is the start of its RESP error reply ("CLUSTERDOWN", "TRYAGAIN",
	// "OOM command not allowed:", ...) and Text what follows it, or "" for
	// the error's own text; transport renders the reply from them, and
	// clients act on the first word.
	RESP, Text string
}

// Contract lists every error of the write path that is not the command's own
// answer. An error matching none of them (errors.Is) is indeterminate: a
// write whose fate a node cannot vouch for is never reported as failed.
var Contract = []ErrorKind{
	{ErrNoLeader, ClassNotApplied, codeNoLeader, "CLUSTERDOWN", "no leader"},
	{ErrNotLeader, ClassNotApplied, codeNotLeader, "TRYAGAIN", "leadership changed, not applied"},
	{ErrShutdown, ClassNotApplied, codeShutdown, "SHUTDOWN", "node is shutting down"},
	{ErrTooLarge, ClassRefused, codeTooLarge, "OOM command not allowed:", ""},
	{ErrDiskFull, ClassRefused, codeDiskFull, "ERR", ""},
	{ErrDiskError, ClassRefused, codeDiskError, "ERR", ""},
	{ErrNeedsUpgrade, ClassRefused, codeNeedsUpgrade, "ERR", ""},
	{ErrRemoved, ClassNotApplied, codeRemoved, "REMOVED", ""},
	{ErrNotHosted, ClassNotApplied, codeNotHosted, "TRYAGAIN", ""},
	{fsm.ErrMapGroup, ClassNotApplied, codeMapGroup, "TRYAGAIN", ""},
	{ErrIndeterminate, ClassIndeterminate, codeIndeterminate, "INDETERMINATE", ""},
}

// KindOf finds err's entry of the Contract; ok is false for an error that is
// none of them.
func KindOf(err error) (k ErrorKind, ok bool) {
	// Indeterminate first: "leadership lost after proposing" wraps both
	// ErrIndeterminate and the cause, and the uncertainty is what counts.
	for _, k := range Contract {
		if k.Class == ClassIndeterminate && errors.Is(err, k.Err) {
			return k, true
		}
	}
	for _, k := range Contract {
		if errors.Is(err, k.Err) {
			return k, true
		}
	}
	return ErrorKind{}, false
}

// ClassOf classifies an error of the write path: nil is an answer, and an
// error the Contract does not list is indeterminate. (The state machine's
// domain outcomes are answers; transport renders them before it asks.)
func ClassOf(err error) Class {
	if err == nil {
		return ClassAnswer
	}
	if k, ok := KindOf(err); ok {
		return k.Class
	}
	return ClassIndeterminate
}

// remoteError is an error of the Contract as it arrived from another node:
// its text as the node sent it, and errors.Is finds its kind.
type remoteError struct {
	kind error
	msg  string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }
