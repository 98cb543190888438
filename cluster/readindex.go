package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/internal/mutant"
)

// Linearizable reads follow the read-index protocol (Raft dissertation, 6.4):
// the leader notes its commit index, confirms it still leads with one round of
// heartbeats (VerifyLeader), and hands the index out; the reading node waits until
// it has applied that index and then reads its own memory. A new leader first
// commits a Barrier in its term, so its commit index covers everything committed
// before it was elected. hashicorp/raft's leader lease is not a read lease and its
// followers are stale by default, so neither is relied on.
//
// Reads waiting at the same moment share one round: a gate runs one round at a
// time and gives its index to every reader that arrived before the round began.

const readRoundTimeout = 5 * time.Second

// gate batches concurrent callers into rounds.
type gate struct {
	round   func(ctx context.Context) (uint64, error)
	mu      sync.Mutex
	waiting []chan gateResult
	running bool
}

type gateResult struct {
	index uint64
	err   error
}

func newGate(round func(ctx context.Context) (uint64, error)) *gate {
	return &gate{round: round}
}

func (g *gate) wait(ctx context.Context) (uint64, error) {
	ch := make(chan gateResult, 1)
	g.mu.Lock()
	g.waiting = append(g.waiting, ch)
	if !g.running {
		g.running = true
		go g.loop()
	}
	g.mu.Unlock()
	select {
	case r := <-ch:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (g *gate) loop() {
	for {
		g.mu.Lock()
		batch := g.waiting
		g.waiting = nil
		if len(batch) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), readRoundTimeout)
		idx, err := g.round(ctx)
		cancel()
		for _, ch := range batch {
			ch <- gateResult{idx, err}
		}
	}
}

// reader is the read-index protocol over a narrow raft interface: the leader
// round (barrier once per term, note the commit index, confirm leadership
// with a quorum in term), the sole-voter shortcut, and the question to the
// leader a follower asks. Its decisions are unit-tested on a fake raft
// (readindex_test.go).
type reader struct {
	r    raftAPI
	self string
	// barrierTerm is the term whose Barrier has been applied (the leader
	// loop commits one at the start of every term).
	barrierTerm atomic.Uint64
	// call sends one node-to-node request to node id at a Raft address.
	call func(ctx context.Context, id, addr string, op byte, body []byte) ([]byte, error)
	// skipConfirm is the mutant that serves the index without confirming
	// leadership (jepsen-lite's checker must catch it).
	skipConfirm func() bool
}

// ReadBarrier returns once this node's state reflects every write acknowledged
// before the call (ReadLinearizable), or at once (ReadStale).
//
// A read that has to wait gives up after the node's apply timeout, or when ctx
// ends; one that finds no leader waits for one up to the hold of a write
// (hold.go), then fails with ErrNoLeader.
func (g *group) ReadBarrier(ctx context.Context, level ReadLevel) error {
	if h := g.fsm.Halted(); h != nil {
		// Not even a stale read: this state will never catch up.
		return fmt.Errorf("%w: %v", ErrHalted, h)
	}
	if level == ReadStale || mutant.On(mutant.FollowerLocalReads) && !g.IsLeader() {
		return nil
	}
	if err := g.n.removedErr(); err != nil {
		return err
	}
	g.n.metrics.readRounds.Inc()
	if idx, ok := g.reads.soleVoterIndex(); ok && g.fsm.AppliedIndex() >= idx {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.n.cfg.ApplyTimeout)
	defer cancel()
	// During an election the read waits for the new leader, as a write
	// does (hold.go).
	idx, err := g.readHold.index(ctx, g.readIndex)
	if err != nil {
		return err
	}
	return g.waitApplied(ctx, idx)
}

// readIndex is one try at a read index: the sole voter's own, a round of
// this node's while it leads, or the leader's answer.
func (g *group) readIndex(ctx context.Context) (uint64, error) {
	if i, ok := g.reads.soleVoterIndex(); ok {
		return i, nil
	}
	if g.IsLeader() {
		return g.leaderGate.wait(ctx)
	}
	return g.remoteGate.wait(ctx)
}

// soleVoterIndex is the read index of a leader that is the only voter of
// the latest configuration, which needs no round of heartbeats: raft's own
// VerifyLeader answers at once for a quorum of one, and any other server could
// only become leader with this node's vote, after this node has stopped
// leading. The term's barrier must have been applied, so that the commit index
// covers every earlier term.
func (x *reader) soleVoterIndex() (uint64, bool) {
	if x.r.State() != raft.Leader {
		return 0, false
	}
	term := x.r.CurrentTerm()
	if x.barrierTerm.Load() != term {
		return 0, false
	}
	servers, err := latestServers(x.r)
	if err != nil || len(servers) != 1 || servers[0].ID != raft.ServerID(x.self) || servers[0].Suffrage != raft.Voter {
		return 0, false
	}
	idx := x.r.CommitIndex()
	if x.r.State() != raft.Leader || x.r.CurrentTerm() != term {
		return 0, false
	}
	return idx, true
}

// waitApplied returns once the state machine reflects every log entry up to idx.
//
// The state machine sees only commands and configuration changes: raft's no-op
// (one per term) and barrier entries never reach it, so its applied index may
// stop short of an idx that is one of those. raft counts an entry applied once
// it has handed it, in order, to the state machine's queue; from then on the
// state machine is fresh enough when it has applied the last entry at or below
// idx that it will ever see.
func (g *group) waitApplied(ctx context.Context, idx uint64) error {
	if g.fsm.AppliedIndex() >= idx {
		return nil
	}
	if g.raft.AppliedIndex() < idx {
		// No-op and barrier entries wake nobody, hence the poll.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for g.raft.AppliedIndex() < idx {
			if g.fsm.AppliedIndex() >= idx {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
	return g.fsm.WaitApplied(ctx, g.lastFSMIndex(idx))
}

// appliedThrough reports, without waiting, whether the state machine reflects
// every log entry up to idx.
func (g *group) appliedThrough(idx uint64) bool {
	if g.fsm.AppliedIndex() >= idx {
		return true
	}
	return g.raft.AppliedIndex() >= idx && g.fsm.AppliedIndex() >= g.lastFSMIndex(idx)
}

// lastFSMIndex returns the index of the last entry at or below idx that the
// state machine applies (a command or a configuration change), or 0 if there is
// none in the log: entries compacted into a snapshot are already in the state.
func (g *group) lastFSMIndex(idx uint64) uint64 {
	var l raft.Log
	for i := idx; i > 0; i-- {
		if err := g.logs.GetLog(i, &l); err != nil {
			return 0
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return 0
}

// leaderRound is one leader round.
func (x *reader) leaderRound(ctx context.Context) (uint64, error) {
	if x.r.State() != raft.Leader {
		return 0, ErrNotLeader
	}
	term := x.r.CurrentTerm()
	if x.barrierTerm.Load() != term {
		if err := x.r.Barrier(readRoundTimeout).Error(); err != nil {
			return 0, translateReadErr(err)
		}
		x.barrierTerm.Store(term)
	}
	idx := x.r.CommitIndex()
	if x.skipConfirm != nil && x.skipConfirm() {
		return idx, nil
	}
	if err := x.confirm(ctx, term); err != nil {
		return 0, err
	}
	if x.r.CurrentTerm() != term {
		return 0, ErrNotLeader
	}
	return idx, nil
}

// confirm returns nil once a quorum of the configuration's voters, this node
// among them, have said they are still in term, each in answer to a request
// sent after the call began: then no other leader can have been elected
// before the call, and the commit index read before it covers every write
// acknowledged before it.
//
// raft's VerifyLeader is not enough: a heartbeat answered before the call
// (say, just before this process was paused, and read only when it runs
// again) counts as a vote, so a leader deposed during a pause could confirm
// itself with it and serve a stale read. jepsen-lite's stale-leader fault
// caught that. Our own requests are matched to their answers by id.
//
// A peer of a build without this request answers "unknown request"; if the
// others do not make a quorum without it, the round falls back to
// VerifyLeader, as safe as before, until the cluster is upgraded.
func (x *reader) confirm(ctx context.Context, term uint64) error {
	servers, err := latestServers(x.r)
	if err != nil {
		return translateReadErr(err)
	}
	t := newTally(servers, x.self)
	if t.decided() {
		return t.verdict()
	}
	body := binary.BigEndian.AppendUint64(nil, term)
	answers := make(chan peerAnswer, len(t.peers))
	for _, p := range t.peers {
		go func() {
			_, err := x.call(ctx, string(p.ID), string(p.Address), opConfirm, body)
			answers <- answerOf(err)
		}()
	}
	for range t.peers {
		select {
		case a := <-answers:
			t.add(a)
		case <-ctx.Done():
			return fmt.Errorf("%w: leadership not confirmed: %v", ErrNoLeader, ctx.Err())
		}
		if t.decided() {
			break
		}
	}
	err = t.verdict()
	if errors.Is(err, errAskRaft) {
		if err := x.r.VerifyLeader().Error(); err != nil {
			return translateReadErr(err)
		}
		return nil
	}
	return err
}

// remoteIndex asks the leader for a read index.
func (x *reader) remoteIndex(ctx context.Context) (uint64, error) {
	addr, id := x.r.LeaderWithID()
	if addr == "" {
		return 0, ErrNoLeader
	}
	body, err := x.call(ctx, string(id), string(addr), opReadIndex, nil)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		// A read is safe to retry whatever went wrong.
		return 0, fmt.Errorf("%w: read index from %s: %v", ErrNoLeader, addr, err)
	}
	if len(body) != 8 {
		return 0, fmt.Errorf("bad read index reply of %d bytes", len(body))
	}
	return binary.BigEndian.Uint64(body), nil
}

func translateReadErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost):
		return ErrNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrShutdown
	}
	return err
}
