package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/rookerydb/rookery/internal/acl"
	"io"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// populate gives h one filter of every kind with some history, and a session.
func populate(h *harness) {
	h.ok(reserve(FamilyBF, "bf", bfSpec(100, 0.01, 2)))
	h.ok(reserve(FamilyBF, "bf-fixed", bfSpec(1000, 0.001, 0)))
	h.ok(reserve(FamilyCF, "cf", cfSpec(1000, 4, 2)))
	h.ok(reserve(FamilyCBF, "cbf", cbfSpec(filters.KindCounting, 1000)))
	h.ok(reserve(FamilyCBF, "dleft", cbfSpec(filters.KindDLeft, 1000)))
	for i := 0; i < 400; i++ {
		it := fmt.Sprint("item-", i)
		for _, k := range []struct {
			fam Family
			key string
		}{{FamilyBF, "bf"}, {FamilyBF, "bf-fixed"}, {FamilyCF, "cf"}, {FamilyCBF, "cbf"}, {FamilyCBF, "dleft"}} {
			h.ok(add(k.fam, k.key, it))
		}
		if i%3 == 0 {
			h.ok(del(FamilyCF, "cf", it))
			h.ok(del(FamilyCBF, "cbf", it))
			h.ok(del(FamilyCBF, "dleft", it))
		}
	}
	h.ok(withSession(add(FamilyCF, "cf", "once"), 42, 1))
	// Deadlines (snapshot version 2): an hour and a day from the log's clock.
	h.ok(&Command{Op: OpExpire, Key: "cf", Expire: 3600_000})
	h.ok(&Command{Op: OpExpire, Key: "dleft", Expire: 86400_000})
}

// stateOf describes everything a replica's state is made of, for comparisons.
func stateOf(t *testing.T, f *FSM) string {
	var b bytes.Buffer
	for _, in := range f.List() {
		deadline, _ := f.Expiry(in.Key)
		fmt.Fprintf(&b, "%+v deadline=%d\n", in, deadline)
		_ = f.read(FamilyNone, in.Key, func(flt filters.Filter) { b.Write(encodeFilter(t, flt)) })
	}
	b.Write(encodeSessions(f.sessions))
	fmt.Fprintf(&b, "applied=%d memory=%d expires=%d next=%d", f.AppliedIndex(), f.MemoryBytes(),
		f.Expires(), f.NextDeadline())
	return b.String()
}

// TestSnapshotRoundTrip: every kind, the session table and the applied index
// survive Persist and Restore exactly.
func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t)
	populate(h)
	data := snapshotBytes(t, h.f)
	g := restored(t, data)
	if a, b := stateOf(t, h.f), stateOf(t, g); a != b {
		t.Fatal("restored state differs from the original")
	}
	// The session came back: a replay is still answered, not applied.
	hg := &harness{t: t, f: g, index: h.index, now: h.now}
	hg.ok(withSession(add(FamilyCF, "cf", "once"), 42, 1))
	if n := g.Count(FamilyCF, "cf", []byte("once")); n != 1 {
		t.Fatalf("replay after restore stored %d copies", n)
	}
	// Scan order is rebuilt.
	if _, keys := g.Scan(0, 100, nil); len(keys) != 5 {
		t.Fatalf("scan after restore: %v", keys)
	}
	// A snapshot of the restored state is byte-identical.
	if !bytes.Equal(snapshotBytes(t, restored(t, data)), data) {
		t.Fatal("snapshot of a restored state differs")
	}
}

// TestSnapshotIsFrozen: writes applied after Snapshot() do not leak into the
// stream Persist writes later, and the live state keeps them.
func TestSnapshotIsFrozen(t *testing.T) {
	h := newHarness(t)
	populate(h)
	want := snapshotBytes(t, h.f)
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		h.ok(add(FamilyCF, "cf", fmt.Sprint("later-", i)))
		h.ok(add(FamilyBF, "bf", fmt.Sprint("later-", i)))
		h.ok(del(FamilyCBF, "cbf", "item-1"))
	}
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"dleft"}})
	h.ok(add(FamilyBF, "new", "x"))
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	s.Release()
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatal("writes applied after Snapshot() reached the snapshot")
	}
	if !h.exists(FamilyCF, "cf", "later-7") || !h.exists(FamilyBF, "new", "x") {
		t.Fatal("the live state lost writes made while a snapshot was open")
	}
	// Once released, mutations work in place again: no further copies.
	e := h.f.reg.byKey["cf"]
	before := e.f
	h.ok(add(FamilyCF, "cf", "in-place"))
	if e.f != before {
		t.Error("a filter was copied with no snapshot open")
	}
}

// gatedSink is a sink whose first write waits for gate to close, so that a
// snapshot is sure to be mid-stream while writes are applied, and which then
// yields on every write so that the stream and later writes interleave.
type gatedSink struct {
	memSink
	gate   chan struct{}
	writes atomic.Int64
}

func (s *gatedSink) Write(p []byte) (int, error) {
	if s.writes.Add(1) == 1 {
		<-s.gate
	}
	runtime.Gosched()
	return s.memSink.Write(p)
}

// TestSnapshotStreamsWhileWritten streams a snapshot of filters of many pages
// on another goroutine while writes to every one of them are applied (what a
// node does): the snapshot holds the state at the moment it was taken and the
// live state holds every write. Run with -race, it also shows that the stream
// and the writes share pages without a data race.
func TestSnapshotStreamsWhileWritten(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyBF, "bf", bfSpec(200_000, 0.01, 0)))
	h.ok(reserve(FamilyBF, "sbf", bfSpec(20_000, 0.01, 2)))
	h.ok(reserve(FamilyCF, "cf", cfSpec(200_000, 4, 0)))
	h.ok(reserve(FamilyCBF, "cbf", cbfSpec(filters.KindCounting, 50_000)))
	h.ok(reserve(FamilyCBF, "dleft", cbfSpec(filters.KindDLeft, 50_000)))
	keys := []struct {
		fam Family
		key string
	}{{FamilyBF, "bf"}, {FamilyBF, "sbf"}, {FamilyCF, "cf"}, {FamilyCBF, "cbf"}, {FamilyCBF, "dleft"}}
	for i := range 2000 {
		for _, k := range keys {
			h.ok(add(k.fam, k.key, fmt.Sprint("before-", i)))
		}
	}
	want := snapshotBytes(t, h.f)
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	frozen := h.f.reg.byKey["bf"].f
	sink := &gatedSink{gate: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- s.Persist(sink) }()
	for i := 0; ; i++ {
		if i == 200 {
			close(sink.gate) // 200 rounds written while the stream waited
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
			if !bytes.Equal(sink.Bytes(), want) {
				t.Fatal("the snapshot streamed writes applied after it was taken")
			}
			for j := range i {
				for _, k := range keys {
					if !h.exists(k.fam, k.key, fmt.Sprint("during-", j)) {
						t.Fatalf("%s lost %q, written while the snapshot streamed", k.key, fmt.Sprint("during-", j))
					}
				}
			}
			if live := h.f.reg.byKey["bf"].f; live == frozen {
				t.Fatal("a filter written during the snapshot was written in place")
			}
			return
		default:
		}
		for _, k := range keys {
			h.ok(add(k.fam, k.key, fmt.Sprint("during-", i)))
		}
		if i%2 == 0 {
			h.ok(del(FamilyCF, "cf", fmt.Sprint("before-", i)))
			h.ok(del(FamilyCBF, "cbf", fmt.Sprint("before-", i)))
		}
	}
}

// TestRestoreRefusesDamage: truncation or any flipped byte is an error, and a
// refused snapshot leaves the state machine as it was.
func TestRestoreRefusesDamage(t *testing.T) {
	h := newHarness(t)
	populate(h)
	data := snapshotBytes(t, h.f)

	target := newHarness(t)
	target.ok(add(FamilyBF, "keep", "me"))
	before := stateOf(t, target.f)
	try := func(what string, b []byte) {
		t.Helper()
		err := target.f.Restore(io.NopCloser(bytes.NewReader(b)))
		if !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("%s: Restore returned %v", what, err)
		}
	}
	for _, n := range []int{0, 5, 14, 15, len(data) / 2, len(data) - 5, len(data) - 1} {
		try(fmt.Sprintf("truncated to %d", n), data[:n])
	}
	try("trailing byte", append(bytes.Clone(data), 0))
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 300; i++ {
		b := bytes.Clone(data)
		at := r.IntN(len(b))
		b[at] ^= byte(1 + r.IntN(255))
		try(fmt.Sprintf("byte %d flipped", at), b)
	}
	if stateOf(t, target.f) != before {
		t.Fatal("a refused snapshot changed the state")
	}
}

// TestReplicasConverge: two state machines fed the same random log end in
// byte-identical snapshots (Apply is deterministic).
func TestReplicasConverge(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var log []*Command
	keys := []struct {
		fam Family
		key string
	}{{FamilyBF, "b1"}, {FamilyBF, "b2"}, {FamilyCF, "c1"}, {FamilyCF, "c2"}, {FamilyCBF, "n1"}}
	now := int64(1e18)
	for i := 0; i < 5000; i++ {
		k := keys[r.IntN(len(keys))]
		it := fmt.Sprint(r.IntN(3000))
		var c *Command
		switch x := r.IntN(20); {
		case x < 12:
			c = add(k.fam, k.key, it)
		case x < 17 && k.fam != FamilyBF:
			c = del(k.fam, k.key, it)
		case x == 17:
			c = &Command{Op: OpDelKeys, Keys: []string{k.key}}
		default:
			c = withSession(add(k.fam, k.key, it), uint64(r.IntN(50)), uint64(1+r.IntN(300)))
		}
		now += int64(r.IntN(1e9))
		c.Time = now
		log = append(log, c)
	}
	var snaps [][]byte
	for replica := 0; replica < 2; replica++ {
		h := newHarness(t)
		for _, c := range log {
			cc := *c
			h.apply(&cc)
		}
		snaps = append(snaps, snapshotBytes(t, h.f))
	}
	if !bytes.Equal(snaps[0], snaps[1]) {
		t.Fatal("replicas applying the same log diverged")
	}
}

// FuzzRestore: a hostile snapshot never panics the node, and one that restores
// snapshots again to the same bytes.
func FuzzRestore(f *testing.F) {
	h := newHarness(f)
	populate(h)
	f.Add(snapshotBytes(f, h.f))
	h.ok(reserve(FamilyBF, "window", wbSpec(100, 0.01, 7e9, 0)))
	h.ok(reserve(FamilyCF, "coupons", wcSpec(100, 7e9)))
	h.ok(add(FamilyBF, "window", "a", "b"))
	h.ok(add(FamilyCF, "coupons", "c"))
	f.Add(snapshotBytes(f, h.f))
	// Version 5: after a transaction, with versions and a tombstone.
	h.exec(nil, bfAdd("txk", "x"))
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"txk"}})
	f.Add(snapshotBytes(f, h.f))
	f.Add(snapshotBytes(f, New(Options{})))
	// Version 6: users set through the log.
	reg, err := acl.NewRegistry([]string{"bf.add", "bf.exists", "ping"})
	if err != nil {
		f.Fatal(err)
	}
	opts := func() Options { return Options{Users: acl.NewStore(reg, "pw"), RequirePass: "pw"} }
	u := &harness{t: f, f: New(opts()), now: 1e18}
	u.ok(&Command{Op: OpACLSetUser, Key: "checker", Items: [][]byte{[]byte("on"), []byte("~names"), []byte("+bf.exists")}})
	u.ok(reserve(FamilyBF, "names", bfSpec(100, 0.01, 2)))
	f.Add(snapshotBytes(f, u.f))
	f.Fuzz(func(t *testing.T, data []byte) {
		g := New(opts())
		if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			return
		}
		again := snapshotBytes(t, g)
		if err := New(opts()).Restore(io.NopCloser(bytes.NewReader(again))); err != nil {
			t.Fatalf("a restored state snapshots to something Restore refuses: %v", err)
		}
	})
}
