package cluster

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

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
