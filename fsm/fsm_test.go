package fsm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rookerydb/rookery/filters"
)

// TestApplyTable runs commands one after another on one state machine and
// checks each outcome, as every replica would compute it.
func TestApplyTable(t *testing.T) {
	h := newHarness(t)
	steps := []struct {
		cmd     *Command
		err     error
		ints    []int64
		stopped bool
	}{
		{cmd: reserve(FamilyBF, "users", bfSpec(1000, 0.01, 2))},
		{cmd: reserve(FamilyBF, "users", bfSpec(10, 0.01, 2)), err: ErrExists},
		{cmd: add(FamilyBF, "users", "alice"), ints: []int64{1}},
		{cmd: add(FamilyBF, "users", "alice"), ints: []int64{0}},
		{cmd: add(FamilyBF, "users", "bob", "alice", "carol"), ints: []int64{1, 0, 1}},
		{cmd: add(FamilyCF, "users", "x"), err: ErrWrongType},
		{cmd: reserve(FamilyCF, "users", cfSpec(100, 2, 1)), err: ErrWrongType},
		{cmd: del(FamilyCF, "users", "alice"), err: ErrWrongType},
		{cmd: del(FamilyBF, "users", "alice"), err: ErrWrongType},
		// A non-scaling Bloom of capacity 2 takes two new items, then stops the
		// command at the first item it cannot take.
		{cmd: reserve(FamilyBF, "small", bfSpec(2, 0.001, 0))},
		{cmd: add(FamilyBF, "small", "s1", "s2", "s3", "s4"), ints: []int64{1, 1}, err: ErrNonScalingFull, stopped: true},
		{cmd: add(FamilyBF, "small", "s5"), err: ErrNonScalingFull},
		{cmd: &Command{Op: OpAdd, Family: FamilyBF, Key: "nope", Items: items("a"), Multi: true, NoCreate: true,
			Spec: bfSpec(100, 0.01, 2)}, err: ErrNotFound},
		{cmd: reserve(FamilyBF, "bad", bfSpec(0, 0.01, 2)), err: ErrBadSpec},
		{cmd: reserve(FamilyBF, "bad", cfSpec(100, 2, 1)), err: ErrBadSpec}, // kind of another family
		// Cuckoo: a multiset with deletes.
		{cmd: add(FamilyCF, "coupons", "C1"), ints: []int64{1}},
		{cmd: add(FamilyCF, "coupons", "C1"), ints: []int64{1}},
		{cmd: &Command{Op: OpAdd, Family: FamilyCF, Key: "coupons", Items: items("C1"), NX: true}, ints: []int64{0}},
		{cmd: &Command{Op: OpAdd, Family: FamilyCF, Key: "coupons", Items: items("C1", "C2"), NX: true, Multi: true},
			ints: []int64{0, 1}},
		{cmd: del(FamilyCF, "coupons", "C1"), ints: []int64{1}},
		{cmd: del(FamilyCF, "coupons", "C1"), ints: []int64{1}},
		{cmd: del(FamilyCF, "coupons", "C1"), ints: []int64{0}},
		{cmd: del(FamilyCF, "missing", "C1"), err: ErrNotFound},
		// Counting Bloom, both layouts.
		{cmd: reserve(FamilyCBF, "counts", cbfSpec(filters.KindCounting, 1000))},
		{cmd: reserve(FamilyCBF, "dleft", cbfSpec(filters.KindDLeft, 1000))},
		{cmd: add(FamilyCBF, "counts", "a", "a", "b"), ints: []int64{1, 0, 1}},
		{cmd: add(FamilyCBF, "dleft", "a", "a"), ints: []int64{1, 0}},
		{cmd: del(FamilyCBF, "counts", "a"), ints: []int64{1}},
		{cmd: del(FamilyCBF, "dleft", "zzz"), ints: []int64{0}},
		{cmd: &Command{Op: OpDelKeys, Keys: []string{"users", "nope", "users", "coupons"}}, ints: []int64{2}},
	}
	for i, s := range steps {
		r := h.apply(s.cmd)
		if !errors.Is(r.Err, s.err) || r.Stopped != s.stopped || !reflect.DeepEqual(nilIfEmpty(r.Ints), s.ints) {
			t.Fatalf("step %d (%v %q %q): got err=%v ints=%v stopped=%v, want err=%v ints=%v stopped=%v",
				i, s.cmd.Op, s.cmd.Key, s.cmd.Items, r.Err, r.Ints, r.Stopped, s.err, s.ints, s.stopped)
		}
	}
	for key, want := range map[string]bool{"users": false, "coupons": false, "nope": false, "bad": false,
		"small": true, "counts": true, "dleft": true} {
		if _, ok := h.f.KindOf(key); ok != want {
			t.Errorf("key %q exists=%v, want %v", key, ok, want)
		}
	}
	if n, _ := h.f.Card("small"); n != 2 {
		t.Errorf("BF.CARD small = %d, want 2", n)
	}
	if c := h.f.Count(FamilyCBF, "counts", []byte("a")); c != 1 {
		t.Errorf("CBF.COUNT a = %d, want 1", c)
	}
	if h.f.AppliedIndex() != h.index {
		t.Errorf("applied index %d, want %d", h.f.AppliedIndex(), h.index)
	}
}

func nilIfEmpty(v []int64) []int64 {
	if len(v) == 0 {
		return nil
	}
	return v
}

// TestCuckooFullAndMaxExpansions: a full non-growing filter refuses single adds
// and answers -1 per item in a multi add; a growing one stops at 32 sub-filters.
func TestCuckooFullAndMaxExpansions(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyCF, "fixed", cfSpec(4, 1, 0)))
	var sawFull bool
	for i := 0; i < 64 && !sawFull; i++ {
		r := h.apply(add(FamilyCF, "fixed", fmt.Sprint("item-", i)))
		sawFull = errors.Is(r.Err, ErrFull)
	}
	if !sawFull {
		t.Fatal("a 4-slot cuckoo filter never reported full")
	}
	before := h.f.List()[0].Items
	r := h.ok(add(FamilyCF, "fixed", "m1", "m2"))
	if !reflect.DeepEqual(r.Ints, []int64{-1, -1}) {
		t.Errorf("multi add to a full filter: %v, want [-1 -1]", r.Ints)
	}
	if after := h.f.List()[0].Items; after != before {
		t.Errorf("failed adds changed the item count from %d to %d", before, after)
	}

	h.ok(reserve(FamilyCF, "grows", cfSpec(2, 1, 1)))
	var last *Result
	for i := 0; i < 10000; i++ {
		if last = h.apply(add(FamilyCF, "grows", fmt.Sprint("g-", i))); last.Err != nil {
			break
		}
	}
	if !errors.Is(last.Err, ErrMaxExpansions) {
		t.Fatalf("growing filter ended with %v, want ErrMaxExpansions", last.Err)
	}
	in, _ := h.f.Info(FamilyCF, "grows")
	if in.Filters != filters.MaxCuckooFilters {
		t.Errorf("%d sub-filters, want %d", in.Filters, filters.MaxCuckooFilters)
	}

	// As RedisBloom: once a filter has its most sub-filters every add is
	// refused before it touches the filter, room in the newest or not, and a
	// multi-item add fails whole instead of answering per item.
	h.ok(reserve(FamilyCF, "room", cfSpec(64, 4, 1)))
	for i := 0; ; i++ {
		h.ok(add(FamilyCF, "room", fmt.Sprint("r-", i)))
		if in, _ := h.f.Info(FamilyCF, "room"); in.Filters == filters.MaxCuckooFilters {
			break
		}
	}
	full, _ := h.f.Info(FamilyCF, "room")
	if full.Items >= full.Capacity {
		t.Fatalf("the newest sub-filter is full (%d of %d): the test needs one with room", full.Items, full.Capacity)
	}
	multi := add(FamilyCF, "room", "x", "y")
	multi.Multi = true
	for _, c := range []*Command{add(FamilyCF, "room", "late"), multi} {
		if r := h.apply(c); !errors.Is(r.Err, ErrMaxExpansions) || r.Ints != nil {
			t.Errorf("add to a filter of %d sub-filters: %+v, want ErrMaxExpansions", full.Filters, r)
		}
	}
	if after, _ := h.f.Info(FamilyCF, "room"); after.Items != full.Items {
		t.Errorf("refused adds changed the item count from %d to %d", full.Items, after.Items)
	}
}

// TestMemoryAccounting: MemoryBytes follows creation, growth and deletion.
func TestMemoryAccounting(t *testing.T) {
	h := newHarness(t)
	want, err := EstimateBytes(bfSpec(100, 0.01, 2))
	if err != nil {
		t.Fatal(err)
	}
	h.ok(reserve(FamilyBF, "a", bfSpec(100, 0.01, 2)))
	// The key costs something besides its filter's arrays, and admission
	// estimates it as KeyBytes.
	keyCost := h.f.MemoryBytes() - want
	if keyCost == 0 || keyCost > KeyBytes("a") {
		t.Fatalf("memory after reserve %d, EstimateBytes %d: the key counted %d, KeyBytes %d", h.f.MemoryBytes(), want, keyCost, KeyBytes("a"))
	}
	for i := 0; i < 1000; i++ {
		h.ok(add(FamilyBF, "a", fmt.Sprint(i)))
	}
	in, _ := h.f.Info(FamilyBF, "a")
	if in.Filters < 2 || h.f.MemoryBytes() != in.Size+keyCost || in.Size <= want {
		t.Fatalf("after growth: %d sub-filters, memory %d, size %d", in.Filters, h.f.MemoryBytes(), in.Size)
	}
	h.ok(add(FamilyCF, "b", "x"))
	h.ok(&Command{Op: OpDelKeys, Keys: []string{"a", "b"}})
	if h.f.MemoryBytes() != 0 || h.f.Len() != 0 {
		t.Fatalf("after DEL: memory %d, %d filters", h.f.MemoryBytes(), h.f.Len())
	}
	if _, err := EstimateBytes(Spec{Kind: 99}); !errors.Is(err, ErrBadSpec) {
		t.Errorf("EstimateBytes of an unknown kind: %v", err)
	}
}

// TestBatchEntry: a batch applies its commands in order with one result each.
func TestBatchEntry(t *testing.T) {
	f := New(Options{})
	cs := []*Command{add(FamilyCF, "k", "a"), del(FamilyCF, "k", "a"), del(FamilyCF, "k", "a"),
		reserve(FamilyCF, "k", cfSpec(100, 2, 1))}
	out := f.ApplyBatch([]*raft.Log{
		{Index: 1, Type: raft.LogConfiguration, Data: []byte("not ours")},
		{Index: 2, Type: raft.LogCommand, Data: EncodeBatch(cs)},
		{Index: 3, Type: raft.LogCommand, Data: []byte{byte(IgnoreUnknownFlag | 0x21), CodecVersion + 1}},
		{Index: 4, Type: raft.LogCommand, Data: EncodeNoop(CodecVersion)},
	})
	if out[0] != nil || out[2] != nil || out[3] != nil {
		t.Errorf("non-command responses: %v %v %v", out[0], out[2], out[3])
	}
	rs, ok := out[1].([]*Result)
	if !ok || len(rs) != 4 {
		t.Fatalf("batch response %T %v", out[1], out[1])
	}
	if rs[0].Ints[0] != 1 || rs[1].Ints[0] != 1 || rs[2].Ints[0] != 0 || rs[3].Err != ErrExists {
		t.Errorf("batch results %+v %+v %+v %+v", rs[0], rs[1], rs[2], rs[3])
	}
	if f.AppliedIndex() != 4 {
		t.Errorf("applied index %d, want 4", f.AppliedIndex())
	}
}

// TestCorruptEntryHalts: an entry that cannot be read (here one flipped bit) is
// neither applied nor skipped: the state machine stops before it, says where,
// applies nothing after it and takes no snapshot that would claim it did.
func TestCorruptEntryHalts(t *testing.T) {
	f := New(Options{})
	bad := EncodeCommand(add(FamilyBF, "k", "b"))
	bad[len(bad)/2] ^= 0x04
	out := f.ApplyBatch([]*raft.Log{
		{Index: 1, Type: raft.LogCommand, Data: EncodeCommand(add(FamilyBF, "k", "a"))},
		{Index: 2, Type: raft.LogCommand, Data: bad},
		{Index: 3, Type: raft.LogCommand, Data: EncodeCommand(add(FamilyBF, "k", "c"))},
	})
	if r, ok := out[0].(*Result); !ok || r.Err != nil {
		t.Fatalf("entry 1: %v", out[0])
	}
	for i := 1; i < 3; i++ {
		h, ok := out[i].(*Halt)
		if !ok || h.Index != 2 || !errors.Is(h, ErrChecksum) {
			t.Fatalf("entry %d: %v, want the halt at index 2", i+1, out[i])
		}
	}
	if got := f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: EncodeCommand(add(FamilyBF, "k", "d"))}); got != f.Halted() {
		t.Fatalf("entry after the halt: %v", got)
	}
	if f.AppliedIndex() != 1 {
		t.Fatalf("applied index %d, want 1", f.AppliedIndex())
	}
	got := f.Exists(FamilyBF, "k", [][]byte{[]byte("a"), []byte("c"), []byte("d")})
	if !got[0] || got[1] || got[2] {
		t.Fatalf("after the halt: a, c, d present %v, want only a", got)
	}
	if h := f.Halted(); h == nil || h.Index != 2 || !strings.Contains(h.Error(), "corrupt log entry at index 2") {
		t.Fatalf("Halted: %v", h)
	}
	select {
	case <-f.HaltedCh():
	default:
		t.Fatal("HaltedCh not closed")
	}
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a halted state machine took a snapshot")
	}
}

// TestLoadChunkCopiesFilter: SCANDUMP of one key, LOADCHUNK into another, gives
// a filter with identical contents; bad chunks change nothing.
func TestLoadChunkCopiesFilter(t *testing.T) {
	for _, tc := range []struct {
		fam  Family
		spec Spec
	}{{FamilyBF, bfSpec(50000, 0.01, 2)}, {FamilyCF, cfSpec(200000, 4, 2)}} {
		h := newHarness(t)
		h.ok(reserve(tc.fam, "src", tc.spec))
		for i := 0; i < 60000; i++ {
			h.ok(add(tc.fam, "src", fmt.Sprint("item-", i)))
		}
		chunks := 0
		for it := int64(0); ; chunks++ {
			next, data, err := h.f.ScanDump(tc.fam, "src", it)
			if err != nil {
				t.Fatal(err)
			}
			if next == 0 {
				break
			}
			load := &Command{Op: OpLoadChunk, Family: tc.fam, Key: "dst", Iter: next, Data: data}
			if chunks > 0 {
				bad := *load
				bad.Data = append([]byte{data[0] ^ 1}, data[1:]...)
				if r := h.apply(&bad); !errors.Is(r.Err, ErrBadData) {
					t.Fatalf("corrupt chunk: %v", r.Err)
				}
				wrong := *load
				wrong.Iter += 8
				if r := h.apply(&wrong); !errors.Is(r.Err, ErrBadPosition) && !errors.Is(r.Err, ErrBadData) {
					t.Fatalf("misplaced chunk: %v", r.Err)
				}
			}
			h.ok(load)
			it = next
		}
		if chunks < 2 {
			t.Fatalf("%d chunks", chunks)
		}
		var a, b []byte
		_ = h.f.read(tc.fam, "src", func(f filters.Filter) { a = encodeFilter(t, f) })
		_ = h.f.read(tc.fam, "dst", func(f filters.Filter) { b = encodeFilter(t, f) })
		if string(a) != string(b) {
			t.Errorf("family %d: loaded copy differs from its source", tc.fam)
		}
		// RedisBloom takes iterator 1 on an existing Bloom key for a chunk (bad
		// data), on a cuckoo key for a header (the key exists); a cuckoo header
		// of the wrong length is no header at all.
		wantExisting, wantJunk := ErrBadData, ErrBadData
		if tc.fam == FamilyCF {
			wantExisting, wantJunk = ErrExists, ErrBadHeader
		}
		if r := h.apply(&Command{Op: OpLoadChunk, Family: tc.fam, Key: "dst", Iter: 1, Data: []byte("x")}); !errors.Is(r.Err, wantExisting) {
			t.Errorf("header onto an existing key: %v, want %v", r.Err, wantExisting)
		}
		if r := h.apply(&Command{Op: OpLoadChunk, Family: tc.fam, Key: "new", Iter: 1, Data: []byte("x")}); !errors.Is(r.Err, wantJunk) {
			t.Errorf("junk header: %v, want %v", r.Err, wantJunk)
		}
		if r := h.apply(&Command{Op: OpLoadChunk, Family: tc.fam, Key: "absent", Iter: 9, Data: []byte("x")}); !errors.Is(r.Err, ErrNotFound) {
			t.Errorf("chunk for a missing key: %v", r.Err)
		}
	}
}

// TestScanVisitsEveryKey: a full SCAN returns every key once when nothing
// changes, and every key present throughout when keys come and go meanwhile.
func TestScanVisitsEveryKey(t *testing.T) {
	h := newHarness(t)
	const n = 500
	for i := 0; i < n; i++ {
		h.ok(add(FamilyBF, fmt.Sprint("key-", i), "x"))
	}
	seen := map[string]int{}
	cursor, calls := uint64(0), 0
	for {
		next, keys := h.f.Scan(cursor, 7, nil)
		calls++
		for _, k := range keys {
			seen[k]++
		}
		// Churn: delete and create keys outside the stable set.
		h.ok(add(FamilyCF, fmt.Sprint("churn-", calls), "y"))
		h.ok(&Command{Op: OpDelKeys, Keys: []string{fmt.Sprint("churn-", calls-1)}})
		if next == 0 {
			break
		}
		if next <= cursor && cursor != 0 {
			t.Fatalf("cursor went from %d to %d", cursor, next)
		}
		cursor = next
	}
	for i := 0; i < n; i++ {
		if k := fmt.Sprint("key-", i); seen[k] != 1 {
			t.Fatalf("%s seen %d times", k, seen[k])
		}
	}
	if calls < n/7 {
		t.Errorf("%d calls for %d keys at COUNT 7", calls, n)
	}
	_, keys := h.f.Scan(0, 1<<20, func(key string, k filters.Kind) bool { return k == filters.KindCuckoo })
	if len(keys) != 1 {
		t.Errorf("TYPE filter found %v", keys)
	}
}

// TestQueriesOnMissingAndWrongKeys follows PROTOCOL.md's rules for reads.
func TestQueriesOnMissingAndWrongKeys(t *testing.T) {
	h := newHarness(t)
	h.ok(add(FamilyCF, "cf", "a"))
	if h.exists(FamilyBF, "cf", "a") || h.exists(FamilyCF, "missing", "a") || !h.exists(FamilyCF, "cf", "a") {
		t.Error("EXISTS across kinds or on a missing key")
	}
	if h.f.Count(FamilyCBF, "cf", []byte("a")) != 0 || h.f.Count(FamilyCF, "cf", []byte("a")) != 1 {
		t.Error("COUNT across kinds")
	}
	if n, err := h.f.Card("missing"); n != 0 || err != nil {
		t.Errorf("CARD missing: %d %v", n, err)
	}
	if _, err := h.f.Card("cf"); !errors.Is(err, ErrWrongType) {
		t.Errorf("CARD on cuckoo: %v", err)
	}
	if _, err := h.f.Info(FamilyBF, "missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("INFO missing: %v", err)
	}
	if _, err := h.f.Info(FamilyBF, "cf"); !errors.Is(err, ErrWrongType) {
		t.Errorf("INFO wrong kind: %v", err)
	}
	if next, data, err := h.f.ScanDump(FamilyCF, "cf", 1<<40); err != nil || next != 0 || data != nil {
		t.Errorf("SCANDUMP past the end: %d, %d bytes, %v", next, len(data), err)
	}
	in, err := h.f.Info(FamilyCF, "cf")
	if err != nil || in.Items != 1 || in.BucketSize != 2 || in.MaxIter != 20 || in.Expansion != 1 || in.Buckets == 0 {
		t.Errorf("CF.INFO %+v %v", in, err)
	}
	if l := h.f.List(); len(l) != 1 || l[0].Key != "cf" || l[0].Kind != filters.KindCuckoo {
		t.Errorf("List %+v", l)
	}
}

// TestWaitApplied returns when the index is reached and honours its context.
func TestWaitApplied(t *testing.T) {
	h := newHarness(t)
	done := make(chan error, 1)
	go func() { done <- h.f.WaitApplied(context.Background(), 3) }()
	for i := 0; i < 3; i++ {
		select {
		case err := <-done:
			t.Fatalf("returned at index %d: %v", h.index, err)
		case <-time.After(5 * time.Millisecond):
		}
		h.ok(add(FamilyBF, "k", fmt.Sprint(i)))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := h.f.WaitApplied(ctx, 100); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied past the log: %v", err)
	}
}

// TestReadsDuringApply: readers on other goroutines see either the old or the
// new state of a filter, never a torn one, and never a false negative for an
// item added before they started (run with -race).
func TestReadsDuringApply(t *testing.T) {
	h := newHarness(t)
	h.ok(add(FamilyCF, "cf", "anchor"))
	h.ok(add(FamilyBF, "bf", "anchor"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures sync.Map
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if !h.exists(FamilyCF, "cf", "anchor") || !h.exists(FamilyBF, "bf", "anchor") {
					failures.Store("anchor", true)
				}
				h.f.List()
				h.f.Scan(0, 10, nil)
				h.f.ScanDump(FamilyBF, "bf", 0)
			}
		}()
	}
	for i := 0; i < 3000; i++ {
		h.ok(add(FamilyCF, "cf", fmt.Sprint(i)))
		h.ok(add(FamilyBF, "bf", fmt.Sprint(i)))
		if i%500 == 0 {
			s, _ := h.f.Snapshot()
			s.Release()
		}
	}
	close(stop)
	wg.Wait()
	if _, bad := failures.Load("anchor"); bad {
		t.Fatal("a reader missed an item added before it started")
	}
}

// TestGrowthBytes: the memory an add could add, for the leader's admission.
func TestGrowthBytes(t *testing.T) {
	h := newHarness(t)
	h.ok(reserve(FamilyBF, "bf", bfSpec(100, 0.01, 4)))
	next, err := EstimateBytes(bfSpec(400, 0.0025, 4))
	if err != nil {
		t.Fatal(err)
	}
	if g := h.f.GrowthBytes("bf", 100); g != 0 {
		t.Errorf("100 items into room for 100: %d bytes", g)
	}
	if g := h.f.GrowthBytes("bf", 101); g == 0 || g > next {
		t.Errorf("101 items into room for 100: %d bytes, want about %d", g, next)
	}
	h.ok(reserve(FamilyBF, "fixed", bfSpec(100, 0.01, 0)))
	h.ok(reserve(FamilyCF, "cf", cfSpec(1000, 2, 2)))
	if g := h.f.GrowthBytes("fixed", 1000); g != 0 {
		t.Errorf("a non-scaling filter grows by %d", g)
	}
	if g := h.f.GrowthBytes("cf", 100); g != 0 {
		t.Errorf("100 items into a cuckoo filter of 1000 slots: %d bytes", g)
	}
	if g := h.f.GrowthBytes("cf", 600); g == 0 {
		t.Error("600 items into a cuckoo filter of 1000 slots cannot grow it")
	}
	if g := h.f.GrowthBytes("missing", 10); g != 0 {
		t.Errorf("missing key: %d", g)
	}
}
