package filters

import (
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
