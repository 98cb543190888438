package fsm

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/rookerydb/rookery/filters"
)

// TestMemoryCountsKeys: what --max-memory counts for many small filters in
// use (each has an item: a page no write has reached takes no memory yet) is
// within 20% of what they take on the heap; the keys' own overhead is most of
// it (before it was counted, 100,000 small filters counted a quarter of it).
func TestMemoryCountsKeys(t *testing.T) {
	for _, spec := range []Spec{
		{Kind: filters.KindScalable, Capacity: 100, ErrorRate: 0.01, Expansion: 2},
		{Kind: filters.KindBloom, Capacity: 100, ErrorRate: 0.01},
		cfSpec(100, 2, 1),
		{Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4},
	} {
		f := New(Options{})
		fam := familyOf(spec.Kind)
		before := heapInUse()
		const keys = 20000
		for i := 0; i < keys; i++ {
			key := "user:" + strconv.Itoa(i) + ":seen"
			r := f.ApplyCommand(uint64(2*i+1), reserve(fam, key, spec))
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if r := f.ApplyCommand(uint64(2*i+2), add(fam, key, "first")); r.Err != nil {
				t.Fatal(r.Err)
			}
		}
		grew := heapInUse() - before
		counted := f.MemoryBytes()
		if ratio := float64(counted) / float64(grew); ratio < 0.8 || ratio > 1.2 {
			t.Errorf("%v: counted %d bytes, the heap grew %d (%.2fx)", spec.Kind, counted, grew, ratio)
		}
		t.Logf("%v: counted %d bytes for %d keys, the heap grew %d", spec.Kind, counted, keys, grew)
		runtime.KeepAlive(f)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestKeyBytesCoversEveryKind: admission's estimate of a key's cost is not
// below what is counted once the filter exists, for every kind.
func TestKeyBytesCoversEveryKind(t *testing.T) {
	for _, spec := range []Spec{
		{Kind: filters.KindScalable, Capacity: 100, ErrorRate: 0.01, Expansion: 2},
		{Kind: filters.KindBloom, Capacity: 100, ErrorRate: 0.01},
		cfSpec(100, 2, 1),
		{Kind: filters.KindCounting, Capacity: 100, ErrorRate: 0.01, CounterBits: 4},
		{Kind: filters.KindDLeft, Capacity: 100, ErrorRate: 0.01, CounterBits: 4},
		wbSpec(100, 0.01, 7e9, 0),
		wcSpec(100, 7e9),
	} {
		f := New(Options{})
		if r := f.ApplyCommand(1, reserve(familyOf(spec.Kind), "some-key", spec)); r.Err != nil {
			t.Fatal(r.Err)
		}
		est, _ := EstimateBytes(spec)
		if got, limit := f.MemoryBytes(), est+KeyBytes("some-key"); got > limit {
			t.Errorf("%v: counted %d once created, admitted as %d", spec.Kind, got, limit)
		}
	}
}
