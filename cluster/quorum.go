package cluster

import (
	"errors"

	"github.com/hashicorp/raft"
)

// errAskRaft is a tally's verdict when only peers of an older build (that do
// not know the confirm request) could complete the quorum: the leader falls
// back to raft's VerifyLeader.
var errAskRaft = errors.New("confirm with raft's VerifyLeader")

// peerAnswer is one peer's answer to a confirm request.
type peerAnswer struct{ yes, legacy bool }

// answerOf reads a confirm request's outcome: nil is yes; "unknown request"
// is a peer of a build without it.
func answerOf(err error) peerAnswer {
	return peerAnswer{yes: err == nil, legacy: errors.Is(err, errUnknownOp)}
}

// tally counts a leadership confirmation: a quorum of the configuration's
// voters must say yes, the leader's own vote among them. It decides nothing
// by itself and reads no clock or network (readindex.go sends the requests).
type tally struct {
	peers               []raft.Server // the other voters
	voters, need        int
	yes, no, legacyPeer int
}

func newTally(servers []raft.Server, self string) *tally {
	t := &tally{}
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		t.voters++
		if string(s.ID) == self {
			t.yes++
		} else {
			t.peers = append(t.peers, s)
		}
	}
	t.need = t.voters/2 + 1
	return t
}

func (t *tally) add(a peerAnswer) {
	switch {
	case a.yes:
		t.yes++
	case a.legacy:
		t.legacyPeer++
	default:
		t.no++
	}
}

// decided reports whether the answers so far settle it: a quorum said yes, or
// too many said no for one to.
func (t *tally) decided() bool {
	return t.yes >= t.need || t.voters-t.no < t.need
}

// verdict is the outcome: nil (confirmed), errAskRaft (only older peers can
// complete the quorum) or ErrNotLeader.
func (t *tally) verdict() error {
	switch {
	case t.yes >= t.need:
		return nil
	case t.voters-t.no < t.need:
		return ErrNotLeader // a quorum can no longer say yes
	case t.yes+t.legacyPeer >= t.need:
		return errAskRaft
	}
	return ErrNotLeader
}
