package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/rookerydb/rookery/fsm"
)

// Commands that reach a node holding no replica of their key's shard are
// forwarded whole, as RESP arguments, to a node that holds one (its leader
// first), which runs them as its own clients' and sends back the reply
// (docs/SHARDING.md, "Routing"). The transport that runs them is the
// node's (SetCommandHandler); cluster only carries them.

// opCommand runs a client command on the receiving node, against its replica
// of one shard: body: uvarint shard, u8 protocol, u8 flags, uvarint argument
// count, each argument as uvarint length and bytes; reply: the command's RESP
// reply.
const opCommand byte = 8

// Flags of opCommand.
const (
	cmdStale = 1 << 0 // the connection reads with READONLY
)

// maxCommandArgs bounds a forwarded command's arguments.
const maxCommandArgs = 1 << 20

// CommandHandler runs a RESP command forwarded from another node against this
// node's replica of shard (never forwarding it again), in protocol proto (2
// or 3), reading stale state if stale, and returns its reply.
type CommandHandler func(ctx context.Context, shard int, args [][]byte, proto int, stale bool) []byte

// SetCommandHandler sets what runs forwarded commands (transport's server).
func (n *Node) SetCommandHandler(h CommandHandler) { n.cmdHandler.Store(&h) }

// Hosts reports whether this node holds a replica of shard s (a cluster
// without a map has one shard, on every node).
func (n *Node) Hosts(s int) bool {
	m := n.clusterMap()
	if m == nil {
		return s == 0
	}
	return s >= 0 && s < m.Shards() && n.wants(m, s) && n.groupByID(groupOf(m, s)) != nil
}

// FSMOf is shard s's state machine on this node, nil if it holds no replica.
func (n *Node) FSMOf(s int) *fsm.FSM {
	m := n.clusterMap()
	if m == nil {
		return n.fsm
	}
	if !n.Hosts(s) {
		return nil
	}
	if g := n.groupByID(groupOf(m, s)); g != nil {
		return g.fsm
	}
	return nil
}

// ReadBarrierOf is ReadBarrier for shard s, which this node must hold.
func (n *Node) ReadBarrierOf(ctx context.Context, s int, level ReadLevel) error {
	m := n.clusterMap()
	if m == nil {
		return n.ReadBarrier(ctx, level)
	}
	if !n.Hosts(s) {
		return fmt.Errorf("%w: shard %d", ErrNotHosted, s)
	}
	return n.groupByID(groupOf(m, s)).ReadBarrier(ctx, level)
}

// Forward runs a client command on a node that holds shard s and returns its
// reply as that node sent it. A node that cannot be reached (nothing sent) is
// passed over for the next; once sent, a lost answer is ErrIndeterminate, as
// the command may be a write.
func (n *Node) Forward(ctx context.Context, s int, args [][]byte, proto int, stale bool) ([]byte, error) {
	m := n.clusterMap()
	if m == nil || s < 0 || s >= m.Shards() {
		return nil, fmt.Errorf("%w: shard %d", ErrNotHosted, s)
	}
	flags := byte(0)
	if stale {
		flags |= cmdStale
	}
	body := binary.AppendUvarint(nil, uint64(s))
	body = append(body, byte(proto), flags)
	body = binary.AppendUvarint(body, uint64(len(args)))
	for _, a := range args {
		body = binary.AppendUvarint(body, uint64(len(a)))
		body = append(body, a...)
	}
	last := errors.New("no replica of the shard is known alive")
	for _, addr := range n.shardAddrs(m, s) {
		ch, err := n.peer(addr).send(opCommand, body)
		if err != nil {
			last = err
			continue
		}
		select {
		case r := <-ch:
			switch {
			case r.err != nil:
				return nil, fmt.Errorf("%w: %v after forwarding to %s", ErrIndeterminate, r.err, addr)
			case r.code == codeNotHosted:
				// Its map or its groups are behind or ahead of this node's:
				// nothing ran there; another replica may take it.
				last = errOf(r.code, r.body)
				continue
			case r.code != codeOK:
				return nil, errOf(r.code, r.body)
			}
			return r.body, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: no answer from %s: %v", ErrIndeterminate, addr, ctx.Err())
		}
	}
	return nil, fmt.Errorf("%w: shard %d: %v", ErrNoLeader, s, last)
}

// serveCommand runs a forwarded command through the node's handler.
func (n *Node) serveCommand(ctx context.Context, body []byte) ([]byte, error) {
	h := n.cmdHandler.Load()
	if h == nil {
		return nil, errors.New("this node runs no commands")
	}
	shard, proto, flags, args, err := decodeCommand(body)
	if err != nil {
		return nil, err
	}
	if !n.Hosts(shard) {
		return nil, fmt.Errorf("%w: shard %d", ErrNotHosted, shard)
	}
	return (*h)(ctx, shard, args, proto, flags&cmdStale != 0), nil
}

// decodeCommand reads opCommand's body.
func decodeCommand(b []byte) (shard, proto int, flags byte, args [][]byte, err error) {
	bad := errors.New("bad forwarded command")
	s, k := binary.Uvarint(b)
	if k <= 0 || s >= maxGroupID || len(b) < k+2 {
		return 0, 0, 0, nil, bad
	}
	shard = int(s)
	proto, flags, b = int(b[k]), b[k+1], b[k+2:]
	n, k := binary.Uvarint(b)
	if k <= 0 || n == 0 || n > maxCommandArgs || n > uint64(len(b)) {
		return 0, 0, 0, nil, bad
	}
	b = b[k:]
	args = make([][]byte, 0, n)
	for range n {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return 0, 0, 0, nil, bad
		}
		args = append(args, b[k:k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 || proto != 2 && proto != 3 {
		return 0, 0, 0, nil, bad
	}
	return shard, proto, flags, args, nil
}

// ShardCount is the number of shards, 0 for a cluster without a map (one
// group on every node, which needs no routing).
func (n *Node) ShardCount() int {
	if m := n.clusterMap(); m != nil {
		return m.Shards()
	}
	return 0
}

// LocalFSMs lists the state machines of the shards this node holds (group
// 0's alone without a map).
func (n *Node) LocalFSMs() []*fsm.FSM {
	m := n.clusterMap()
	if m == nil {
		return []*fsm.FSM{n.fsm}
	}
	var out []*fsm.FSM
	for s := range m.Groups {
		if f := n.FSMOf(s); f != nil {
			out = append(out, f)
		}
	}
	return out
}

// OpenBackupOf is OpenBackup for shard s: its group on this node, which must
// hold it (ErrNotHosted) and lead it unless stale (ErrNotLeader). Without a
// map, shard 0 is group 0.
func (n *Node) OpenBackupOf(ctx context.Context, s int, stale bool) (*Backup, error) {
	g, err := n.shardGroup(s)
	if err != nil {
		return nil, err
	}
	return g.OpenBackup(ctx, stale)
}

// RestoreBackupOf is RestoreBackup for shard s, on its leader.
func (n *Node) RestoreBackupOf(ctx context.Context, s int, r io.Reader, size int64) (*Restored, error) {
	g, err := n.shardGroup(s)
	if err != nil {
		return nil, err
	}
	return g.RestoreBackup(ctx, r, size)
}

// shardGroup is shard s's group on this node.
func (n *Node) shardGroup(s int) (*group, error) {
	m := n.clusterMap()
	if m == nil {
		if s != 0 {
			return nil, fmt.Errorf("%w: shard %d of a cluster of one", ErrNotHosted, s)
		}
		return n.group, nil
	}
	if !n.Hosts(s) {
		return nil, fmt.Errorf("%w: shard %d", ErrNotHosted, s)
	}
	return n.groupByID(groupOf(m, s)), nil
}
