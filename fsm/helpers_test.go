package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/filters"
)

// harness applies commands through Apply, as raft would, one log index each.
type harness struct {
	t     testing.TB
	f     *FSM
	index uint64
	now   int64 // leader clock stamped into commands, ns
}

func newHarness(t testing.TB) *harness {
	return &harness{t: t, f: New(Options{}), now: 1e18}
}

// apply proposes c as one TypeCommand entry and returns its result.
func (h *harness) apply(c *Command) *Result {
	h.t.Helper()
	if c.Time == 0 {
		c.Time = h.now
	}
	h.index++
	r, ok := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: EncodeCommand(c)}).(*Result)
	if !ok {
		h.t.Fatalf("Apply of %+v did not return a *Result", c)
	}
	return r
}

// ok applies c and fails the test on a domain error.
func (h *harness) ok(c *Command) *Result {
	h.t.Helper()
	r := h.apply(c)
	if r.Err != nil {
		h.t.Fatalf("%v %s: %v", c.Op, c.Key, r.Err)
	}
	return r
}

func (h *harness) exists(fam Family, key, item string) bool {
	return h.f.Exists(fam, key, [][]byte{[]byte(item)})[0]
}

// snapshotBytes persists a snapshot of f and returns the stream.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed {
		t.Fatal("Persist did not close the sink")
	}
	return sink.Bytes()
}

// restored returns a new FSM restored from data.
func restored(t testing.TB, data []byte) *FSM {
	t.Helper()
	f := New(Options{})
	if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	return f
}

type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

func items(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func bfSpec(capacity uint64, rate float64, expansion uint32) Spec {
	return Spec{Kind: filters.KindScalable, Capacity: capacity, ErrorRate: rate,
		Expansion: expansion, NonScaling: expansion == 0}
}

func cfSpec(capacity uint64, bucket uint16, expansion uint32) Spec {
	return Spec{Kind: filters.KindCuckoo, Capacity: capacity, BucketSize: bucket,
		MaxIterations: 20, Expansion: expansion, FingerprintBits: 8}
}

func cbfSpec(kind filters.Kind, capacity uint64) Spec {
	return Spec{Kind: kind, Capacity: capacity, ErrorRate: 0.01, CounterBits: 4}
}

func reserve(fam Family, key string, s Spec) *Command {
	return &Command{Op: OpReserve, Family: fam, Key: key, Spec: s}
}

func add(fam Family, key string, its ...string) *Command {
	c := &Command{Op: OpAdd, Family: fam, Key: key, Items: items(its...), Multi: len(its) > 1}
	switch fam {
	case FamilyBF:
		c.Spec = bfSpec(100, 0.01, 2)
	case FamilyCF:
		c.Spec = cfSpec(1024, 2, 1)
	case FamilyCBF:
		c.Spec = cbfSpec(filters.KindCounting, 100)
	}
	return c
}

func del(fam Family, key, item string) *Command {
	return &Command{Op: OpDelete, Family: fam, Key: key, Items: items(item)}
}

// encodeFilter returns f's encoding.
func encodeFilter(t testing.TB, f filters.Filter) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := filters.Encode(&b, f); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
