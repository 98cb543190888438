package fsm

import (
	"errors"
	"fmt"
	"testing"
)

func rename(from, to string, nx bool) *Command {
	return &Command{Op: OpRename, Key: from, Keys: []string{to}, NX: nx}
}

// TestRename: RENAME moves a filter, replacing the target; RENAMENX only to a
// free name; memory follows the key's name; a missing source is ErrNotFound.
func TestRename(t *testing.T) {
	h := newHarness(t)
	h.ok(add(FamilyBF, "a", "x"))
	h.ok(add(FamilyCF, "c", "y"))
	mem := h.f.MemoryBytes()
	if r := h.ok(rename("a", "a-longer-name", false)); r.Ints[0] != 1 {
		t.Fatalf("rename: %v", r.Ints)
	}
	if _, ok := h.f.KindOf("a"); ok || !h.exists(FamilyBF, "a-longer-name", "x") {
		t.Fatal("the filter did not move")
	}
	if got, want := h.f.MemoryBytes(), mem+uint64(len("a-longer-name")+7)&^7-uint64(len("a")+7)&^7; got != want {
		t.Errorf("memory %d after renaming, want %d", got, want)
	}
	if r := h.ok(rename("a-longer-name", "c", true)); r.Ints[0] != 0 || !h.exists(FamilyCF, "c", "y") {
		t.Fatalf("RENAMENX onto a taken name: %v", r.Ints)
	}
	if r := h.ok(rename("a-longer-name", "c", false)); r.Ints[0] != 1 || !h.exists(FamilyBF, "c", "x") {
		t.Fatalf("RENAME onto a taken name: %v", r.Ints)
	}
	if n := h.f.Len(); n != 1 {
		t.Errorf("%d keys after replacing one, want 1", n)
	}
	if r := h.ok(rename("c", "c", false)); r.Ints[0] != 1 {
		t.Errorf("rename to itself: %v", r.Ints)
	}
	if r := h.ok(rename("c", "c", true)); r.Ints[0] != 0 {
		t.Errorf("RENAMENX to itself: %v", r.Ints)
	}
	if r := h.apply(rename("missing", "b", false)); !errors.Is(r.Err, ErrNotFound) {
		t.Errorf("rename of a missing key: %v", r.Err)
	}
}

// TestRenameUnderSnapshot: a filter renamed while a snapshot streams it keeps
// its copy-on-write generation: the next write works on a copy, and the
// snapshot holds the filter as it was, under its old name.
func TestRenameUnderSnapshot(t *testing.T) {
	h := newHarness(t)
	h.ok(add(FamilyBF, "old", "before"))
	s, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.ok(rename("old", "new", false))
	h.ok(add(FamilyBF, "new", "after"))
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	s.Release()
	r := restored(t, sink.Bytes())
	if !r.Exists(FamilyBF, "old", [][]byte{[]byte("before")})[0] || r.Exists(FamilyBF, "old", [][]byte{[]byte("after")})[0] {
		t.Error("the snapshot does not hold the filter as it was when taken")
	}
	if !h.exists(FamilyBF, "new", "after") || !h.exists(FamilyBF, "new", "before") {
		t.Error("the renamed filter lost an item")
	}
}

// TestFlush: FLUSHALL removes every filter and frees their memory.
func TestFlush(t *testing.T) {
	h := newHarness(t)
	for i := range 5 {
		h.ok(add(FamilyBF, fmt.Sprint("k", i), "x"))
	}
	if r := h.ok(&Command{Op: OpFlush}); r.Ints[0] != 5 {
		t.Fatalf("flush: %v", r.Ints)
	}
	if h.f.Len() != 0 || h.f.MemoryBytes() != 0 || len(h.f.List()) != 0 {
		t.Fatalf("after flush: %d keys, %d bytes", h.f.Len(), h.f.MemoryBytes())
	}
	h.ok(add(FamilyBF, "k0", "y"))
	if !h.exists(FamilyBF, "k0", "y") || h.exists(FamilyBF, "k0", "x") {
		t.Error("a key created after a flush holds old items")
	}
}

// TestCompact: CF.COMPACT drops the sub-filters deletes emptied, keeps every
// held item, and refuses other families.
func TestCompact(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "cf", cfSpec(16, 2, 1)))
	var items []string
	for i := 0; ; i++ {
		it := fmt.Sprint("i", i)
		h.ok(add(FamilyCF, "cf", it))
		items = append(items, it)
		if in, _ := h.f.Info(FamilyCF, "cf"); in.Filters == 4 {
			break
		}
	}
	for _, it := range items[1:] {
		if r := h.ok(del(FamilyCF, "cf", it)); r.Ints[0] != 1 {
			t.Fatalf("delete %s: %v", it, r.Ints)
		}
	}
	mem := h.f.MemoryBytes()
	h.ok(&Command{Op: OpCompact, Family: FamilyCF, Key: "cf"})
	in, _ := h.f.Info(FamilyCF, "cf")
	if in.Filters != 1 || in.Items != 1 || in.Deleted != 0 || h.f.MemoryBytes() >= mem {
		t.Errorf("after compacting: %+v, memory %d of %d", in, h.f.MemoryBytes(), mem)
	}
	if !h.exists(FamilyCF, "cf", items[0]) {
		t.Error("the held item was lost")
	}
	h.ok(add(FamilyBF, "bf", "x"))
	if r := h.apply(&Command{Op: OpCompact, Family: FamilyCF, Key: "bf"}); !errors.Is(r.Err, ErrWrongType) {
		t.Errorf("compact of a Bloom filter: %v", r.Err)
	}
	if r := h.apply(&Command{Op: OpCompact, Family: FamilyCF, Key: "missing"}); !errors.Is(r.Err, ErrNotFound) {
		t.Errorf("compact of a missing key: %v", r.Err)
	}
}

// TestNewOpsNeedFormat4: the ops of log format 4 say so, and round-trip.
func TestNewOpsNeedFormat4(t *testing.T) {
	for _, c := range []*Command{rename("a", "b", true), {Op: OpFlush}, {Op: OpCompact, Family: FamilyCF, Key: "k"}} {
		if MinCodec(c) != CodecV4 {
			t.Errorf("%v: MinCodec %d", c.Op, MinCodec(c))
		}
		_, got, err := DecodeEntry(EncodeCommand(c))
		if err != nil || len(got) != 1 || got[0].Op != c.Op || got[0].Key != c.Key || got[0].NX != c.NX || len(got[0].Keys) != len(c.Keys) {
			t.Errorf("%v: round trip %+v %v", c.Op, got, err)
		}
		if _, _, err := decodeEntry(EncodeCommand(c), CodecV3); !errors.Is(err, ErrNewerFormat) {
			t.Errorf("%v on a format 3 node: %v, want ErrNewerFormat", c.Op, err)
		}
	}
	if MinCodec(add(FamilyBF, "k", "x")) != CodecV1 {
		t.Error("an add needs format 1 only")
	}
}
