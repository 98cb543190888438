package filters

import (
	"bytes"
	"fmt"
	"testing"
)

// TestCuckooCompact: after deletes, Compact moves fingerprints into older
// sub-filters and drops the newest it empties; every item held stays held,
// counts of held items never drop, and two replicas compact alike.
func TestCuckooCompact(t *testing.T) {
	for _, cfg := range []CuckooConfig{
		{Capacity: 64, BucketSize: 2, FingerprintBits: 8, MaxIterations: 20, Expansion: 1},
		{Capacity: 64, BucketSize: 4, FingerprintBits: 16, MaxIterations: 20, Expansion: 2},
		{Capacity: 100, BucketSize: 3, FingerprintBits: 12, MaxIterations: 20, Expansion: 4},
	} {
		t.Run(fmt.Sprintf("b%d-f%d-e%d", cfg.BucketSize, cfg.FingerprintBits, cfg.Expansion), func(t *testing.T) {
			c, err := NewCuckoo(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var items []string
			for i := 0; c.Filters() < 5; i++ {
				it := fmt.Sprint("item-", i)
				if err := c.Add([]byte(it)); err != nil {
					t.Fatal(err)
				}
				items = append(items, it)
			}
			held := map[string]bool{}
			for i, it := range items {
				if i%4 == 0 {
					held[it] = true // a quarter stays
				} else if !c.Delete([]byte(it)) {
					t.Fatalf("delete of added %s found nothing", it)
				}
			}
			before := map[string]uint64{}
			for it := range held {
				before[it] = c.Count([]byte(it))
			}
			filters, mem, n := c.Filters(), c.MemoryBytes(), c.Items()
			twin := c.Clone()
			c.Compact()
			twin.Compact()
			if c.Items() != n || c.Deleted() != 0 {
				t.Errorf("items %d → %d, deleted %d after compacting", n, c.Items(), c.Deleted())
			}
			if c.Filters() >= filters || c.MemoryBytes() >= mem {
				t.Errorf("compacting three quarters away left %d of %d sub-filters, %d of %d bytes",
					c.Filters(), filters, c.MemoryBytes(), mem)
			}
			for it := range held {
				if got := c.Count([]byte(it)); !c.Test([]byte(it)) || got < before[it] {
					t.Fatalf("held %s: count %d, was %d", it, got, before[it])
				}
			}
			var a, b bytes.Buffer
			if _, err := c.WriteTo(&a); err != nil {
				t.Fatal(err)
			}
			if _, err := twin.WriteTo(&b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two copies compacted differently")
			}
			if _, err := Decode(bytes.NewReader(a.Bytes())); err != nil {
				t.Fatalf("a compacted filter's encoding does not decode: %v", err)
			}
			// Every held item can still be deleted, once.
			for it := range held {
				if !c.Delete([]byte(it)) {
					t.Fatalf("held %s could not be deleted after compacting", it)
				}
			}
			if c.Items() != 0 {
				t.Errorf("%d items left after deleting every held one", c.Items())
			}
		})
	}
}
