package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	cmd *fsm.Command
	fut *Future
}

type inflightBatch struct {
	f       raft.ApplyFuture
	props   []proposal
	start   time.Time
	release func() // the batch's memory reservations, once it has applied
}

// Submit queues a write to its key's shard: proposed on the shard's leader
// (here, or forwarded to it), held while no leader is known. The Future
// resolves with the leader's apply result or with one of the package's
// errors. Writes submitted one after another from one goroutine are applied
// in that order.
func (n *Node) Submit(cmd *fsm.Command) *Future {
	if err := n.refuseClient(); err != nil {
		return failed(err)
	}
	m := n.clusterMap()
	if m == nil {
		if n.awaitingMap() {
			fut := NewFuture()
			n.mapWait.submit(cmd, fut)
			return fut
		}
		return n.meta.submit(cmd)
	}
	return n.SubmitTo(shardOf(m, cmd.Key), cmd)
}

// refuseClient says why this node takes no client request now: it is
// stopping, or out of the cluster.
func (n *Node) refuseClient() error {
	if n.closing() {
		return ErrShutdown
	}
	return n.removedErr()
}

// dispatchAfterMap hands a write that waited for the cluster's first map
// (a node started with --shards), or for its shard to be created, to its
// shard once it can, and reports whether it could (mapWait, a hold queue).
func (n *Node) dispatchAfterMap(cmd *fsm.Command, fut *Future) bool {
	m := n.clusterMap()
	if m == nil {
		if n.awaitingMap() {
			return false
		}
		// The node will not shard after all (its cluster holds filters in
		// one group): group 0 takes the write as it always has.
		chain(n.meta.submit(cmd), fut)
		return true
	}
	s := shardOf(m, cmd.Key)
	if t, ok := n.heldFor.Load(cmd); ok {
		s = t.(int) // a write SubmitTo named the shard of (FLUSHALL's)
	}
	if s >= m.Shards() || !m.Groups[s].Created {
		return s >= m.Shards() && n.fail(fut, fmt.Errorf("%w: shard %d of %d", ErrNotHosted, s, m.Shards()))
	}
	n.heldFor.Delete(cmd)
	chain(n.SubmitTo(s, cmd), fut)
	return true
}

// fail resolves fut with err, and says it did.
func (n *Node) fail(fut *Future, err error) bool {
	fut.Resolve(nil, err)
	return true
}

// chain resolves to as from resolves.
func chain(from, to *Future) {
	select {
	case <-from.done:
		to.Resolve(from.Result())
	default:
		go func() {
			<-from.done
			to.Resolve(from.Result())
		}()
	}
}

// SubmitTo queues a write to shard s (a keyless write fanned out to every
// shard, such as FLUSHALL, names each): to the shard's group here if the map
// places it here, else forwarded to the node that leads it.
func (n *Node) SubmitTo(s int, cmd *fsm.Command) *Future {
	m := n.clusterMap()
	if m == nil {
		if s != 0 {
			return failed(fmt.Errorf("%w: shard %d of a cluster of one", ErrNotHosted, s))
		}
		return n.Submit(cmd)
	}
	if s < 0 || s >= m.Shards() {
		return failed(fmt.Errorf("%w: shard %d of %d", ErrNotHosted, s, m.Shards()))
	}
	if !m.Groups[s].Created {
		// Not even on its creator: a write is taken once the shard has its
		// replicas (the controller marks it created); until then it waits,
		// in order with the others (mapWait).
		fut := NewFuture()
		n.heldFor.Store(cmd, s)
		// Forgotten once the hold is over, dispatched or not.
		time.AfterFunc(n.mapWait.hold+time.Second, func() { n.heldFor.Delete(cmd) })
		n.mapWait.submit(cmd, fut)
		return fut
	}
	if r, err := n.Replica(s); err == nil {
		return r.g.submit(cmd)
	}
	peers := n.shardPeers(m, s)
	if len(peers) == 0 {
		return failed(fmt.Errorf("%w: no replica of shard %d is known alive", ErrNoLeader, s))
	}
	fut := NewFuture()
	n.forwardTo(groupOf(m, s), peers, cmd, fut, n.stop)
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
		if g.raft.transferring() {
			return false // held until the transfer is over (transfer.go)
		}
		g.submitLocal(cmd, fut)
		return true
	}
	id, addr := g.Leader()
	if addr == "" {
		return false
	}
	g.forward(peerRef{id, addr}, cmd, fut)
	return true
}

// submitLocal queues cmd for the proposer; the caller has checked leadership.
func (g *group) submitLocal(cmd *fsm.Command, fut *Future) {
	if g == g.n.meta && g.n.awaitingMap() && fsm.TouchesFilters(cmd.Op) {
		// This node was started with --shards and the map is not written
		// yet: a filter kept in group 0 now would stop the cluster from
		// sharding (createMap). Whoever sent it tries again.
		fut.Resolve(nil, fmt.Errorf("%w: the cluster's map of shards is not written yet", fsm.ErrMapGroup))
		return
	}
	g.prop.submit(cmd, fut)
}

// forward sends cmd to the leader and resolves fut with its answer.
func (g *group) forward(leader peerRef, cmd *fsm.Command, fut *Future) {
	g.n.forwardTo(g.id, []peerRef{leader}, cmd, fut, g.stop)
}

// forwardTo sends cmd, for group gid, to the first of peers it reaches (the
// group's leader, or a replica that forwards it on) and resolves fut with the
// answer.
func (n *Node) forwardTo(gid int, peers []peerRef, cmd *fsm.Command, fut *Future, stop <-chan struct{}) {
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
	for _, p := range peers {
		if ch, err = n.peer(p.id, p.addr).send(op, body); err == nil {
			break
		}
		// Never sent: definitely not applied; the next may take it.
		n.log.Debug("forward to leader", n.shardAttr(gid), "to", p.addr, "err", err)
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
	// admit reserves, on the node of every replica, the memory the batch's
	// writes (in log format v) may allocate, refuses those that do not fit,
	// and says what cap the admitted ones carry (budget.go).
	admit func(props []proposal, v byte) admission
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
		admit: func(props []proposal, v byte) admission {
			return admission{errs: make([]error, len(props)), budget: memBudget{v: v}, release: func() {}}
		},
		now:     time.Now,
		await:   func(f raft.Future) error { return f.Error() },
		observe: func(time.Duration, int, error) {},
	}
}

// newProposer is the node's proposer, over its raft and its admission.
func (g *group) newProposer() *proposer {
	p := newProposer(g.raft, g.n.cfg.ApplyTimeout, g.stop)
	p.refuse = g.refuseWrites
	p.codec = g.entryCodec
	p.admit = func(props []proposal, v byte) admission {
		ctx, cancel := context.WithTimeout(context.Background(), reserveTimeout)
		defer cancel()
		return g.admitBatch(ctx, props, v)
	}
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
		size += q.cmd.ApproxBytes()
	}
	for len(batch) < maxBatch && size < maxBatchBytes {
		select {
		case q := <-p.props:
			batch = append(batch, q)
			size += q.cmd.ApproxBytes()
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

// propose admits, stamps and proposes one batch; it holds one slot, which
// resolveBatch (or a refusal here) gives back.
func (p *proposer) propose(batch []proposal) {
	size := 0
	for _, q := range batch {
		size += q.cmd.ApproxBytes()
	}
	if err := p.refuse(size); err != nil {
		for _, q := range batch {
			q.fut.Resolve(nil, err)
		}
		<-p.slots
		return
	}
	now := p.now().UnixNano()
	v := p.codec()
	eligible := make([]proposal, 0, len(batch))
	for _, q := range batch {
		if need := fsm.MinCodec(q.cmd); need > v {
			q.fut.Resolve(nil, needsUpgrade(need, v))
			continue
		}
		eligible = append(eligible, q)
	}
	adm := p.admit(eligible, v)
	props := make([]proposal, 0, len(eligible))
	cmds := make([]*fsm.Command, 0, len(eligible))
	for i, q := range eligible {
		if adm.errs[i] != nil {
			q.fut.Resolve(nil, adm.errs[i])
			continue
		}
		adm.budget.stampCap(q.cmd)
		q.cmd.Time = now
		props = append(props, q)
		cmds = append(cmds, q.cmd)
	}
	if len(props) == 0 {
		adm.release()
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
	case p.inflight <- inflightBatch{f: f, props: props, start: time.Now(), release: adm.release}:
	case <-p.stop:
		adm.release()
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
	if b.release != nil {
		b.release()
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

// SubmitUsers queues a change to the users (an ACL op) to group 0, which
// holds them: the only group, or the map group of a sharded cluster.
func (n *Node) SubmitUsers(cmd *fsm.Command) *Future {
	if err := n.refuseClient(); err != nil {
		return failed(err)
	}
	return n.meta.submit(cmd)
}

// UsersReplica is this node's replica of group 0, which holds the users.
func (n *Node) UsersReplica() (*Replica, error) {
	if n.meta == nil || n.meta.handle == nil {
		return nil, ErrNotHosted
	}
	return n.meta.handle, nil
}

// UsersApplied waits, once a change to the users has been answered, until
// every other member of group 0 that answers has applied it, for at most
// wait. Each node enforces a revoked right or a deleted user once it applies
// the change (a grant it honours at once: it catches up before it refuses),
// so the client that made the change finds it in force on every node when it
// hears the answer. A member that does not answer is not waited for.
func (n *Node) UsersApplied(ctx context.Context, wait time.Duration) {
	g := n.meta
	if g == nil || g.handle == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := g.handle.ReadBarrier(ctx, ReadLinearizable); err != nil {
		return
	}
	idx := g.fsm.AppliedIndex()
	servers, err := latestServers(g.raft)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		if string(s.ID) == n.cfg.ID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				ps, err := g.statusOf(ctx, string(s.ID), string(s.Address))
				if err != nil || ps.AppliedIndex >= idx {
					return
				}
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
}
