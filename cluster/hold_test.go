package cluster

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// holdHarness drives a holdQueue by hand: its clock, whether a leader is
// known, and when it looks (step), with the watcher's own ticks far apart.
type holdHarness struct {
	h    *holdQueue
	stop chan struct{}

	mu         sync.Mutex
	leader     bool
	now        time.Time
	dispatched []string // keys handed to the leader, in order
}

func newHoldHarness(t *testing.T) *holdHarness {
	hh := &holdHarness{stop: make(chan struct{}), now: time.Unix(1_000_000, 0)}
	hh.h = newHoldQueue(func(cmd *fsm.Command, fut *Future) bool {
		hh.mu.Lock()
		defer hh.mu.Unlock()
		if !hh.leader {
			return false
		}
		hh.dispatched = append(hh.dispatched, cmd.Key)
		fut.Resolve(&fsm.Result{}, nil)
		return true
	}, 2*time.Second, hh.stop)
	hh.h.now = func() time.Time { hh.mu.Lock(); defer hh.mu.Unlock(); return hh.now }
	hh.h.poll = time.Hour
	t.Cleanup(func() {
		select {
		case <-hh.stop:
		default:
			close(hh.stop)
		}
	})
	return hh
}

func (hh *holdHarness) submit(key string) *Future {
	fut := NewFuture()
	hh.h.submit(&fsm.Command{Op: fsm.OpAdd, Key: key}, fut)
	return fut
}

func (hh *holdHarness) set(leader bool, advance time.Duration) {
	hh.mu.Lock()
	hh.leader = leader
	hh.now = hh.now.Add(advance)
	hh.mu.Unlock()
}

func (hh *holdHarness) order() []string {
	hh.mu.Lock()
	defer hh.mu.Unlock()
	return append([]string(nil), hh.dispatched...)
}

func pending(f *Future) bool {
	select {
	case <-f.Done():
		return false
	default:
		return true
	}
}

// TestHoldDispatchesAtOnceWithALeader: with a leader known and nothing
// waiting, a write goes to it at once.
func TestHoldDispatchesAtOnceWithALeader(t *testing.T) {
	hh := newHoldHarness(t)
	hh.set(true, 0)
	a, b := hh.submit("a"), hh.submit("b")
	if pending(a) || pending(b) || !reflect.DeepEqual(hh.order(), []string{"a", "b"}) {
		t.Fatalf("dispatched %v", hh.order())
	}
}

// TestHoldKeepsOrder: writes that arrive with no leader wait; one that
// arrives after a leader is known, while others still wait, goes behind
// them; once the queue is looked at they go in submission order.
func TestHoldKeepsOrder(t *testing.T) {
	hh := newHoldHarness(t)
	a, b := hh.submit("a"), hh.submit("b")
	if !pending(a) || !pending(b) || len(hh.order()) != 0 {
		t.Fatal("a write went out with no leader")
	}
	hh.set(true, 100*time.Millisecond)
	c := hh.submit("c") // a leader is known, but a and b wait: c waits behind them
	if !pending(c) || len(hh.order()) != 0 {
		t.Fatalf("c passed the writes before it: %v", hh.order())
	}
	if !hh.h.step() {
		t.Fatal("queue not empty after a leader came")
	}
	if !reflect.DeepEqual(hh.order(), []string{"a", "b", "c"}) || pending(a) || pending(b) || pending(c) {
		t.Fatalf("dispatched %v", hh.order())
	}
	d := hh.submit("d") // nothing waits: straight through
	if pending(d) || !reflect.DeepEqual(hh.order(), []string{"a", "b", "c", "d"}) {
		t.Fatalf("dispatched %v", hh.order())
	}
}

// TestHoldFailsAfterItsHold: a write that waited its whole hold fails, not
// applied; one that arrived later keeps waiting, and goes once a leader
// comes.
func TestHoldFailsAfterItsHold(t *testing.T) {
	hh := newHoldHarness(t)
	a := hh.submit("a")
	hh.set(false, 1500*time.Millisecond)
	b := hh.submit("b")
	hh.set(false, 600*time.Millisecond) // a has waited 2.1 s, b 0.6 s
	if hh.h.step() {
		t.Fatal("queue empty while b waits")
	}
	if _, err := a.Result(); pending(a) || !errors.Is(err, ErrNoLeader) {
		t.Fatalf("a after its hold: %v (pending %v)", err, pending(a))
	}
	if !pending(b) {
		t.Fatal("b failed before its hold")
	}
	hh.set(true, 0)
	if !hh.h.step() || pending(b) || !reflect.DeepEqual(hh.order(), []string{"b"}) {
		t.Fatalf("dispatched %v", hh.order())
	}
}

// TestHoldShutdown: writes still waiting when the group stops are told so.
func TestHoldShutdown(t *testing.T) {
	hh := newHoldHarness(t)
	a := hh.submit("a")
	close(hh.stop)
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a still waits after the stop")
	}
	if _, err := a.Result(); !errors.Is(err, ErrShutdown) {
		t.Fatalf("a: %v", err)
	}
}

// fakeElection is a read hold whose clock and pauses a test drives: each
// pause moves the clock on by step and runs the election's next move.
type fakeElection struct {
	now    time.Time
	step   time.Duration
	pauses int
	onTick func(pause int) // what the election does at each pause
}

func (e *fakeElection) hold(d time.Duration) readHold {
	return readHold{hold: d, now: func() time.Time { return e.now }, pause: func(ctx context.Context) error {
		e.pauses++
		e.now = e.now.Add(e.step)
		if e.onTick != nil {
			e.onTick(e.pauses)
		}
		return ctx.Err()
	}}
}

// tryIndex is one try at a read index as a group makes it: its own round
// while it leads, the leader's answer otherwise.
func tryIndex(fr *fakeRaft, x *reader) func(ctx context.Context) (uint64, error) {
	return func(ctx context.Context) (uint64, error) {
		if fr.State() == raft.Leader {
			return x.leaderRound(ctx)
		}
		return x.remoteIndex(ctx)
	}
}

// TestReadHoldWaitsForTheElection: a linearizable read on a follower that
// arrives while no leader is known (the leader was killed) waits, and once a
// leader is elected within the hold it gets that leader's read index: the
// reader sees no error, as a writer sees none.
func TestReadHoldWaitsForTheElection(t *testing.T) {
	fr := newFakeRaft("n2", "n1", "n2", "n3")
	fr.state, fr.leaderAddr, fr.leaderID = raft.Follower, "", ""
	peers := newPeerTable()
	peers.index = 41
	x := newTestReader(fr, peers)
	e := &fakeElection{now: time.Unix(1_000_000, 0), step: 10 * time.Millisecond, onTick: func(p int) {
		if p == 80 { // 800 ms on: n3 won the election
			fr.mu.Lock()
			fr.leaderAddr, fr.leaderID, fr.term = "n3:raft", "n3", 2
			fr.mu.Unlock()
		}
	}}
	idx, err := e.hold(2*time.Second).index(context.Background(), tryIndex(fr, x))
	if err != nil || idx != 41 {
		t.Fatalf("read during an election: %d %v", idx, err)
	}
	if e.pauses != 80 || peers.askedOf("n3:raft") != 1 {
		t.Fatalf("%d pauses, n3 asked %d times: want 80 and 1", e.pauses, peers.askedOf("n3:raft"))
	}
}

// TestReadHoldLeaderStepsDown: a read begun on a leader that loses its
// leadership during the round (ErrNotLeader) asks again, and is answered by
// the new leader once this node follows it.
func TestReadHoldLeaderStepsDown(t *testing.T) {
	fr := newFakeRaft("n1", "n1", "n2", "n3")
	fr.barrierErr = raft.ErrLeadershipLost
	peers := newPeerTable()
	peers.index = 90
	x := newTestReader(fr, peers)
	e := &fakeElection{now: time.Unix(1_000_000, 0), step: 10 * time.Millisecond, onTick: func(p int) {
		fr.mu.Lock()
		defer fr.mu.Unlock()
		switch p {
		case 1: // stepped down, no leader yet
			fr.state, fr.leaderAddr, fr.leaderID = raft.Follower, "", ""
		case 30:
			fr.leaderAddr, fr.leaderID, fr.term = "n2:raft", "n2", 2
		}
	}}
	idx, err := e.hold(2*time.Second).index(context.Background(), tryIndex(fr, x))
	if err != nil || idx != 90 || e.pauses != 30 {
		t.Fatalf("read across a step-down: %d %v after %d pauses", idx, err, e.pauses)
	}
}

// TestReadHoldGivesUp: with no leader for the whole hold the read fails as
// before, CLUSTERDOWN (ErrNoLeader), once the hold has passed and not
// before; a failure that is no election (the node was removed, the read's
// context ended) is answered at once.
func TestReadHoldGivesUp(t *testing.T) {
	fr := newFakeRaft("n2", "n1", "n2", "n3")
	fr.state, fr.leaderAddr, fr.leaderID = raft.Follower, "", ""
	x := newTestReader(fr, newPeerTable())
	e := &fakeElection{now: time.Unix(1_000_000, 0), step: 10 * time.Millisecond}
	_, err := e.hold(2*time.Second).index(context.Background(), tryIndex(fr, x))
	if !errors.Is(err, ErrNoLeader) || e.pauses != 200 {
		t.Fatalf("no leader for the whole hold: %v after %d pauses (want ErrNoLeader after 200)", err, e.pauses)
	}
	k, _ := KindOf(err)
	if k.RESP != "CLUSTERDOWN" {
		t.Fatalf("rendered %q, want CLUSTERDOWN", k.RESP)
	}
	for _, fail := range []error{ErrRemoved, ErrShutdown, context.DeadlineExceeded} {
		e := &fakeElection{now: time.Unix(1_000_000, 0), step: 10 * time.Millisecond}
		_, err := e.hold(2*time.Second).index(context.Background(), func(context.Context) (uint64, error) { return 0, fail })
		if !errors.Is(err, fail) || e.pauses != 0 {
			t.Errorf("%v: %v after %d pauses, want at once", fail, err, e.pauses)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	e = &fakeElection{now: time.Unix(1_000_000, 0), step: 10 * time.Millisecond, onTick: func(p int) {
		if p == 5 {
			cancel()
		}
	}}
	if _, err := e.hold(2*time.Second).index(ctx, tryIndex(fr, x)); !errors.Is(err, ErrNoLeader) || e.pauses != 5 {
		t.Errorf("a read whose client left: %v after %d pauses, want the last ErrNoLeader after 5", err, e.pauses)
	}
}
