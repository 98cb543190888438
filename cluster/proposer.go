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
	if n.stopping() {
		fut := NewFuture()
		fut.Resolve(nil, ErrShutdown)
		return fut
	}
	if err := n.removedErr(); err != nil {
		fut := NewFuture()
		fut.Resolve(nil, err)
		return fut
	}
	m := n.clusterMap()
	if m == nil {
		return n.group.submit(cmd)
	}
	return n.SubmitTo(shardOf(m, cmd.Key), cmd)
}

// SubmitTo queues a write to shard s (a keyless write fanned out to every
// shard, such as FLUSHALL, names each): to the shard's group here if the map
// places it here, else forwarded to the node that leads it.
func (n *Node) SubmitTo(s int, cmd *fsm.Command) *Future {
	m := n.clusterMap()
	if m == nil {
		if n.awaitingMap() {
			// A write kept in group 0 now would stop the cluster from
			// sharding (createMap), so it waits for the map.
			fut := NewFuture()
			fut.Resolve(nil, fmt.Errorf("%w: waiting for the cluster's map of shards", ErrNoLeader))
			return fut
		}
		return n.group.submit(cmd)
	}
	fut := NewFuture()
	if s < 0 || s >= m.Shards() {
		fut.Resolve(nil, fmt.Errorf("%w: shard %d of %d", ErrNotHosted, s, m.Shards()))
		return fut
	}
	if !m.Groups[s].Created {
		// Not even on its creator: a write is taken once the shard has its
		// replicas (control, shardloop.go).
		fut.Resolve(nil, fmt.Errorf("%w: shard %d is not created yet", ErrNoLeader, s))
		return fut
	}
	gid := groupOf(m, s)
	if g := n.groupByID(gid); g != nil && n.wants(m, s) {
		return g.submit(cmd)
	}
	addrs := n.shardAddrs(m, s)
	if len(addrs) == 0 {
		fut.Resolve(nil, fmt.Errorf("%w: no replica of shard %d is known alive", ErrNoLeader, s))
		return fut
	}
	n.forwardTo(gid, addrs, cmd, fut, n.stop)
	return fut
}

// submit queues a write to the group: proposed on its leader, forwarded to
// it from a follower, held while no leader is known (hold.go).
func (g *group) submit(cmd *fsm.Command) *Future {
	fut := NewFuture()
	g.hold.submit(cmd, fut)
	return fut
}

// dispatch proposes cmd here if this node leads, or forwards it to the
// leader, and reports whether a leader was known.
func (g *group) dispatch(cmd *fsm.Command, fut *Future) bool {
	if g.raft == nil {
		return false
	}
	if g.IsLeader() {
		g.submitLocal(cmd, fut)
		return true
	}
	_, addr := g.Leader()
	if addr == "" {
		return false
	}
	g.forward(addr, cmd, fut)
	return true
}

// submitLocal queues cmd for the proposer; the caller has checked leadership.
func (g *group) submitLocal(cmd *fsm.Command, fut *Future) { g.prop.submit(cmd, fut) }

// forward sends cmd to the leader at addr and resolves fut with its answer.
func (g *group) forward(addr string, cmd *fsm.Command, fut *Future) {
	g.n.forwardTo(g.id, []string{addr}, cmd, fut, g.stop)
}

// forwardTo sends cmd, for group gid, to the first node of addrs it reaches
// (the group's leader, or a replica that forwards it on) and resolves fut with
// the answer.
func (n *Node) forwardTo(gid int, addrs []string, cmd *fsm.Command, fut *Future, stop <-chan struct{}) {
	// In the version the whole cluster reads, since the leader may be older;
	// a command that version cannot carry, the leader would refuse anyway.
	v := n.forwardCodec()
	if need := fsm.MinCodec(cmd); need > v {
		fut.Resolve(nil, needsUpgrade(need, v))
		return
	}
	op, body := groupOp(gid, opApply, fsm.EncodeCommandVersion(cmd, v))
	var ch <-chan rpcResp
	var err error
	for _, addr := range addrs {
		if ch, err = n.peer(addr).send(op, body); err == nil {
			break
		}
		// Never sent: definitely not applied; the next may take it.
		n.log.Debug("forward to leader", "group", gid, "to", addr, "err", err)
	}
	if err != nil {
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
		case <-stop:
			fut.Resolve(nil, fmt.Errorf("%w: node shutting down", ErrIndeterminate))
		}
	}()
}

// proposer turns the queue of writes into log entries over the raft
// interface: batching, admission, stamping and encoding are its decisions;
// raft's Apply and the wait for its future are the effects. What it needs of
// the node comes as functions, so it runs against a fake raft in
// proposer_test.go.
type proposer struct {
	r       raftAPI
	timeout time.Duration // raft's Apply timeout

	props    chan proposal
	inflight chan inflightBatch
	slots    chan struct{} // one per entry in the log's hands (maxInflight)
	stop     <-chan struct{}
	done     chan struct{} // closed once proposeLoop has returned

	// refuse says why a batch of about size bytes cannot be logged now
	// (disk full here or on too many voters).
	refuse func(size int) error
	// codec is the log format entries are written in now.
	codec func() byte
	// budget is the memory limit a batch written in log format v is
	// admitted against and stamped with (memlimit.go).
	budget func(v byte) memBudget
	// admit reserves memory for what a command may create or grow, or
	// refuses it; release returns a reservation once the command resolved.
	admit   func(*proposal, memBudget) error
	release func(bytes int64)
	// now is the leader's clock, stamped into every command of an entry.
	now func() time.Time
	// await waits for a raft future (returns once raft is down).
	await func(raft.Future) error
	// observe records an entry's latency, size and error.
	observe func(d time.Duration, commands int, err error)
	// ackAtProposal is a mutant: acknowledge writes at proposal.
	ackAtProposal func() bool
}

func newProposer(r raftAPI, timeout time.Duration, stop <-chan struct{}) *proposer {
	return &proposer{
		r:        r,
		timeout:  timeout,
		props:    make(chan proposal, 4096),
		inflight: make(chan inflightBatch, maxInflight),
		slots:    make(chan struct{}, maxInflight),
		stop:     stop,
		done:     make(chan struct{}),
		refuse:   func(int) error { return nil },
		codec:    func() byte { return fsm.CodecVersion },
		budget:   func(v byte) memBudget { return memBudget{v: v} },
		admit:    func(*proposal, memBudget) error { return nil },
		release:  func(int64) {},
		now:      time.Now,
		await:    func(f raft.Future) error { return f.Error() },
		observe:  func(time.Duration, int, error) {},
	}
}

// newProposer is the node's proposer, over its raft and its admission.
func (g *group) newProposer() *proposer {
	p := newProposer(g.raft, g.n.cfg.ApplyTimeout, g.stop)
	p.refuse = g.refuseWrites
	p.codec = g.entryCodec
	p.budget = func(v byte) memBudget {
		mb := memBudget{v: v}
		mb.limit, mb.who = g.memLimit()
		return mb
	}
	p.admit = g.admit
	p.release = func(b int64) { g.reserved.Add(-b) }
	p.now = g.n.now
	p.await = g.await
	p.observe = g.n.metrics.observeApply
	p.ackAtProposal = func() bool { return mutant.On(mutant.AckAtProposal) }
	return p
}

// submit queues cmd; its future resolves with the apply result.
func (p *proposer) submit(cmd *fsm.Command, fut *Future) {
	select {
	case <-p.stop:
		fut.Resolve(nil, ErrShutdown)
		return
	default:
	}
	select {
	case p.props <- proposal{cmd: cmd, fut: fut}:
	case <-p.stop:
		fut.Resolve(nil, ErrShutdown)
		return
	}
	select {
	case <-p.done:
		// The proposer stopped after it last drained the queue.
		p.drain()
	default:
	}
}

// proposeLoop takes a write, waits until the log has room for an entry, then
// takes every write that arrived meanwhile (up to maxBatch and
// maxBatchBytes) and proposes them as that entry.
func (p *proposer) proposeLoop() {
	batch := make([]proposal, 0, maxBatch)
	for {
		select {
		case first := <-p.props:
			batch = append(batch[:0], first)
		case <-p.stop:
			p.stopped(nil)
			return
		}
		select {
		case p.slots <- struct{}{}:
		case <-p.stop:
			p.stopped(batch[0].fut)
			return
		}
		select {
		case <-p.stop:
			// A slot and a stop at once: the stop wins, nothing more is
			// proposed once the node is stopping.
			p.stopped(batch[0].fut)
			return
		default:
		}
		batch = p.fill(batch)
		p.propose(batch)
	}
}

// fill adds the writes waiting now to batch, within the batch limits.
func (p *proposer) fill(batch []proposal) []proposal {
	size := 0
	for _, q := range batch {
		size += approxSize(q.cmd)
	}
	for len(batch) < maxBatch && size < maxBatchBytes {
		select {
		case q := <-p.props:
			batch = append(batch, q)
			size += approxSize(q.cmd)
		default:
			return batch
		}
	}
	return batch
}

// stopped ends the proposer: taken (a write it holds, or nil) and every
// write still queued are told the node shuts down. done is closed first, so
// a write queued from now on is drained by submit itself.
func (p *proposer) stopped(taken *Future) {
	close(p.done)
	if taken != nil {
		taken.Resolve(nil, ErrShutdown)
	}
	p.drain()
}

func (p *proposer) drain() {
	for {
		select {
		case q := <-p.props:
			q.fut.Resolve(nil, ErrShutdown)
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

// propose admits, stamps and proposes one batch; it holds one slot, which
// resolveBatch (or a refusal here) gives back.
func (p *proposer) propose(batch []proposal) {
	size := 0
	for _, q := range batch {
		size += approxSize(q.cmd)
	}
	if err := p.refuse(size); err != nil {
		for _, q := range batch {
			q.fut.Resolve(nil, err)
		}
		<-p.slots
		return
	}
	now := p.now().UnixNano()
	props := make([]proposal, 0, len(batch))
	cmds := make([]*fsm.Command, 0, len(batch))
	v := p.codec()
	mb := p.budget(v)
	for _, q := range batch {
		if need := fsm.MinCodec(q.cmd); need > v {
			q.fut.Resolve(nil, needsUpgrade(need, v))
			continue
		}
		if err := p.admit(&q, mb); err != nil {
			q.fut.Resolve(nil, err)
			continue
		}
		mb.stamp(q.cmd)
		q.cmd.Time = now
		props = append(props, q)
		cmds = append(cmds, q.cmd)
	}
	if len(props) == 0 {
		<-p.slots
		return
	}
	var data []byte
	if len(cmds) == 1 {
		data = fsm.EncodeCommandVersion(cmds[0], v)
	} else {
		data = fsm.EncodeBatchVersion(cmds, v)
	}
	f := p.r.Apply(data, p.timeout)
	if p.ackAtProposal != nil && p.ackAtProposal() {
		props = ackAtProposal(props)
	}
	select {
	case p.inflight <- inflightBatch{f: f, props: props, start: time.Now()}:
	case <-p.stop:
		<-p.slots
		for _, q := range props {
			q.fut.Resolve(nil, fmt.Errorf("%w: node shutting down", ErrIndeterminate))
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
// smallest of the group's servers', memlimit.go), before it reaches the log.
func (g *group) admit(p *proposal, mb memBudget) error {
	if mb.limit == 0 {
		return nil
	}
	need := g.fsm.NeedBytes(p.cmd)
	if need == 0 {
		return nil
	}
	used := g.fsm.MemoryBytes() + uint64(g.reserved.Load())
	if used+need > mb.limit {
		return mb.admitErr(need, used)
	}
	g.reserved.Add(int64(need))
	p.reserved = int64(need)
	return nil
}

func (p *proposer) resolveLoop() {
	for {
		select {
		case b := <-p.inflight:
			p.resolveBatch(b)
		case <-p.done:
			// The proposer has stopped: what it handed over may or may not
			// have been committed; raft says which, or that it shut down.
			for {
				select {
				case b := <-p.inflight:
					p.resolveBatch(b)
				default:
					return
				}
			}
		}
	}
}

// resolveBatch waits for an entry's outcome and gives each write its answer.
func (p *proposer) resolveBatch(b inflightBatch) {
	err := p.await(b.f)
	<-p.slots
	p.observe(time.Since(b.start), len(b.props), err)
	for _, q := range b.props {
		if q.reserved != 0 {
			p.release(q.reserved)
		}
	}
	if err != nil {
		err = translateApplyErr(err)
		for _, q := range b.props {
			q.fut.Resolve(nil, err)
		}
		return
	}
	switch r := b.f.Response().(type) {
	case *fsm.Halt:
		// Committed, so applied by every healthy replica, but not here.
		for _, q := range b.props {
			q.fut.Resolve(nil, fmt.Errorf("%w: %w on this node", ErrIndeterminate, r))
		}
	case *fsm.Result:
		b.props[0].fut.Resolve(r, nil)
	case []*fsm.Result:
		for i, q := range b.props {
			if i < len(r) {
				q.fut.Resolve(r[i], nil)
			} else {
				q.fut.Resolve(nil, fmt.Errorf("%w: missing result", ErrIndeterminate))
			}
		}
	default:
		for _, q := range b.props {
			q.fut.Resolve(nil, fmt.Errorf("%w: unexpected apply response %T", ErrIndeterminate, r))
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
func (g *group) applyRemote(ctx context.Context, body []byte) (*Future, error) {
	typ, cmds, err := fsm.DecodeEntry(body)
	if err != nil || typ != fsm.TypeCommand || len(cmds) != 1 {
		return nil, fmt.Errorf("bad forwarded command: %v", err)
	}
	if !g.IsLeader() {
		return nil, ErrNotLeader
	}
	fut := NewFuture()
	g.submitLocal(cmds[0], fut)
	return fut, nil
}
