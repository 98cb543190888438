package cluster

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/fsm"
)

// proposerHarness runs a proposer's two loops over a fake raft whose Apply
// futures the test resolves one entry at a time.
type proposerHarness struct {
	t    *testing.T
	r    *fakeRaft
	p    *proposer
	stop chan struct{}
	wg   sync.WaitGroup
}

func newProposerHarness(t *testing.T, configure func(*proposer)) *proposerHarness {
	h := &proposerHarness{t: t, r: newFakeRaft("n1", "n1"), stop: make(chan struct{})}
	h.p = newProposer(h.r, time.Second, h.stop)
	h.p.now = func() time.Time { return time.Unix(0, 1234) }
	if configure != nil {
		configure(h.p)
	}
	h.wg.Add(2)
	go func() { defer h.wg.Done(); h.p.proposeLoop() }()
	go func() { defer h.wg.Done(); h.p.resolveLoop() }()
	t.Cleanup(h.close)
	return h
}

func (h *proposerHarness) close() {
	select {
	case <-h.stop:
	default:
		close(h.stop)
		// As raft does once it shuts down: every pending Apply fails.
		loops := make(chan struct{})
		go func() { h.wg.Wait(); close(loops) }()
		for {
			h.r.resolveNext(nil, raft.ErrRaftShutdown)
			select {
			case <-loops:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
}

func (h *proposerHarness) submit(key string) *Future {
	fut := NewFuture()
	h.p.submit(&fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: key, Items: [][]byte{[]byte("x")}}, fut)
	return fut
}

// entry decodes the i-th entry given to raft: the keys it carries and the
// time stamped on each.
func (h *proposerHarness) entry(i int) (keys []string, times []int64) {
	h.t.Helper()
	h.r.mu.Lock()
	data := h.r.entries[i]
	h.r.mu.Unlock()
	_, cmds, err := fsm.DecodeEntry(data)
	if err != nil {
		h.t.Fatalf("entry %d: %v", i, err)
	}
	for _, c := range cmds {
		keys = append(keys, c.Key)
		times = append(times, c.Time)
	}
	return keys, times
}

// results answers an entry of n commands, the i-th with Count i.
func results(n int) []*fsm.Result {
	out := make([]*fsm.Result, n)
	for i := range out {
		out[i] = &fsm.Result{Ints: []int64{int64(i)}}
	}
	return out
}

func mustResult(t *testing.T, fut *Future) *fsm.Result {
	t.Helper()
	select {
	case <-fut.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("future not resolved")
	}
	r, err := fut.Result()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustErr(t *testing.T, fut *Future) error {
	t.Helper()
	select {
	case <-fut.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("future not resolved")
	}
	_, err := fut.Result()
	if err == nil {
		t.Fatal("resolved without an error")
	}
	return err
}

// TestGroupCommit: one entry in raft's hands at a time; the writes that arrive
// meanwhile go out together as the next entry, in submission order, stamped
// with one time, and each gets its own result.
func TestGroupCommit(t *testing.T) {
	h := newProposerHarness(t, nil)
	first := h.submit("a")
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	var next []*Future
	for i := 0; i < 5; i++ {
		next = append(next, h.submit(fmt.Sprint("b", i)))
	}
	if n := h.r.pendingApplies(); n != 1 {
		t.Fatalf("%d entries in flight, want 1", n)
	}
	h.r.resolveNext(results(1)[0], nil)
	mustResult(t, first)
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	keys, times := h.entry(1)
	if !reflect.DeepEqual(keys, []string{"b0", "b1", "b2", "b3", "b4"}) {
		t.Fatalf("second entry carries %q, want the five writes in order", keys)
	}
	for _, ts := range times {
		if ts != 1234 {
			t.Fatalf("stamped %d, want the proposer's clock 1234", ts)
		}
	}
	h.r.resolveNext(results(5), nil)
	for i, f := range next {
		if r := mustResult(t, f); r.Ints[0] != int64(i) {
			t.Fatalf("write %d got result %v", i, r.Ints)
		}
	}
}

// TestProposerRefusals: a command the cluster's log format cannot carry or
// that admission refuses is answered alone, the rest of its batch goes on; a
// disk that takes no log refuses the whole batch; none of them reaches raft.
func TestProposerRefusals(t *testing.T) {
	var released []int64
	var mu sync.Mutex
	h := newProposerHarness(t, func(p *proposer) {
		p.codec = func() byte { return fsm.CodecV4 }
		p.admit = func(props []proposal, v byte) admission {
			adm := admission{errs: make([]error, len(props)), budget: memBudget{v: v}}
			reserved := int64(0)
			for i, q := range props {
				if q.cmd.Key == "big" {
					adm.errs[i] = fmt.Errorf("%w: too big", ErrTooLarge)
					continue
				}
				reserved += 100
			}
			adm.release = func() { mu.Lock(); released = append(released, reserved); mu.Unlock() }
			return adm
		}
	})
	blocker := h.submit("first")
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	ok := h.submit("ok")
	big := h.submit("big")
	expire := NewFuture()
	h.p.submit(&fsm.Command{Op: fsm.OpExpire, Key: "k", Expire: 1}, expire) // log format 5
	h.r.resolveNext(results(1)[0], nil)
	mustResult(t, blocker)
	if err := mustErr(t, big); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("refused by admission: %v", err)
	}
	if err := mustErr(t, expire); !errors.Is(err, ErrNeedsUpgrade) {
		t.Fatalf("a command of a newer log format: %v", err)
	}
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	if keys, _ := h.entry(1); !reflect.DeepEqual(keys, []string{"ok"}) {
		t.Fatalf("entry carries %q, want only the admitted write", keys)
	}
	h.r.resolveNext(results(1)[0], nil)
	mustResult(t, ok)
	mu.Lock()
	if !reflect.DeepEqual(released, []int64{100, 100}) {
		t.Fatalf("released %v, want each admitted write's reservation once", released)
	}
	mu.Unlock()

	h.p.refuse = func(int) error { return fmt.Errorf("%w: no room", ErrDiskFull) }
	if err := mustErr(t, h.submit("d")); !errors.Is(err, ErrDiskFull) {
		t.Fatalf("disk full: %v", err)
	}
	h.r.mu.Lock()
	entries := len(h.r.entries)
	h.r.mu.Unlock()
	if entries != 2 {
		t.Fatalf("%d entries reached raft, want 2", entries)
	}
}

// TestProposerOutcomes: raft's errors become the package's classes (refused
// before the log: not applied; after: indeterminate), and a node whose state
// machine halted answers indeterminate, since the entry is committed.
func TestProposerOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp any
		err  error
		want error
	}{
		{"not the leader", nil, raft.ErrNotLeader, ErrNotLeader},
		{"enqueue timeout", nil, raft.ErrEnqueueTimeout, ErrNotLeader},
		{"leadership transfer", nil, raft.ErrLeadershipTransferInProgress, ErrNotLeader},
		{"leadership lost after proposing", nil, raft.ErrLeadershipLost, ErrIndeterminate},
		{"raft shut down after proposing", nil, raft.ErrRaftShutdown, ErrIndeterminate},
		{"anything else", nil, errors.New("disk on fire"), ErrIndeterminate},
		{"halted state machine", &fsm.Halt{Index: 3, Err: errors.New("crc")}, nil, ErrIndeterminate},
		{"an unexpected response", "what", nil, ErrIndeterminate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newProposerHarness(t, nil)
			h.r.apply = func([]byte) (any, error) { return tc.resp, tc.err }
			if err := mustErr(t, h.submit("k")); !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
		})
	}
}

// TestProposerBatchLimits: a burst larger than maxBatch goes out as several
// entries, none larger than the limit, in order.
func TestProposerBatchLimits(t *testing.T) {
	h := newProposerHarness(t, nil)
	blocker := h.submit("first")
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	var futs []*Future
	for i := 0; i < maxBatch+10; i++ {
		futs = append(futs, h.submit(fmt.Sprint(i)))
	}
	h.r.resolveNext(results(1)[0], nil)
	mustResult(t, blocker)
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	keys, _ := h.entry(1)
	if len(keys) != maxBatch || keys[0] != "0" {
		t.Fatalf("second entry has %d commands from %q, want %d from 0", len(keys), keys[0], maxBatch)
	}
	h.r.resolveNext(results(maxBatch), nil)
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	if keys, _ := h.entry(2); len(keys) != 10 || keys[0] != fmt.Sprint(maxBatch) {
		t.Fatalf("third entry: %q", keys)
	}
	h.r.resolveNext(results(10), nil)
	for _, f := range futs {
		mustResult(t, f)
	}
}

// TestProposerShutdown: writes still queued when the node stops are told it
// shuts down (not applied); one in raft's hands is indeterminate.
func TestProposerShutdown(t *testing.T) {
	h := newProposerHarness(t, nil)
	inflight := h.submit("a")
	waitFor(t, func() bool { return h.r.pendingApplies() == 1 })
	queued := h.submit("b")
	h.close()
	if err := mustErr(t, queued); !errors.Is(err, ErrShutdown) {
		t.Fatalf("queued write: %v", err)
	}
	if err := mustErr(t, inflight); !errors.Is(err, ErrIndeterminate) {
		t.Fatalf("write in flight: %v", err)
	}
	if err := mustErr(t, h.submit("c")); !errors.Is(err, ErrShutdown) {
		t.Fatalf("write after stop: %v", err)
	}
}
