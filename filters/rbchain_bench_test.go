package filters

import "testing"

// RBChain's adds and lookups, for a chain of 1M items at 1% in one link (sized
// for them) and grown from 1/16 of them.
func benchRBChain(b *testing.B, capacity uint64, op string) {
	const n = 1 << 20
	c := mustNewRBChain(b, capacity, 0.01, 2, false)
	keys := newBFKeys(1)
	items := make([][]byte, n)
	absent := make([][]byte, n)
	for i := range items {
		items[i] = keys.next()
		absent[i] = keys.next()
	}
	if op != "add" {
		for _, it := range items {
			c.Add(it)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		switch op {
		case "add":
			if i%n == 0 && i > 0 {
				b.StopTimer()
				c = mustNewRBChain(b, capacity, 0.01, 2, false)
				b.StartTimer()
			}
			c.Add(items[i%n])
		case "present":
			c.Test(items[i%n])
		case "absent":
			c.Test(absent[i%n])
		}
	}
}

func BenchmarkRBChainAdd(b *testing.B)          { benchRBChain(b, 1<<20, "add") }
func BenchmarkRBChainTestPresent(b *testing.B)  { benchRBChain(b, 1<<20, "present") }
func BenchmarkRBChainTestAbsent(b *testing.B)   { benchRBChain(b, 1<<20, "absent") }
func BenchmarkRBChainGrownAdd(b *testing.B)     { benchRBChain(b, 1<<16, "add") }
func BenchmarkRBChainGrownPresent(b *testing.B) { benchRBChain(b, 1<<16, "present") }
func BenchmarkRBChainGrownAbsent(b *testing.B)  { benchRBChain(b, 1<<16, "absent") }
