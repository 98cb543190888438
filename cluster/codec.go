package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// Log formats. The entry codec version is the log format: every node applies
// formats up to the one it advertises in gossip (meta.Codec: fsm.CodecVersion,
// or Config.MaxLogFormat when a test holds it lower), and halts with "needs a
// newer rookery" at an entry above it. The leader writes entries in the lowest
// format any server of the Raft configuration reads, voters and non-voters
// alike (a non-voter applies every entry too, and may be promoted), so a rolling
// upgrade never hands a node an entry it cannot apply and the cluster moves to
// a new format only once every server has been upgraded.
//
// A member that gossips no format is of a build before formats were gossiped,
// which reads format 1 only. A server the leader has not heard from since it
// started (gossip is slower than Raft after a restart) may be an old build:
// the leader does not raise the format for it. It is taken to read the format
// the leader last wrote, or format 2 (what every build that gossips a format
// reads) before this leader has written anything. A follower forwards writes
// in the lowest format any member gossips, since the leader may be any of them.

// logFormat is the highest log format this node applies and advertises.
func (n *Node) logFormat() byte {
	if v := n.cfg.MaxLogFormat; v >= fsm.CodecV1 && v < fsm.CodecVersion {
		return v
	}
	return fsm.CodecVersion
}

// codecOf is the version a member's metadata says it reads.
func codecOf(m meta) byte {
	if m.Codec <= 0 {
		return fsm.CodecV1
	}
	return byte(min(m.Codec, fsm.CodecVersion))
}

// entryCodec returns the codec version the leader writes entries in now, and
// notes it as the format in use. It is cheap (the configuration is a copy raft
// keeps; servers are few), so it is computed for every entry rather than
// cached.
func (g *group) entryCodec() byte {
	v := g.codecFor(g.raft.GetConfiguration())
	g.codecUsed.Store(uint32(v))
	return v
}

// codecFor is the lowest format the servers of a configuration read.
func (g *group) codecFor(f raft.ConfigurationFuture) byte {
	if f.Error() != nil {
		return fsm.CodecV1
	}
	v := g.n.logFormat()
	unheard := byte(fsm.CodecV2)
	if u := g.codecUsed.Load(); u != 0 {
		unheard = byte(u)
	}
	g.n.memMu.Lock()
	defer g.n.memMu.Unlock()
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == g.n.cfg.ID {
			continue
		}
		if m, ok := g.n.memTable[string(s.ID)]; ok {
			v = min(v, codecOf(m.meta))
		} else {
			v = min(v, unheard)
		}
	}
	return v
}

// LogFormatInUse is the log format the leader writes entries in now; 0 on a
// node that is not the leader.
func (g *group) LogFormatInUse() int {
	if g.raft.State() != raft.Leader {
		return 0
	}
	return int(g.codecFor(g.raft.GetConfiguration()))
}

// noteCodecs recomputes the version followers forward in; called with memMu
// held whenever the member table changes.
func (n *Node) noteCodecs() {
	v := n.logFormat()
	for _, m := range n.memTable {
		v = min(v, codecOf(m.meta))
	}
	n.fwdCodec.Store(uint32(v))
}

// forwardCodec is the version a follower forwards a write in.
func (n *Node) forwardCodec() byte {
	if v := n.fwdCodec.Load(); v != 0 {
		return byte(v)
	}
	return n.logFormat()
}
