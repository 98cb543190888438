package cluster

import (
	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// The leader writes log entries in the highest codec version every voter can
// read, so that during a rolling upgrade no old node is handed an entry it
// cannot apply (it would halt). Every node gossips the version it writes
// (meta.Codec); a member that gossips none is of a build before versions were
// gossiped, which reads version 1 only. A voter the leader has not heard from
// since it started is assumed to run this build: it is down or about to be
// heard from, and holding every entry to the oldest format for it would leave
// them all without a checksum. A follower forwards writes in the lowest version
// any member gossips, since the leader may be any of them.

// codecOf is the version a member's metadata says it reads.
func codecOf(m meta) byte {
	if m.Codec == 0 {
		return fsm.CodecV1
	}
	return byte(min(m.Codec, fsm.CodecVersion))
}

// entryCodec returns the codec version the leader writes entries in now. It
// is cheap (the configuration is a copy raft keeps; voters are few), so it is
// computed for every entry rather than cached.
func (n *Node) entryCodec() byte {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return fsm.CodecV1
	}
	v := byte(fsm.CodecVersion)
	n.memMu.Lock()
	defer n.memMu.Unlock()
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == n.cfg.ID {
			continue
		}
		if m, ok := n.memTable[string(s.ID)]; ok {
			v = min(v, codecOf(m.meta))
		}
	}
	return v
}

// noteCodecs recomputes the version followers forward in; called with memMu
// held whenever the member table changes.
func (n *Node) noteCodecs() {
	v := byte(fsm.CodecVersion)
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
	return fsm.CodecVersion
}
