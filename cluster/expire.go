package cluster

import (
	"errors"
	"time"

	"github.com/rookerydb/rookery/fsm"
)

// Expiry. Keys expire by the log's clock (fsm/expire.go): a key goes before the
// first command whose leader-stamped time reaches its deadline. So that keys
// expire when nothing is written, the leader proposes an expiry tick (a
// command that is only its time) once its clock passes the earliest deadline
// its state machine holds. Followers never propose one and never read their
// clock for expiry: a follower whose clock is an hour fast expires nothing
// early, and a key goes on every replica at the same log position.
//
// The tick goes through the proposer like any write, so it shares an entry
// with the writes waiting at that moment and is stamped as they are. One tick
// is in flight at a time. The timer is re-armed whenever the earliest
// deadline changes (the state machine says so), when this node starts to
// lead, and at least every maxExpireWait so that a wall clock stepped forward
// is noticed. A tick that removes nothing (the clock stepped back between
// looking and stamping, or the cluster cannot take log format 5 yet) backs
// off, so a confused clock costs a few entries, not a stream of them.

const (
	maxExpireWait    = time.Second
	minExpireBackoff = 10 * time.Millisecond
	maxExpireBackoff = 5 * time.Second
)

// now is the node's clock: what the proposer stamps into commands and the
// expiry timer compares deadlines with (tests skew it).
func (n *Node) now() time.Time {
	if n.cfg.testClock != nil {
		return n.cfg.testClock()
	}
	return time.Now()
}

// kickExpiry wakes the expiry loop (this node started to lead).
func (g *group) kickExpiry() {
	select {
	case g.expireKick <- struct{}{}:
	default:
	}
}

// expireLoop proposes an expiry tick whenever this node leads and its clock
// has passed the earliest deadline.
func (g *group) expireLoop() {
	defer g.wg.Done()
	timer := time.NewTimer(maxExpireWait)
	defer timer.Stop()
	var (
		inflight  *Future
		sentFor   int64 // the deadline the tick in flight is for
		backoff   time.Duration
		notBefore time.Time // no tick before this (backing off)
	)
	for {
		var done <-chan struct{}
		if inflight != nil {
			done = inflight.Done()
		}
		select {
		case <-timer.C:
		case <-g.fsm.NextDeadlineChanged():
		case <-g.expireKick:
		case <-done:
			_, err := inflight.Result()
			inflight = nil
			if next := g.fsm.NextDeadline(); err == nil && (next == 0 || next > sentFor) {
				backoff = 0
			} else {
				backoff = min(max(2*backoff, minExpireBackoff), maxExpireBackoff)
				notBefore = time.Now().Add(backoff)
				g.tickFailed(err)
			}
		case <-g.stop:
			return
		}
		wait := maxExpireWait
		if next := g.fsm.NextDeadline(); next != 0 && inflight == nil && g.IsLeader() && g.fsm.Halted() == nil {
			due := time.UnixMilli(next).Sub(g.n.now())
			switch {
			case due <= 0 && time.Now().Before(notBefore):
				wait = time.Until(notBefore)
			case due <= 0:
				// Proposed here, never forwarded: a tick is the leader's.
				sentFor = next
				inflight = NewFuture()
				g.submitLocal(&fsm.Command{Op: fsm.OpExpireTick}, inflight)
			default:
				wait = min(wait, due)
			}
		}
		timer.Reset(wait) // (since Go 1.23 a reset timer never delivers a stale tick)
	}
}

// tickFailed says why a tick did not expire what was due, once a minute at
// most; losing leadership is not worth a word.
func (g *group) tickFailed(err error) {
	switch {
	case err == nil:
		g.log.Debug("expiry tick removed nothing: the clock stamped is before the earliest deadline")
	case errors.Is(err, ErrNotLeader), errors.Is(err, ErrNoLeader), errors.Is(err, ErrShutdown):
	default:
		g.n.warnEvery("expire-tick", "expiry tick not applied; keys past their deadline stay until it is", "err", err)
	}
}
