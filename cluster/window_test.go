package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rookerydb/rookery/filters"
	"github.com/rookerydb/rookery/fsm"
)

// Windowed filters (fsm/window.go) need log format 6, and age by the log's
// clock: the leader's ticks retire their generations when nothing is written.

func windowReserve(key string, window time.Duration) *fsm.Command {
	return &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyBF, Key: key,
		Spec: fsm.Spec{Kind: filters.KindWindowBloom, Capacity: 10_000, ErrorRate: 0.001, Window: int64(window)}}
}

func couponReserve(key string, window time.Duration) *fsm.Command {
	return &fsm.Command{Op: fsm.OpReserve, Family: fsm.FamilyCF, Key: key,
		Spec: fsm.Spec{Kind: filters.KindWindowCuckoo, Capacity: 10_000, MaxIterations: 500, Window: int64(window)}}
}

// TestWindowWaitsForLogFormat6: while a member reads only format 5, a
// windowed RESERVE is refused before it is proposed, through the leader and
// through a follower; once the member is upgraded it is taken.
func TestWindowWaitsForLogFormat6(t *testing.T) {
	tc := newTestCluster(t, 3, func(c *Config) {
		if c.ID == "n3" {
			c.MaxLogFormat = fsm.CodecV5
		}
	})
	held := 2
	tc.mustWrite(bfAdd("k", "a"))
	_, l := tc.leader(10 * time.Second)
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, "gossip of n3's format on "+n.ID(), func() bool { return n.forwardCodec() == fsm.CodecV5 })
		for _, c := range []*fsm.Command{windowReserve("w", time.Minute), couponReserve("c", time.Minute)} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := submit(ctx, n, c)
			cancel()
			want := "not every node of the cluster can apply this command: it needs log format 6 and a member reads only up to 5; upgrade every node"
			if !errors.Is(err, ErrNeedsUpgrade) || err.Error() != want {
				t.Fatalf("windowed reserve through %s (leader %s): %v, want %q", n.ID(), l.ID(), err, want)
			}
		}
	}
	if _, ok := l.meta.fsm.KindOf("w"); ok {
		t.Fatal("a refused reserve made a key")
	}
	tc.crash(held)
	tc.cfgs[held].MaxLogFormat = 0
	tc.start(held)
	eventually(t, 20*time.Second, "the leader to write format 6 or later", func() bool {
		_, l := tc.leader(10 * time.Second)
		return l.Status().LogFormatUse >= int(fsm.CodecV6)
	})
	tc.mustWrite(windowReserve("w", time.Minute))
	tc.mustWrite(&fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "w", Items: [][]byte{[]byte("x")}, NoCreate: true})
	for _, n := range tc.live() {
		if !exists(t, n, "w", "x") {
			t.Fatalf("%s lacks an item added to a windowed filter", n.ID())
		}
	}
}

// TestWindowReplicasAgreeThroughKills: windowed filters written while a
// follower and then the leader are killed and restarted (one catching up from
// a snapshot) answer alike on every node: acknowledged items present within
// their window, every generation retired by the leader's ticks once writes
// stop, and every replica's state byte for byte the same at the same index.
func TestWindowReplicasAgreeThroughKills(t *testing.T) {
	const window = 5 * time.Second // generations of 714 ms
	tc := newTestCluster(t, 3, func(c *Config) {
		c.TrailingLogs = 10
		c.SnapshotThreshold = 1 << 20 // only the snapshots the test asks for
	})
	tc.mustWrite(windowReserve("seen", window))
	tc.mustWrite(couponReserve("coupons", window))
	write := func(round, i int) {
		tc.t.Helper()
		item := fmt.Sprint("r", round, "-", i)
		tc.mustWrite(&fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyBF, Key: "seen", NoCreate: true, Multi: true,
			Items: [][]byte{[]byte(item), []byte(item + "b")}})
		tc.mustWrite(&fsm.Command{Op: fsm.OpAdd, Family: fsm.FamilyCF, Key: "coupons", NoCreate: true,
			Items: [][]byte{[]byte(item)}})
		if i%3 == 0 {
			tc.mustWrite(&fsm.Command{Op: fsm.OpDelete, Family: fsm.FamilyCF, Key: "coupons", Items: [][]byte{[]byte(item)}})
		}
	}
	for round := range 3 {
		victim := tc.followers()[0]
		if round == 1 {
			victim, _ = tc.leader(10 * time.Second)
		}
		tc.crash(victim)
		for i := range 30 {
			write(round, i)
		}
		_, l := tc.leader(10 * time.Second)
		if round == 2 {
			if err := l.meta.raft.Snapshot().Error(); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
		}
		tc.start(victim)
		for i := 30; i < 40; i++ {
			write(round, i)
		}
		// The newest items were acknowledged well within the window: present
		// on every node once it has applied the leader's index.
		for _, n := range tc.live() {
			if !exists(t, n, "seen", fmt.Sprint("r", round, "-39b")) {
				t.Fatalf("round %d: %s lacks an item just added", round, n.ID())
			}
		}
	}
	// Writes stop: the leader's ticks retire every generation on every node.
	for _, n := range tc.live() {
		eventually(t, 20*time.Second, "every generation to retire on "+n.ID(), func() bool {
			card, err := n.meta.fsm.Card("seen")
			in, _ := n.meta.fsm.Info(fsm.FamilyCF, "coupons")
			return err == nil && card == 0 && in.Items == 0 && n.meta.fsm.NextDeadline() == 0
		})
	}
	// One more write, then every replica at its index holds the same bytes.
	tc.mustWrite(bfAdd("final", "x"))
	_, l := tc.leader(10 * time.Second)
	want := l.meta.fsm.AppliedIndex()
	var states [][]byte
	for _, n := range tc.live() {
		eventually(t, 10*time.Second, n.ID()+" to apply the last write", func() bool { return n.meta.fsm.AppliedIndex() >= want })
		states = append(states, fsmState(t, n.meta.fsm))
	}
	for i := 1; i < len(states); i++ {
		if !bytes.Equal(states[0], states[i]) {
			t.Fatalf("replicas differ after the kills: node %d", i)
		}
	}
}

// fsmState is f's snapshot stream, which holds every filter's bytes and the
// log's clock.
func fsmState(t *testing.T, f *fsm.FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	sink := &bufSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// bufSink is a raft.SnapshotSink into memory.
type bufSink struct{ bytes.Buffer }

func (*bufSink) ID() string    { return "buf" }
func (*bufSink) Close() error  { return nil }
func (*bufSink) Cancel() error { return nil }
