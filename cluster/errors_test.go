package cluster

import (
	"errors"
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/fsm"
)

// TestContractOnTheWire: every error of the contract crosses the node-to-node
// RPC as itself (errors.Is finds it, its text arrives as sent, unchanged),
// and the wire codes are those every earlier build sends.
func TestContractOnTheWire(t *testing.T) {
	wire := map[error]byte{ErrNoLeader: 1, ErrNotLeader: 2, ErrIndeterminate: 3, ErrShutdown: 4, ErrTooLarge: 5,
		ErrDiskFull: 7, ErrDiskError: 8, ErrNeedsUpgrade: 9, ErrRemoved: 10, ErrNotHosted: 11,
		fsm.ErrMapGroup: 12}
	if len(wire) != len(Contract) {
		t.Fatalf("%d errors in the contract, %d pinned here: pin the new one's code", len(Contract), len(wire))
	}
	for _, k := range Contract {
		if k.Code != wire[k.Err] {
			t.Errorf("%v travels as code %d, earlier builds use %d", k.Err, k.Code, wire[k.Err])
		}
		sent := fmt.Errorf("%w: it needs log format 5 and a member reads only up to 4", k.Err)
		got := errOf(codeOf(sent), []byte(sent.Error()))
		if !errors.Is(got, k.Err) || got.Error() != sent.Error() || ClassOf(got) != k.Class {
			t.Errorf("%v arrived as %q (%v)", sent, got, ClassOf(got))
		}
	}
	other := errors.New("a filter named x exists")
	if got := errOf(codeOf(other), []byte(other.Error())); ClassOf(got) != ClassIndeterminate || got.Error() != "peer: a filter named x exists" {
		t.Errorf("an error outside the contract arrived as %q (%v)", got, ClassOf(got))
	}
	if got := errOf(codeError, []byte("unknown request")); !errors.Is(got, errUnknownOp) {
		t.Errorf("an older peer's unknown request arrived as %v", got)
	}
}

// TestClassOf: the uncertainty of an indeterminate error outweighs the cause
// it wraps, and anything the contract does not list is indeterminate.
func TestClassOf(t *testing.T) {
	for err, want := range map[error]Class{
		nil:                              ClassAnswer,
		ErrNoLeader:                      ClassNotApplied,
		fmt.Errorf("x: %w", ErrShutdown): ClassNotApplied,
		ErrDiskFull:                      ClassRefused,
		fmt.Errorf("%w: leadership lost: %w", ErrIndeterminate, ErrNotLeader): ClassIndeterminate,
		errors.New("anything"): ClassIndeterminate,
	} {
		if got := ClassOf(err); got != want {
			t.Errorf("ClassOf(%v) = %v, want %v", err, got, want)
		}
	}
}
