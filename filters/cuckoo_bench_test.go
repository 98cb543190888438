package filters

import (
	"math/rand/v2"
	"testing"
)

// Benchmarks at 1M items, a table of 2 MB (b=4, f=16) or 1.2 MB (defaults), and
// at the default RedisBloom shape. Filters are sized so the items fill 95% (b=4)
// or 60% (b=2) of the slots, below where inserts start to fail.

var ckBenchShapes = []struct {
	name string
	cfg  CuckooConfig
	load float64
}{
	{"b4f16", CuckooConfig{BucketSize: 4, FingerprintBits: 16, MaxIterations: 500}, 0.95},
	{"b2f8", CuckooConfig{}, 0.6},
}

const ckBenchN = 1 << 20

func ckBenchKeys(seed uint64, n int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	keys := make([][]byte, n)
	buf := make([]byte, 16*n)
	for i := range keys {
		k := buf[16*i : 16*i+16 : 16*i+16]
		for j := range k {
			k[j] = byte(r.Uint32())
		}
		keys[i] = k
	}
	return keys
}

func ckBenchFilter(b *testing.B, cfg CuckooConfig, load float64, keys [][]byte) *Cuckoo {
	cfg.Capacity = uint64(float64(len(keys))/load) + 1
	c := mustNewCuckoo(b, cfg)
	for _, k := range keys {
		if err := c.Add(k); err != nil {
			b.Fatal(err)
		}
	}
	return c
}

func BenchmarkCuckooAdd(b *testing.B) {
	keys := ckBenchKeys(1, ckBenchN)
	for _, sh := range ckBenchShapes {
		b.Run(sh.name, func(b *testing.B) {
			cfg := sh.cfg
			cfg.Capacity = uint64(float64(ckBenchN)/sh.load) + 1
			var c *Cuckoo
			for i := 0; b.Loop(); i++ {
				// Each pass fills a fresh filter to its benchmark load.
				if i%ckBenchN == 0 {
					b.StopTimer()
					c = mustNewCuckoo(b, cfg)
					b.StartTimer()
				}
				if err := c.Add(keys[i%ckBenchN]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCuckooTestPresent(b *testing.B) {
	keys := ckBenchKeys(1, ckBenchN)
	for _, sh := range ckBenchShapes {
		b.Run(sh.name, func(b *testing.B) {
			c := ckBenchFilter(b, sh.cfg, sh.load, keys)
			for i := 0; b.Loop(); i++ {
				if !c.Test(keys[i%ckBenchN]) {
					b.Fatal("false negative")
				}
			}
		})
	}
}

func BenchmarkCuckooTestAbsent(b *testing.B) {
	keys, absent := ckBenchKeys(1, ckBenchN), ckBenchKeys(2, ckBenchN)
	for _, sh := range ckBenchShapes {
		b.Run(sh.name, func(b *testing.B) {
			c := ckBenchFilter(b, sh.cfg, sh.load, keys)
			for i := 0; b.Loop(); i++ {
				c.Test(absent[i%ckBenchN])
			}
		})
	}
}

func BenchmarkCuckooDelete(b *testing.B) {
	keys := ckBenchKeys(1, ckBenchN)
	for _, sh := range ckBenchShapes {
		b.Run(sh.name, func(b *testing.B) {
			c := ckBenchFilter(b, sh.cfg, sh.load, keys)
			for i := 0; b.Loop(); i++ {
				// Delete every key, then put them back untimed.
				if i%ckBenchN == 0 && i > 0 {
					b.StopTimer()
					c = ckBenchFilter(b, sh.cfg, sh.load, keys)
					b.StartTimer()
				}
				if !c.Delete(keys[i%ckBenchN]) {
					b.Fatal("delete of an added key failed")
				}
			}
		})
	}
}

// BenchmarkCuckooEncode encodes a filter of 1M items at b=4, f=16 (2.2 MB).
func BenchmarkCuckooEncode(b *testing.B) {
	c := ckBenchFilter(b, ckBenchShapes[0].cfg, ckBenchShapes[0].load, ckBenchKeys(1, ckBenchN))
	var w ckDiscard
	b.SetBytes(int64(c.MemoryBytes()))
	for b.Loop() {
		if _, err := c.WriteTo(&w); err != nil {
			b.Fatal(err)
		}
	}
}

type ckDiscard struct{}

func (ckDiscard) Write(p []byte) (int, error) { return len(p), nil }
