package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// txSamples are transactions as transport builds them.
func txSamples() []*Command {
	return []*Command{
		{Op: OpExec, Key: "{u}a", Subs: []*Command{
			{Op: OpAdd, Family: FamilyBF, Key: "{u}a", Items: items("x"), Spec: Spec{Kind: 2, Capacity: 100, ErrorRate: 0.01, Expansion: 2}},
			{Op: OpTest, Family: FamilyBF, Key: "{u}a", Items: items("x", "y")},
			{Op: OpAdd, Family: FamilyCF, Key: "{u}c", Items: items("x"), MaxFilters: 7, Multi: true,
				Spec: Spec{Kind: 4, Capacity: 64, BucketSize: 2, MaxIterations: 20, Expansion: 1, FingerprintBits: 8}},
			{Op: OpExpire, Key: "{u}a", Expire: 5000, ExpireIf: ExpireNX},
			{Op: OpCount, Family: FamilyCF, Key: "{u}c", Items: items("x")},
		}},
		{Op: OpExec, Key: "k", Keys: []string{"k", "j"}, Watch: []uint64{7, 0}, Subs: []*Command{
			{Op: OpDelKeys, Keys: []string{"k", "j"}},
		}},
		{Op: OpExec, Key: "w", Keys: []string{"w"}, Watch: []uint64{3}},
	}
}

func TestExecCodecRoundTrip(t *testing.T) {
	for i, c := range txSamples() {
		_, cs, err := DecodeEntry(EncodeCommand(c))
		if err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
		got := cs[0]
		if len(got.Subs) != len(c.Subs) || !reflect.DeepEqual(got.Keys, c.Keys) || !reflect.DeepEqual(got.Watch, c.Watch) {
			t.Fatalf("sample %d: got %+v, want %+v", i, got, c)
		}
		for j := range c.Subs {
			if a, b := EncodeCommand(c.Subs[j]), EncodeCommand(got.Subs[j]); !bytes.Equal(a, b) {
				t.Fatalf("sample %d command %d changed: %+v -> %+v", i, j, c.Subs[j], got.Subs[j])
			}
		}
		if MinCodec(c) != CodecV10 {
			t.Fatalf("sample %d: MinCodec %d", i, MinCodec(c))
		}
	}
	// In a batch too, beside ordinary commands.
	batch := append(sampleCommands(), txSamples()...)
	_, cs, err := DecodeEntry(EncodeBatch(batch))
	if err != nil || len(cs) != len(batch) || len(cs[len(cs)-3].Subs) != 5 {
		t.Fatalf("batch: %d commands, %v", len(cs), err)
	}
	// A node that reads up to format 9 needs a newer build, and says so.
	_, _, err = decodeEntry(EncodeCommand(txSamples()[0]), CodecV9)
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("format 9 node: %v, want a newer-format error", err)
	}
}

func TestExecCodecRefusesWhatIsNoTransaction(t *testing.T) {
	bad := map[string]*Command{
		"test outside a transaction":  {Op: OpTest, Key: "a", Items: items("x")},
		"count outside a transaction": {Op: OpCount, Key: "a", Items: items("x")},
		"exec inside exec":            {Op: OpExec, Key: "a", Subs: []*Command{{Op: OpExec, Key: "a"}}},
		"flush inside exec":           {Op: OpExec, Key: "a", Subs: []*Command{{Op: OpFlush}}},
		"session inside exec":         {Op: OpExec, Key: "a", Subs: []*Command{{Op: OpAdd, Key: "a", Session: Session{1, 2}}}},
		"watch without its indexes":   {Op: OpExec, Key: "a", Keys: []string{"a"}},
	}
	for name, c := range bad {
		if _, _, err := DecodeEntry(EncodeCommand(c)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decoded (%v), want refused as corrupt", name, err)
		}
	}
}

func TestExecResultRoundTrip(t *testing.T) {
	r := &Result{Subs: []*Result{{Ints: []int64{1}}, {Err: ErrWrongType}, {Ints: []int64{1, 0}, Err: ErrNonScalingFull, Stopped: true}, {}}}
	got, err := DecodeResult(EncodeResult(r))
	if err != nil || !reflect.DeepEqual(got, r) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if got, err := DecodeResult(EncodeResult(&Result{Err: ErrWatched})); err != nil || got.Err != ErrWatched {
		t.Fatalf("aborted: %+v, %v", got, err)
	}
	// A result nested twice is refused, not recursed into.
	inner := EncodeResult(&Result{Subs: []*Result{}})
	b := []byte{0, resultSubs, 0, 1, byte(len(inner))}
	if _, err := DecodeResult(append(b, inner...)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("nested result: %v", err)
	}
}

// exec applies a transaction of subs watching keys at the given indexes.
func (h *harness) exec(watch map[string]uint64, subs ...*Command) *Result {
	h.t.Helper()
	c := &Command{Op: OpExec, Key: "tx", Subs: subs}
	for _, k := range slices.Sorted(maps.Keys(watch)) {
		c.Keys = append(c.Keys, k)
		c.Watch = append(c.Watch, watch[k])
	}
	return h.apply(c)
}

func bfAdd(key string, its ...string) *Command {
	return &Command{Op: OpAdd, Family: FamilyBF, Key: key, Items: items(its...),
		Spec: Spec{Kind: 2, Capacity: 100, ErrorRate: 0.01, Expansion: 2}}
}

func TestExecAppliesEveryCommandInOrder(t *testing.T) {
	h := newHarness(t)
	r := h.exec(nil,
		&Command{Op: OpTest, Family: FamilyBF, Key: "a", Items: items("x")},
		bfAdd("a", "x"),
		&Command{Op: OpTest, Family: FamilyBF, Key: "a", Items: items("x", "y")},
		&Command{Op: OpAdd, Family: FamilyCF, Key: "a", Items: items("x"), NoCreate: true}, // wrong type: fails alone
		bfAdd("b", "y"),
	)
	if r.Err != nil || len(r.Subs) != 5 {
		t.Fatalf("exec: %+v", r)
	}
	want := [][]int64{{0}, {1}, {1, 0}, nil, {1}}
	for i, w := range want {
		if !reflect.DeepEqual(r.Subs[i].Ints, w) && !(len(w) == 0 && len(r.Subs[i].Ints) == 0) {
			t.Errorf("command %d: %+v, want ints %v", i, r.Subs[i], w)
		}
	}
	if !errors.Is(r.Subs[3].Err, ErrWrongType) {
		t.Errorf("wrong-type add inside: %v", r.Subs[3].Err)
	}
	if !h.exists(FamilyBF, "a", "x") || !h.exists(FamilyBF, "b", "y") {
		t.Fatal("writes inside the transaction not applied")
	}
}

func TestWatchAbortsAfterAChange(t *testing.T) {
	h := newHarness(t)
	h.ok(bfAdd("k", "first"))
	h.exec(nil) // the floor: the first transaction's index
	seen := h.f.WatchIndex()

	// Unchanged since: applies.
	if r := h.exec(map[string]uint64{"k": seen}, bfAdd("k", "a")); r.Err != nil {
		t.Fatalf("unchanged key: %v", r.Err)
	}
	// The transaction itself changed k: a watch from before it aborts, and
	// nothing of the aborted one applies.
	if r := h.exec(map[string]uint64{"k": seen}, bfAdd("k", "b"), bfAdd("other", "c")); r.Err != ErrWatched {
		t.Fatalf("changed key: %v, want ErrWatched", r.Err)
	}
	if h.exists(FamilyBF, "k", "b") || h.exists(FamilyBF, "other", "c") {
		t.Fatal("an aborted transaction applied a write")
	}
	// A change to another key does not abort.
	seen = h.f.WatchIndex()
	h.ok(bfAdd("unrelated", "z"))
	if r := h.exec(map[string]uint64{"k": seen}, bfAdd("k", "c")); r.Err != nil {
		t.Fatalf("another key changed: %v", r.Err)
	}
	// Every kind of change counts: expire, persist, delete, rename onto it.
	changes := map[string]*Command{
		"expire":  {Op: OpExpire, Key: "k", Expire: 100000},
		"persist": {Op: OpPersist, Key: "k"},
		"delete":  {Op: OpDelKeys, Keys: []string{"k"}},
		"create":  bfAdd("k", "again"),
		"rename":  {Op: OpRename, Key: "src", Keys: []string{"k"}},
		"flush":   {Op: OpFlush},
	}
	for _, name := range []string{"expire", "persist", "delete", "create", "rename", "flush"} {
		if name == "rename" {
			h.ok(bfAdd("src", "s"))
		}
		seen = h.f.WatchIndex()
		h.ok(changes[name])
		if r := h.exec(map[string]uint64{"k": seen}, bfAdd("marker", name)); r.Err != ErrWatched {
			t.Errorf("%s: %v, want ErrWatched", name, r.Err)
		}
		if h.exists(FamilyBF, "marker", name) {
			t.Errorf("%s: aborted transaction applied", name)
		}
	}
}

func TestWatchBeforeTheFirstTransactionAbortsOnce(t *testing.T) {
	h := newHarness(t)
	h.ok(bfAdd("k", "x"))
	seen := h.f.WatchIndex()
	if r := h.exec(map[string]uint64{"k": seen}, bfAdd("k", "y")); r.Err != ErrWatched {
		t.Fatalf("first transaction: %v, want ErrWatched (the floor)", r.Err)
	}
	seen = h.f.WatchIndex()
	if r := h.exec(map[string]uint64{"k": seen}, bfAdd("k", "y")); r.Err != nil {
		t.Fatalf("retry: %v", r.Err)
	}
}

// Replicas that reached the same index by different paths (one applied every
// entry, one restored a snapshot) decide every watched transaction alike.
func TestWatchVersionsTravelInSnapshots(t *testing.T) {
	h := newHarness(t)
	h.exec(nil)
	for i := range 50 {
		h.ok(bfAdd(fmt.Sprintf("k%d", i), "x"))
		if i%3 == 0 {
			h.ok(&Command{Op: OpDelKeys, Keys: []string{fmt.Sprintf("k%d", i)}})
		}
	}
	data := snapshotBytes(t, h.f)
	if v := bytes.Index(data, []byte(snapMagic)); v != 0 || data[len(snapMagic)] != snapV5 {
		t.Fatalf("snapshot after a transaction is not version 5: % x", data[:len(snapMagic)+2])
	}
	other := &harness{t: t, f: restored(t, data), index: h.index, now: h.now}
	for w := uint64(1); w <= h.index; w += 7 {
		for _, k := range []string{"k0", "k1", "k2", "k49", "never"} {
			a := h.exec(map[string]uint64{k: w}, &Command{Op: OpTest, Family: FamilyBF, Key: k, Items: items("x")})
			b := other.exec(map[string]uint64{k: w}, &Command{Op: OpTest, Family: FamilyBF, Key: k, Items: items("x")})
			if a.Err != b.Err {
				t.Fatalf("watch %s at %d: applied %v, restored %v", k, w, a.Err, b.Err)
			}
		}
	}
	// A state before any transaction keeps the older layout.
	plain := newHarness(t)
	plain.ok(bfAdd("k", "x"))
	if data := snapshotBytes(t, plain.f); data[len(snapMagic)] == snapV5 {
		t.Fatal("a state with no transaction wrote snapshot version 5")
	}
}

func TestTombstonesStayBounded(t *testing.T) {
	h := newHarness(t)
	h.exec(nil)
	seen := h.f.WatchIndex()
	for i := range maxTombstones * 3 {
		k := fmt.Sprintf("t%d", i)
		h.ok(bfAdd(k, "x"))
		h.ok(&Command{Op: OpDelKeys, Keys: []string{k}})
	}
	if n := len(h.f.tx.removed); n > maxTombstones {
		t.Fatalf("%d tombstones kept", n)
	}
	// A key removed long ago (forgotten) still reads as changed since seen.
	if r := h.exec(map[string]uint64{"t0": seen}, bfAdd("m", "x")); r.Err != ErrWatched {
		t.Fatalf("forgotten removal: %v, want ErrWatched", r.Err)
	}
	// The same on a replica restored from a snapshot.
	f := restored(t, snapshotBytes(t, h.f))
	if !reflect.DeepEqual(f.tx, h.f.tx) {
		t.Fatal("transaction state changed through a snapshot")
	}
}

func TestExecOnTheMapGroupIsRefused(t *testing.T) {
	h := newHarness(t)
	h.f.cmap.Store(&Map{})
	c := &Command{Op: OpExec, Key: "a", Subs: []*Command{bfAdd("a", "x")}, Time: h.now}
	h.index++
	r := h.f.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: EncodeCommand(c)}).(*Result)
	if r.Err != ErrMapGroup {
		t.Fatalf("exec on the map group: %v", r.Err)
	}
}
