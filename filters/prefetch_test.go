package filters

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// benchItems returns n distinct 16-byte items.
func benchItems(n int, seed uint64) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		b := make([]byte, 16)
		binary.LittleEndian.PutUint64(b, seed)
		binary.LittleEndian.PutUint64(b[8:], uint64(i))
		items[i] = b
	}
	return items
}

// BenchmarkScalableAddBatch adds items to a filter far larger than the
// caches, in batches as the FSM applies BF.MADD, with and without a prefetch
// pass per PrefetchWindow items; one op is one item.
func BenchmarkScalableAddBatch(b *testing.B) {
	for _, pf := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pf), func(b *testing.B) {
			s, err := NewScalable(10_000_000, 0.01, 2, false)
			if err != nil {
				b.Fatal(err)
			}
			items := benchItems(b.N, 1)
			b.ResetTimer()
			for i := 0; i < len(items); i += PrefetchWindow {
				win := items[i:min(i+PrefetchWindow, len(items))]
				if pf {
					s.Prefetch(win)
				}
				for _, it := range win {
					if _, err := s.Add(it); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCuckooAddBatch is BenchmarkScalableAddBatch for a cuckoo filter
// with CF.RESERVE's defaults.
func BenchmarkCuckooAddBatch(b *testing.B) {
	for _, pf := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pf), func(b *testing.B) {
			c, err := NewCuckoo(CuckooConfig{Capacity: 12_000_000, BucketSize: 2, FingerprintBits: 8, MaxIterations: 20, Expansion: 1})
			if err != nil {
				b.Fatal(err)
			}
			items := benchItems(b.N, 1)
			b.ResetTimer()
			for i := 0; i < len(items); i += PrefetchWindow {
				win := items[i:min(i+PrefetchWindow, len(items))]
				if pf {
					c.Prefetch(win)
				}
				for _, it := range win {
					if err := c.Add(it); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestPrefetchChangesNothing: reading ahead leaves every kind that does it
// byte for byte as it was, the blocked and the classic Bloom layouts (error
// rate 1e-6 is classic), a scalable filter and a cuckoo filter of two
// sub-filters each, and a counting filter.
func TestPrefetchChangesNothing(t *testing.T) {
	blocked, _ := NewBloom(1000, 0.01)
	classic, _ := NewBloom(1000, 1e-6)
	if classic.blocks != 0 || blocked.blocks == 0 {
		t.Fatalf("layouts: classic %d blocks, blocked %d", classic.blocks, blocked.blocks)
	}
	scalable, _ := NewScalable(100, 0.01, 2, false)
	counting, _ := NewCounting(100, 0.01, 4)
	cuckoo, _ := NewCuckoo(CuckooConfig{Capacity: 100, BucketSize: 2, MaxIterations: 5, Expansion: 2})
	items := benchItems(300, 7)
	for _, it := range items[:200] {
		blocked.Add(it)
		classic.Add(it)
		if _, err := scalable.Add(it); err != nil {
			t.Fatal(err)
		}
		if err := cuckoo.Add(it); err != nil {
			t.Fatal(err)
		}
		counting.Add(it)
	}
	if len(scalable.filters) < 2 || len(cuckoo.subs) < 2 {
		t.Fatalf("want two sub-filters: scalable %d, cuckoo %d", len(scalable.filters), len(cuckoo.subs))
	}
	for _, f := range []interface {
		Filter
		Prefetcher
	}{blocked, classic, scalable, cuckoo, counting} {
		before := encoded(t, f)
		f.Prefetch(items)
		if !bytes.Equal(before, encoded(t, f)) {
			t.Errorf("%v: Prefetch changed the filter", f.Kind())
		}
	}
}

func encoded(t *testing.T, f Filter) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := f.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkCountingAddBatch is BenchmarkScalableAddBatch for a counting
// filter with CBF.RESERVE's defaults (4-bit counters, 1%).
func BenchmarkCountingAddBatch(b *testing.B) {
	for _, pf := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", pf), func(b *testing.B) {
			c, err := NewCounting(10_000_000, 0.01, 4)
			if err != nil {
				b.Fatal(err)
			}
			items := benchItems(b.N, 1)
			b.ResetTimer()
			for i := 0; i < len(items); i += PrefetchWindow {
				win := items[i:min(i+PrefetchWindow, len(items))]
				if pf {
					c.Prefetch(win)
				}
				for _, it := range win {
					c.Add(it)
				}
			}
		})
	}
}
