package filters

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// TestPagesAllocatedOnWrite: a new array of 1 GiB takes its page table, not
// its words, until they are written; what is written reads back, the rest
// reads zero, and the counted bytes are the whole array's.
func TestPagesAllocatedOnWrite(t *testing.T) {
	const words = 1 << 27 // 1 GiB
	before := heapInUse()
	a := newPaged(words)
	if grew := heapInUse() - before; grew > 16<<20 {
		t.Fatalf("a new 1 GiB array took %d MB of heap", grew>>20)
	}
	a.set(12345, 7)
	a.set(words-1, 9)
	if grew := heapInUse() - before; grew > 16<<20 {
		t.Fatalf("two writes took %d MB of heap", grew>>20)
	}
	if a.at(12345) != 7 || a.at(words-1) != 9 || a.at(0) != 0 || a.at(words/2) != 0 {
		t.Fatal("reads do not follow the writes")
	}
	if a.bytes() != pagedBytes(words) || a.popcount() != 5 {
		t.Fatalf("bytes %d, popcount %d", a.bytes(), a.popcount())
	}
	for i, w := range zeroPage {
		if w != 0 {
			t.Fatalf("the shared zero page was written at %d", i)
		}
	}
	// A fork of a filter with unwritten pages shares them; a write to either copies.
	f := a.fork()
	f.set(1, 1)
	if a.at(1) != 0 || f.at(1) != 1 || f.at(12345) != 7 {
		t.Fatal("fork and origin are not independent")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(f)
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// growers are a filter of each kind that grows, small enough to grow after a
// few items, and how to add an item to it.
func growers(t *testing.T) map[string]struct {
	f   Budgeted
	add func(item []byte) error
} {
	t.Helper()
	s, err := NewScalable(4, 0.01, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := NewRBChain(4, 0.01, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := NewCuckoo(CuckooConfig{Capacity: 8, BucketSize: 1, MaxIterations: 1, Expansion: 4, FingerprintBits: 8})
	if err != nil {
		t.Fatal(err)
	}
	rbc, err := NewRBCuckoo(4, 1, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		f   Budgeted
		add func(item []byte) error
	}{
		"scalable": {s, func(it []byte) error { _, err := s.Add(it); return err }},
		"rbchain":  {rb, func(it []byte) error { _, err := rb.Add(it); return err }},
		"cuckoo":   {ck, func(it []byte) error { return ck.Add(it) }},
		"rbcuckoo": {rbc, func(it []byte) error { return rbc.Add(it) }},
	}
}

// TestGrowthBudget: with a budget, a filter grows while the next sub-filter
// fits in what is left, each growth taking exactly what MemoryBytes grows by,
// and refuses the growth that does not fit with ErrGrowthBudget, its memory
// unchanged; without one it grows as before.
func TestGrowthBudget(t *testing.T) {
	for name, g := range growers(t) {
		mem := func() uint64 { return g.f.(Filter).MemoryBytes() }
		start := mem()
		budget := uint64(0)
		g.f.SetGrowthBudget(0)
		refused := 0
		for i := range 2000 {
			before := mem()
			err := g.add([]byte(fmt.Sprint(name, i)))
			switch {
			case errors.Is(err, ErrGrowthBudget):
				if mem() != before {
					t.Fatalf("%s: a refused growth changed memory %d -> %d", name, before, mem())
				}
				refused++
				// Let exactly the next sub-filter in.
				next := g.f.(interface{ NextGrowthBytes() uint64 }).NextGrowthBytes()
				budget += next
				g.f.SetGrowthBudget(next)
				if err := g.add([]byte(fmt.Sprint(name, i))); err != nil {
					t.Fatalf("%s: with the next sub-filter's bytes: %v", name, err)
				}
				if got := mem() - before; got != next {
					t.Fatalf("%s: growth took %d, its budget was %d", name, got, next)
				}
				g.f.SetGrowthBudget(0)
			case err != nil && !errors.Is(err, ErrFull):
				t.Fatalf("%s: %v", name, err)
			}
			if refused >= 3 {
				break
			}
		}
		if refused < 3 {
			t.Fatalf("%s: grew past its budget, or never needed to (%d refusals)", name, refused)
		}
		if mem()-start != budget {
			t.Fatalf("%s: grew %d bytes on budgets of %d", name, mem()-start, budget)
		}
		g.f.ClearGrowthBudget()
		for i := range 200 {
			if err := g.add([]byte(fmt.Sprint(name, "free", i))); errors.Is(err, ErrGrowthBudget) {
				t.Fatalf("%s: refused without a budget", name)
			}
		}
	}
}
