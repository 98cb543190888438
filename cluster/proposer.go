package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
	"github.com/rookerydb/rookery/internal/mutant"
)

// Writes reach the log through one proposer goroutine. It takes every proposal
// waiting at that moment (up to maxBatch) and proposes them as one log entry, so
// a burst of writes costs one append and one fsync, as Redis's appendfsync always
// costs one fsync per event-loop pass. Raft applies entries in log order and the
// proposer keeps submission order inside a batch, so writes submitted in order
// are applied in order.
//
// At most maxInflight entries are in the log's hands at once. While they are, new
// writes wait in the queue and then go out together as the next entry: group
// commit. Handing raft every write as it arrives instead makes many small entries,
// and raft's leader loop, picking at random between new entries and commit
// notices, then often writes another entry to disk before it answers the ones
// already durable, which costs a whole fsync of latency.

const (
	maxBatch      = 1024
	maxBatchBytes = 4 << 20
	maxInflight   = 1
)

type proposal struct {
	cmd      *fsm.Command
	fut      *Future
	reserved int64 // admitted bytes to release once resolved
}

type inflightBatch struct {
	f     raft.ApplyFuture
	props []proposal
	start time.Time
}

// Submit queues a write. On the leader it is proposed to the log; on a follower
// it is forwarded to the leader, in submission order. The Future resolves with the
// leader's apply result or with one of the package's errors.
func (n *Node) Submit(cmd *fsm.Command) *Future {
	fut := NewFuture()
	if n.stopping() {
		fut.Resolve(nil, ErrShutdown)
		return fut
	}
	if n.IsLeader() {
		n.submitLocal(cmd, fut)
		return fut
	}
	_, addr := n.Leader()
	if addr == "" {
		fut.Resolve(nil, ErrNoLeader)
		return fut
	}
	n.forward(addr, cmd, fut)
	return fut
}

// submitLocal queues cmd for the proposer; the caller has checked leadership.
func (n *Node) submitLocal(cmd *fsm.Command, fut *Future) {
	select {
	case n.props <- proposal{cmd: cmd, fut: fut}:
	case <-n.stop:
		fut.Resolve(nil, ErrShutdown)
	}
}

// forward sends cmd to the leader at addr and resolves fut with its answer.
func (n *Node) forward(addr string, cmd *fsm.Command, fut *Future) {
	// In the version the whole cluster reads, since the leader may be older;
	// a command that version cannot carry, the leader would refuse anyway.
	v := n.forwardCodec()
	if need := fsm.MinCodec(cmd); need > v {
		fut.Resolve(nil, needsUpgrade(need, v))
		return
	}
	ch, err := n.peer(addr).send(opApply, fsm.EncodeCommandVersion(cmd, v))
	if err != nil {
		// Never sent: definitely not applied.
		n.log.Debug("forward to leader", "leader", addr, "err", err)
		fut.Resolve(nil, ErrNoLeader)
		return
	}
	go func() {
		timer := time.NewTimer(n.cfg.ApplyTimeout + time.Second)
		defer timer.Stop()
		select {
		case r := <-ch:
			switch {
			case r.err != nil:
				fut.Resolve(nil, fmt.Errorf("%w: %v after forwarding", ErrIndeterminate, r.err))
			case r.code != codeOK:
				fut.Resolve(nil, errOf(r.code, r.body))
			default:
				res, err := fsm.DecodeResult(r.body)
				if err != nil {
					fut.Resolve(nil, fmt.Errorf("%w: undecodable reply: %v", ErrIndeterminate, err))
					return
				}
				fut.Resolve(res, nil)
			}
		case <-timer.C:
			fut.Resolve(nil, fmt.Errorf("%w: no reply from the leader", ErrIndeterminate))
		case <-n.stop:
			fut.Resolve(nil, fmt.Errorf("%w: node shutting down", ErrIndeterminate))
		}
	}()
}

func (n *Node) proposeLoop() {
	defer n.wg.Done()
	batch := make([]proposal, 0, maxBatch)
	for {
		select {
		case p := <-n.props:
			batch = append(batch[:0], p)
		case <-n.stop:
			n.drainProposals()
			return
		}
		// Wait for the log, then take everything that arrived meanwhile.
		select {
		case n.slots <- struct{}{}:
		case <-n.stop:
			batch[0].fut.Resolve(nil, ErrShutdown)
			n.drainProposals()
			return
		}
		size := approxSize(batch[0].cmd)
	fill:
		for len(batch) < maxBatch && size < maxBatchBytes {
			select {
			case p := <-n.props:
				batch = append(batch, p)
				size += approxSize(p.cmd)
			default:
				break fill
			}
		}
		n.propose(batch)
	}
}

func (n *Node) drainProposals() {
	for {
		select {
		case p := <-n.props:
			p.fut.Resolve(nil, ErrShutdown)
		default:
			return
		}
	}
}

func approxSize(c *fsm.Command) int {
	s := len(c.Key) + len(c.Data) + 32
	for _, it := range c.Items {
		s += len(it) + 2
	}
	return s
}

// propose admits, stamps and proposes one batch.
func (n *Node) propose(batch []proposal) {
	size := 0
	for _, p := range batch {
		size += approxSize(p.cmd)
	}
	if err := n.refuseWrites(size); err != nil {
		for _, p := range batch {
			p.fut.Resolve(nil, err)
		}
		<-n.slots
		return
	}
	now := n.now().UnixNano()
	props := make([]proposal, 0, len(batch))
	cmds := make([]*fsm.Command, 0, len(batch))
	v := n.entryCodec()
	mb := memBudget{v: v}
	mb.limit, mb.who = n.memLimit()
	for _, p := range batch {
		if need := fsm.MinCodec(p.cmd); need > v {
			p.fut.Resolve(nil, needsUpgrade(need, v))
			continue
		}
		if err := n.admit(&p, mb); err != nil {
			p.fut.Resolve(nil, err)
			continue
		}
		mb.stamp(p.cmd)
		p.cmd.Time = now
		props = append(props, p)
		cmds = append(cmds, p.cmd)
	}
	if len(props) == 0 {
		<-n.slots
		return
	}
	var data []byte
	if len(cmds) == 1 {
		data = fsm.EncodeCommandVersion(cmds[0], v)
	} else {
		data = fsm.EncodeBatchVersion(cmds, v)
	}
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	if mutant.On(mutant.AckAtProposal) {
		props = ackAtProposal(props)
	}
	select {
	case n.inflight <- inflightBatch{f: f, props: props, start: time.Now()}:
	case <-n.stop:
		<-n.slots
		for _, p := range props {
			p.fut.Resolve(nil, fmt.Errorf("%w: node shutting down", ErrIndeterminate))
		}
	}
}

// needsUpgrade refuses a command of log format need while the cluster reads
// only up to have.
func needsUpgrade(need, have byte) error {
	return fmt.Errorf("%w: it needs log format %d and a member reads only up to %d; upgrade every node",
		ErrNeedsUpgrade, need, have)
}

// ackAtProposal is the mutant that acknowledges each write as a success when
// it is proposed, and leaves the real outcome to futures nobody waits for.
func ackAtProposal(props []proposal) []proposal {
	out := make([]proposal, len(props))
	for i, p := range props {
		r := fsm.GuessResult(p.cmd)
		p.fut.Resolve(r, nil)
		p.fut = NewFuture()
		out[i] = p
	}
	return out
}

// admit refuses a filter that would take a replica past its memory limit (the
// smallest of the servers', memlimit.go), before it reaches the log.
func (n *Node) admit(p *proposal, mb memBudget) error {
	if mb.limit == 0 {
		return nil
	}
	need := n.fsm.NeedBytes(p.cmd)
	if need == 0 {
		return nil
	}
	used := n.fsm.MemoryBytes() + uint64(n.reserved.Load())
	if used+need > mb.limit {
		return mb.admitErr(need, used)
	}
	n.reserved.Add(int64(need))
	p.reserved = int64(need)
	return nil
}

func (n *Node) resolveLoop() {
	defer n.wg.Done()
	for {
		var b inflightBatch
		select {
		case b = <-n.inflight:
		case <-n.stop:
			// Raft is shutting down too; what is still in flight may or may not
			// have been committed.
			for {
				select {
				case b := <-n.inflight:
					n.resolveBatch(b)
				default:
					return
				}
			}
		}
		n.resolveBatch(b)
	}
}

func (n *Node) resolveBatch(b inflightBatch) {
	err := n.await(b.f)
	<-n.slots
	n.metrics.observeApply(time.Since(b.start), len(b.props), err)
	for _, p := range b.props {
		if p.reserved != 0 {
			n.reserved.Add(-p.reserved)
		}
	}
	if err != nil {
		err = translateApplyErr(err)
		for _, p := range b.props {
			p.fut.Resolve(nil, err)
		}
		return
	}
	switch r := b.f.Response().(type) {
	case *fsm.Halt:
		// Committed, so applied by every healthy replica, but not here.
		for _, p := range b.props {
			p.fut.Resolve(nil, fmt.Errorf("%w: %w on this node", ErrIndeterminate, r))
		}
	case *fsm.Result:
		b.props[0].fut.Resolve(r, nil)
	case []*fsm.Result:
		for i, p := range b.props {
			if i < len(r) {
				p.fut.Resolve(r[i], nil)
			} else {
				p.fut.Resolve(nil, fmt.Errorf("%w: missing result", ErrIndeterminate))
			}
		}
	default:
		for _, p := range b.props {
			p.fut.Resolve(nil, fmt.Errorf("%w: unexpected apply response %T", ErrIndeterminate, r))
		}
	}
}

// translateApplyErr maps raft's errors onto ours: definitely-not-applied or
// indeterminate.
func translateApplyErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return ErrNotLeader
	case errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// Refused before it was appended.
		return ErrNotLeader
	case errors.Is(err, raft.ErrLeadershipLost):
		return fmt.Errorf("%w: leadership lost after proposing", ErrIndeterminate)
	case errors.Is(err, raft.ErrRaftShutdown):
		return fmt.Errorf("%w: node shut down after proposing", ErrIndeterminate)
	}
	return fmt.Errorf("%w: %v", ErrIndeterminate, err)
}

// applyRemote serves a write forwarded by a follower.
func (n *Node) applyRemote(ctx context.Context, body []byte) (*Future, error) {
	typ, cmds, err := fsm.DecodeEntry(body)
	if err != nil || typ != fsm.TypeCommand || len(cmds) != 1 {
		return nil, fmt.Errorf("bad forwarded command: %v", err)
	}
	if !n.IsLeader() {
		return nil, ErrNotLeader
	}
	fut := NewFuture()
	n.submitLocal(cmds[0], fut)
	return fut, nil
}
