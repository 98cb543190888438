package fsm

import (
	"fmt"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// TestEveryKindHasARow: each kind's row is complete and agrees with the
// filters it builds, so a new kind is a row and nothing else.
func TestEveryKindHasARow(t *testing.T) {
	specs := map[filters.Kind]Spec{
		filters.KindBloom:    {Kind: filters.KindBloom, Capacity: 100, ErrorRate: 0.01},
		filters.KindScalable: {Kind: filters.KindScalable, Capacity: 100, ErrorRate: 0.01, Expansion: 2},
		filters.KindCounting: {Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4},
		filters.KindDLeft:    {Kind: filters.KindDLeft, Capacity: 100, ErrorRate: 0.01, CounterBits: 4},
		filters.KindCuckoo: {Kind: filters.KindCuckoo, Capacity: 100, BucketSize: 2, FingerprintBits: 8,
			MaxIterations: 20, Expansion: 1},
		filters.KindRBChain:      {Kind: filters.KindRBChain, Capacity: 100, ErrorRate: 0.01, Expansion: 2},
		filters.KindRBCuckoo:     {Kind: filters.KindRBCuckoo, Capacity: 100, BucketSize: 2, MaxIterations: 20, Expansion: 1},
		filters.KindWindowBloom:  wbSpec(100, 0.01, 7e9, 0),
		filters.KindWindowCuckoo: wcSpec(100, 7e9),
	}
	if len(specs) != len(kinds) {
		t.Fatalf("%d kinds have rows, the test knows %d", len(kinds), len(specs))
	}
	for k, d := range kinds {
		if d.family == FamilyNone || d.build == nil || d.bytes == nil || d.add == nil || d.info == nil {
			t.Errorf("kind %d: incomplete row", k)
			continue
		}
		s, ok := specs[k]
		if !ok {
			t.Errorf("kind %d: no spec in the test", k)
			continue
		}
		flt, err := newFilter(s)
		if err != nil {
			t.Errorf("kind %d: %v", k, err)
			continue
		}
		if flt.Kind() != k {
			t.Errorf("kind %d builds a filter of kind %d", k, flt.Kind())
		}
		if want, err := EstimateBytes(s); err != nil || want != flt.MemoryBytes() {
			t.Errorf("kind %d: estimate %d (%v), built %d bytes", k, want, err, flt.MemoryBytes())
		}
		item := []byte("item")
		if v, err, _ := adder(flt)(flt, item, false, false); err != nil || v != 1 {
			t.Errorf("kind %d: first add %d %v", k, v, err)
		}
		if !testItem(flt, item) {
			t.Errorf("kind %d: an added item tests absent", k)
		}
		if in := infoOf("k", flt); in.Items != 1 || in.Capacity == 0 {
			t.Errorf("kind %d: INFO says %d items, capacity %d", k, in.Items, in.Capacity)
		}
		_, counts := flt.(filters.Counter)
		_, deletes := flt.(filters.Deleter)
		if counts != deletes || counts != (d.family != FamilyBF) {
			t.Errorf("kind %d of family %v: counts %v, deletes %v", k, d.family, counts, deletes)
		}
		if deletes && (!flt.(filters.Deleter).Delete(item) || testItem(flt, item)) {
			t.Errorf("kind %d: delete did not remove the only copy", k)
		}
	}
}

// TestReportedSize pins BF.INFO's and CF.INFO's Size to RedisBloom's count:
// its structs per filter and per link or sub-filter, plus the arrays. For
// these Bloom filters our arrays happen to be as large as RedisBloom's, so
// the figures are RedisBloom's own (240 for BF.RESERVE 0.01 100, 104 for a
// non-scaling filter of capacity 3); a cuckoo filter's tables are ours.
func TestReportedSize(t *testing.T) {
	h := newHarness(t)
	h.ok(&Command{Op: OpReserve, Family: FamilyBF, Key: "b", Spec: Spec{Kind: filters.KindScalable, Capacity: 100, ErrorRate: 0.01, Expansion: 2}})
	h.ok(&Command{Op: OpReserve, Family: FamilyBF, Key: "n", Spec: Spec{Kind: filters.KindScalable, Capacity: 3, ErrorRate: 0.01, NonScaling: true}})
	h.ok(&Command{Op: OpReserve, Family: FamilyCF, Key: "c", Spec: Spec{Kind: filters.KindCuckoo, Capacity: 1000, BucketSize: 2, FingerprintBits: 8, MaxIterations: 20, Expansion: 1}})
	for _, c := range []struct {
		fam  Family
		key  string
		want uint64
	}{{FamilyBF, "b", 240}, {FamilyBF, "n", 104}, {FamilyCF, "c", 40 + 16 + 1000}} {
		in, err := h.f.Info(c.fam, c.key)
		if err != nil || in.ReportedSize != c.want {
			t.Errorf("%s: Size %d, %v; want %d", c.key, in.ReportedSize, err, c.want)
		}
		if in.Size <= in.ReportedSize {
			t.Errorf("%s: the node's own count %d is not above the reported %d (page tables, the key)", c.key, in.Size, in.ReportedSize)
		}
	}
	// Growing a chain adds a link's struct and its array.
	for i := 0; i < 150; i++ {
		h.ok(&Command{Op: OpAdd, Family: FamilyBF, Key: "b", Items: [][]byte{[]byte(fmt.Sprint(i))}})
	}
	in, _ := h.f.Info(FamilyBF, "b")
	want := uint64(32)
	for _, l := range in.Links {
		want += 64 + l.Bytes
	}
	if len(in.Links) != 2 || in.ReportedSize != want {
		t.Errorf("after growth: %d links, Size %d, want %d", len(in.Links), in.ReportedSize, want)
	}
}
