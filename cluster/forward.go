package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// Commands that reach a node holding no replica of their key's shard are
// forwarded whole, as RESP arguments, to a node that holds one (its leader
// first), which runs them as its own clients' and sends back the reply
// (docs/SHARDING.md, "Routing"). The transport that runs them is the
// node's (SetCommandHandler); cluster only carries them.

// Flags of opCommand.
const (
	cmdStale = 1 << 0 // the connection reads with READONLY
)

// maxCommandArgs bounds a forwarded command's arguments.
const maxCommandArgs = 1 << 20

// CommandHandler runs a RESP command forwarded from another node against this
// node's replica of a shard (never forwarding it again), in protocol proto (2
// or 3), reading stale state if stale, and returns its reply.
type CommandHandler func(ctx context.Context, rep *Replica, args [][]byte, proto int, stale bool) []byte

// SetCommandHandler sets what runs forwarded commands (transport's server).
func (n *Node) SetCommandHandler(h CommandHandler) { n.cmdHandler.Store(&h) }

// Forward runs a client command on a node that holds shard s and returns its
// reply as that node sent it. A node that cannot be reached (nothing sent) is
// passed over for the next; once sent, a lost answer is ErrIndeterminate, as
// the command may be a write. While no replica can be reached at all (its
// leader just died, gossip not caught up) it tries them again for up to the
// hold of a write (hold.go), since nothing was sent; the replica that takes
// the command waits for its shard's leader itself.
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
	var out []byte
	err := newReadHold(holdFor(n.cfg), holdPoll, n.stop).do(ctx, func(ctx context.Context) (err error) {
		out, err = n.forwardOnce(ctx, s, body)
		return err
	}, func(err error) bool { return errors.Is(err, errNothingSent) })
	if errors.Is(err, errNothingSent) {
		return nil, fmt.Errorf("%w: shard %d: %v", ErrNoLeader, s, err)
	}
	return out, err
}

// errNothingSent: no replica of the shard took a forwarded command.
var errNothingSent = errors.New("no replica took the command")

// forwardOnce tries each replica of shard s once, in the order shardPeers
// gives, under the newest map.
func (n *Node) forwardOnce(ctx context.Context, s int, body []byte) ([]byte, error) {
	m := n.clusterMap()
	if m == nil || s >= m.Shards() {
		return nil, fmt.Errorf("%w: shard %d", ErrNotHosted, s)
	}
	last := errors.New("no replica of the shard is known alive")
	for _, p := range n.shardPeers(m, s) {
		addr := p.addr
		ch, err := n.peer(p.id, addr).send(opCommand, body)
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
	return nil, fmt.Errorf("%w: %v", errNothingSent, last)
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
	rep, err := n.Replica(shard)
	if err != nil {
		return nil, err
	}
	return (*h)(ctx, rep, args, proto, flags&cmdStale != 0), nil
}

// decodeCommand reads opCommand's body: uvarint shard, u8 protocol, u8
// flags, uvarint argument count, each argument as uvarint length and bytes
// (the reply is the command's RESP reply).
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
