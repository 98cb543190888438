package cluster

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// A write that reaches a group while no leader is known (an election under
// way: a leader killed, or one that stepped down under load) waits for one,
// for a bounded time, rather than failing at once: an election takes about
// one election timeout, and a client told CLUSTERDOWN (a Redis Cluster
// client's pipeline does not retry it) would have to be told again after.
//
// Writes keep their order. While any write waits, every later one queues
// behind it, and once a leader is known the queue is handed over in order,
// under the lock that new writes take, before any later write can pass it.
// A write that waited its whole hold fails as before, not applied
// (ErrNoLeader); those behind it go on waiting their own.

// holdPoll is how often the waiting writes look for a leader.
const holdPoll = 10 * time.Millisecond

// holdFor is how long a write waits for a leader: a few elections.
func holdFor(cfg Config) time.Duration {
	return min(cfg.ApplyTimeout, 5*cfg.ElectionTimeout)
}

type heldWrite struct {
	cmd      *fsm.Command
	fut      *Future
	deadline time.Time
}

// holdQueue is the writes of one group that wait for a leader.
type holdQueue struct {
	// dispatch hands cmd to the leader (proposed here, or forwarded to it)
	// and reports whether a leader was known; it runs under mu, so it must
	// not block for long (a channel send, a frame queued to a peer).
	dispatch func(cmd *fsm.Command, fut *Future) bool
	hold     time.Duration
	expired  error // what a write that waited its whole hold gets
	now      func() time.Time
	poll     time.Duration
	stop     <-chan struct{}

	mu      sync.Mutex
	q       []heldWrite
	waiting bool // a goroutine watches the queue
}

func newHoldQueue(dispatch func(*fsm.Command, *Future) bool, hold time.Duration, stop <-chan struct{}) *holdQueue {
	return &holdQueue{dispatch: dispatch, hold: hold, expired: ErrNoLeader, now: time.Now, poll: holdPoll, stop: stop}
}

// submit hands cmd to the leader now if one is known and nothing waits, or
// queues it behind the writes that wait.
func (h *holdQueue) submit(cmd *fsm.Command, fut *Future) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.q) == 0 && h.dispatch(cmd, fut) {
		return
	}
	h.q = append(h.q, heldWrite{cmd: cmd, fut: fut, deadline: h.now().Add(h.hold)})
	if !h.waiting {
		h.waiting = true
		go h.wait()
	}
}

// wait looks for a leader until the queue is empty.
func (h *holdQueue) wait() {
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-h.stop:
			h.mu.Lock()
			q := h.q
			h.q, h.waiting = nil, false
			h.mu.Unlock()
			for _, w := range q {
				w.fut.Resolve(nil, ErrShutdown)
			}
			return
		}
		if h.step() {
			return
		}
	}
}

// step hands over what it can and fails what waited too long; it reports
// whether the queue is empty (and no longer watched).
func (h *holdQueue) step() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.now()
	for len(h.q) > 0 {
		w := h.q[0]
		if !h.dispatch(w.cmd, w.fut) {
			break
		}
		h.q = h.q[1:]
	}
	// Those that waited their whole hold fail, not applied; their order
	// against the rest does not matter, since they never apply.
	kept := h.q[:0]
	for _, w := range h.q {
		if now.Before(w.deadline) {
			kept = append(kept, w)
			continue
		}
		w.fut.Resolve(nil, h.expired)
	}
	for i := len(kept); i < len(h.q); i++ {
		h.q[i] = heldWrite{}
	}
	h.q = kept
	if len(h.q) == 0 {
		h.waiting = false
		return true
	}
	return false
}

// Reads wait for a leader as writes do (issue 29). A linearizable read that
// finds no leader (an election under way: nobody leads yet, or the leader it
// asked stopped leading during the round) asks again every holdPoll, for at
// most the same hold as a write, and then fails as before (ErrNoLeader,
// CLUSTERDOWN). Asking again never weakens a read: every try is a whole
// read-index round begun after the read arrived, so the index it returns
// covers every write acknowledged before the read did.

// readHold is the bounded wait of a read for a leader.
type readHold struct {
	hold time.Duration
	now  func() time.Time
	// pause waits before the next try; it fails when the read must stop
	// waiting (its context ended, the group closed).
	pause func(ctx context.Context) error
}

// newReadHold waits up to hold, polling every poll, until stop is closed.
func newReadHold(hold, poll time.Duration, stop <-chan struct{}) readHold {
	return readHold{hold: hold, now: time.Now, pause: func(ctx context.Context) error {
		t := time.NewTimer(poll)
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-stop:
			return ErrShutdown
		}
	}}
}

// index runs try until it gives a read index or fails for a reason other
// than an election; after the hold, the last "no leader" is the answer.
func (h readHold) index(ctx context.Context, try func(context.Context) (uint64, error)) (uint64, error) {
	var idx uint64
	err := h.do(ctx, func(ctx context.Context) (err error) {
		idx, err = try(ctx)
		return err
	}, electing)
	return idx, err
}

// do runs try until it succeeds or fails with an error again does not
// retry, for at most the hold; it returns try's last error.
func (h readHold) do(ctx context.Context, try func(context.Context) error, again func(error) bool) error {
	deadline := h.now().Add(h.hold)
	for {
		err := try(ctx)
		if err == nil || !again(err) || ctx.Err() != nil || !h.now().Before(deadline) {
			return err
		}
		if h.pause(ctx) != nil {
			return err
		}
	}
}

// electing reports whether a read failed only because no leader answered
// for now: none is known, the one asked could not be reached or did not
// confirm it still leads, or this node stopped leading during the round.
func electing(err error) bool {
	return errors.Is(err, ErrNoLeader) || errors.Is(err, ErrNotLeader)
}
