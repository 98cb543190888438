package cluster

import (
	"fmt"

	"github.com/rookerydb/rookery/fsm"
)

// Every replica's memory is respected. Each node gossips its --max-memory
// (meta.Mem), as it gossips its log format. The leader takes the smallest
// limit among the servers of the configuration, voters and non-voters alike
// (a non-voter applies every entry too, and may be promoted), and:
//
//   - admits a write that creates or grows filters against it, before it is
//     proposed, naming the node whose limit it would pass (admit);
//   - stamps it into every command that may create or grow a filter
//     (fsm.Command.MemLimit, log format 7), so that the state machine of every
//     replica refuses, at the same index, a creation or a growth inside apply
//     that admission could not foresee (fsm/memlimit.go).
//
// A server whose limit the leader has not heard (an older build, or gossip
// slower than Raft after a restart) does not lower it.

// memMeta is the meta.Mem a node with limit max gossips: the limit in bytes,
// or -1 for none.
func memMeta(max uint64) int64 {
	if max == 0 || max > 1<<62 {
		return -1
	}
	return int64(max)
}

// memLimit is the smallest memory limit among the servers of the group's
// latest configuration (a shard's replicas, not every node), and the node that
// has it; 0 when none has a limit.
func (g *group) memLimit() (limit uint64, who string) {
	n := g.n
	limit, who = n.cfg.MaxMemory, n.cfg.ID
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return limit, who
	}
	n.memMu.Lock()
	defer n.memMu.Unlock()
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		m, ok := n.memTable[string(s.ID)]
		if !ok || m.Mem <= 0 {
			continue
		}
		if l := uint64(m.Mem); limit == 0 || l < limit {
			limit, who = l, string(s.ID)
		}
	}
	return limit, who
}

// mayAllocate reports whether applying c may create or grow a filter.
func mayAllocate(c *fsm.Command) bool {
	switch c.Op {
	case fsm.OpReserve, fsm.OpAdd:
		return true
	case fsm.OpLoadChunk:
		return c.Iter == 1
	}
	return false
}

// memBudget is the limit a batch of proposals is admitted against and
// stamped with.
type memBudget struct {
	limit uint64
	who   string
	v     byte // the log format the batch is written in
}

// stamp carries the limit in c when the log format can.
func (b memBudget) stamp(c *fsm.Command) {
	if b.limit != 0 && b.v >= fsm.CodecV7 && mayAllocate(c) {
		c.MemLimit = b.limit
	}
}

// admitErr says which node's limit a write of need more bytes would pass.
func (b memBudget) admitErr(need, used uint64) error {
	return fmt.Errorf("%w: %d more bytes of filters would take node %s past its limit of %d bytes "+
		"(--max-memory, the smallest among the servers; %d in use)", ErrTooLarge, need, b.who, b.limit, used)
}
