package filters

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestWindowCuckooSizing: the sizing function agrees with the filter, a full
// window at capacity fits, and bad parameters are refused.
func TestWindowCuckooSizing(t *testing.T) {
	cfg := WindowConfig{Capacity: 100_000, Window: 7_000_000}
	c := mustWindowCuckoo(t, cfg)
	size, err := WindowCuckooBytes(cfg)
	if err != nil || size != c.MemoryBytes() {
		t.Fatalf("WindowCuckooBytes = %d, %v; MemoryBytes %d", size, err, c.MemoryBytes())
	}
	// Eight generations of a seventh of the capacity: the most a window at
	// capacity holds, at the end of a generation.
	now := int64(1_700_000_000_000_000_000)
	for g := range 8 {
		for i := range 100_000 / 7 {
			c.Advance(now + int64(g)*1_000_000)
			if err := c.Add(fmt.Appendf(nil, "s-%d-%d", g, i)); err != nil {
				t.Fatalf("generation %d, item %d: %v at %d of %d slots", g, i, err, c.Items(), c.Slots())
			}
		}
	}
	t.Logf("%d items in %d slots (%.1f%%), %.2f bits per window item, estimated rate %.5f", c.Items(), c.Slots(),
		100*float64(c.Items())/float64(c.Slots()), float64(c.Slots()*16)/100_000, c.EstimatedFPP())
	for _, bad := range []WindowConfig{
		{Capacity: 0, Window: 1e9},
		{Capacity: 10},
		{Capacity: 10, Window: 1e9, MaxIterations: 70_000},
		{Capacity: 10, Window: 1e9, Last: 4},
		{Capacity: 1 << 53, Window: 1e9},
	} {
		if _, err := NewWindowCuckoo(bad); !errors.Is(err, ErrBadParam) {
			t.Errorf("NewWindowCuckoo(%+v): %v, want ErrBadParam", bad, err)
		}
		if _, err := WindowCuckooBytes(bad); !errors.Is(err, ErrBadParam) {
			t.Errorf("WindowCuckooBytes(%+v): %v, want ErrBadParam", bad, err)
		}
	}
}

// TestWindowCuckooCoupon: a coupon valid for the window is deleted once
// redeemed; a second copy added later outlives the first; copies expire with
// their generation, and a tag that comes round again does not bring one back.
func TestWindowCuckooCoupon(t *testing.T) {
	const period = 1_000_000
	c := mustWindowCuckoo(t, WindowConfig{Capacity: 100, Window: 7 * period})
	now := int64(1_700_000_000_000_000_000)
	c.Advance(now)
	coupon := []byte("C-1234")
	if err := c.Add(coupon); err != nil {
		t.Fatal(err)
	}
	c.Advance(now + 3*period)
	if err := c.Add(coupon); err != nil {
		t.Fatal(err)
	}
	if c.Count(coupon) != 2 || c.Items() != 2 {
		t.Fatalf("two copies: Count %d, Items %d", c.Count(coupon), c.Items())
	}
	// Redeeming takes the oldest copy; the newer lasts its own window.
	if !c.Delete(coupon) || c.Count(coupon) != 1 || c.Deleted() != 1 {
		t.Fatalf("after a delete: Count %d, Deleted %d", c.Count(coupon), c.Deleted())
	}
	c.Advance(now + 10*period)
	if c.Count(coupon) != 1 {
		t.Fatal("the newer copy expired with the older one's generation")
	}
	c.Advance(now + 11*period)
	if c.Test(coupon) || c.Items() != 0 || c.Delete(coupon) {
		t.Fatal("a copy outlived its generation's slack")
	}
	// Fill generation after generation without a jump: tags come round every
	// 16 generations, and the sweeps must clear every expired lane first.
	var old [][]byte
	for g := int64(12); g < 60; g++ {
		c.Advance(now + g*period)
		item := fmt.Appendf(nil, "gen-%d", g)
		if err := c.Add(item); err != nil {
			t.Fatal(err)
		}
		old = append(old, item)
		for i, it := range old {
			if alive := i >= len(old)-8; c.Test(it) != alive {
				t.Fatalf("generation %d: %q (generation %d) answers %v", g, it, 12+i, !alive)
			}
		}
	}
	if err := ltOracle(c); err != nil {
		t.Fatal(err)
	}
}

// TestWindowCuckooFullChangesNothing: an add that finds no room fails and
// leaves every byte as it was.
func TestWindowCuckooFullChangesNothing(t *testing.T) {
	c := mustWindowCuckoo(t, WindowConfig{Capacity: 50, Last: 1 << 40, MaxIterations: 100})
	full := 0
	for i := 0; full < 20; i++ {
		before := ctEncode(t, c)
		if err := c.Add(fmt.Appendf(nil, "f-%d", i)); errors.Is(err, ErrFull) {
			full++
			if !bytes.Equal(ctEncode(t, c), before) {
				t.Fatal("a refused add changed the filter")
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("first full at %d of %d slots", c.Items(), c.Slots())
	if c.Items() < c.Slots()*85/100 {
		t.Errorf("full at %d of %d slots", c.Items(), c.Slots())
	}
}

// TestWindowCuckooRefusesExpiredPayload: a dump whose expired lanes are older
// than their region's sweep allows (lanes no operation leaves) does not load,
// nor one whose live lanes differ from its count.
func TestWindowCuckooRefusesExpiredPayload(t *testing.T) {
	c := mustWindowCuckoo(t, WindowConfig{Capacity: 500, Window: 7_000_000})
	now := int64(1_700_000_000_000_000_000)
	c.Advance(now)
	for i := range 100 {
		_ = c.Add(fmt.Appendf(nil, "x-%d", i))
	}
	cur := c.clock.cur
	for name, lane := range map[string]uint64{
		"an expired lane its sweep left": (cur-15)%wcTagCycle<<wcFPBits | 7,
		"one live lane more":             cur%wcTagCycle<<wcFPBits | 7,
	} {
		_, err := ltReload(t, c, func(words []uint64) {
			for i := range words {
				if words[i]&0xFFFF == 0 {
					words[i] |= lane
					return
				}
			}
		})
		if !errors.Is(err, ErrBadChunk) {
			t.Errorf("%s: %v, want ErrBadChunk", name, err)
		}
	}
	if g, err := ltReload(t, c, func([]uint64) {}); err != nil || Loading(g) {
		t.Fatalf("the faithful dump: %v", err)
	}
}

// BenchmarkWindowCuckoo: add and lookup in a window at capacity.
func BenchmarkWindowCuckoo(b *testing.B) {
	const n = 10_000_000
	keys := benchWindowKeys(1 << 20)
	c := mustWindowCuckoo(b, WindowConfig{Capacity: n, Last: n})
	for i := range n {
		_ = c.Add(keys[i&(1<<20-1)])
	}
	b.Run("add", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			_ = c.Add(keys[i&(1<<20-1)])
		}
	})
	b.Run("test", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			c.Test(keys[i&(1<<20-1)])
		}
	})
}
