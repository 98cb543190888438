package filters

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

var updateWindowed = flag.Bool("update-windowed", false, "rewrite testdata/golden/windowed.hex")

// TestWindowBloomSizing: the sizing function agrees with the filter, the
// memory is what DESIGN.md states against a plain Bloom filter, and every bad
// parameter is refused with ErrBadParam.
func TestWindowBloomSizing(t *testing.T) {
	for _, c := range []struct {
		p        float64
		maxRatio float64 // bits per window item against a plain Bloom filter's
	}{{0.01, 1.8}, {0.001, 1.65}, {1e-4, 1.6}, {1e-6, 2.0}} {
		cfg := WindowConfig{Capacity: 1_000_000, ErrorRate: c.p, Window: 7e9}
		w := mustWindowBloom(t, cfg)
		size, err := WindowBloomBytes(cfg)
		if err != nil || size != w.MemoryBytes() {
			t.Fatalf("WindowBloomBytes = %d, %v; MemoryBytes %d", size, err, w.MemoryBytes())
		}
		b := mustNewBloom(t, cfg.Capacity, c.p)
		ratio := float64(w.Superblocks()*wbSuperWords*64) / float64(b.Bits())
		t.Logf("p=%v: k=%d, %.2f bits per item, %.3f times a plain Bloom filter's", c.p, w.Hashes(),
			float64(w.Superblocks()*wbSuperWords*64)/float64(cfg.Capacity), ratio)
		if ratio > c.maxRatio || ratio < 1.3 {
			t.Errorf("p=%v: %.3f times a plain Bloom filter's bits", c.p, ratio)
		}
	}
	bad := []WindowConfig{
		{Capacity: 0, ErrorRate: 0.01, Window: 1e9},
		{Capacity: 1 << 60, ErrorRate: 0.01, Window: 1e9},
		{Capacity: 10, ErrorRate: 1e-7, Window: 1e9},
		{Capacity: 10, ErrorRate: 1, Window: 1e9},
		{Capacity: 10, ErrorRate: 0.01},
		{Capacity: 10, ErrorRate: 0.01, Window: 1e9, Last: 10},
		{Capacity: 10, ErrorRate: 0.01, Window: 6},
		{Capacity: 10, ErrorRate: 0.01, Window: -1},
		{Capacity: 10, ErrorRate: 0.01, Window: 1<<61 + 1},
		{Capacity: 10, ErrorRate: 0.01, Last: 1<<53 + 1},
		{Capacity: 1 << 53, ErrorRate: 1e-6, Window: 1e9}, // too large
	}
	for _, cfg := range bad {
		if _, err := NewWindowBloom(cfg); !errors.Is(err, ErrBadParam) {
			t.Errorf("NewWindowBloom(%+v): %v, want ErrBadParam", cfg, err)
		}
		if _, err := WindowBloomBytes(cfg); !errors.Is(err, ErrBadParam) {
			t.Errorf("WindowBloomBytes(%+v): %v, want ErrBadParam", cfg, err)
		}
	}
	var se *SizeError
	if _, err := WindowBloomBytes(bad[len(bad)-1]); !errors.As(err, &se) {
		t.Errorf("a filter too large: %v, want a SizeError", err)
	}
}

// TestWindowSlack: the slack INFO reports is what the filter does. A time
// window of W holds an item for at least W and answers absent from W+Slack
// on; a count window likewise in insertions.
func TestWindowSlack(t *testing.T) {
	const window = 7_000_003 // not a multiple of 7: the period rounds up
	w := mustWindowBloom(t, WindowConfig{Capacity: 100, ErrorRate: 1e-6, Window: window})
	in := w.Window()
	if !in.ByTime || in.Window != window || in.Generations != 8 || in.Slack != 8*1_000_001-window {
		t.Fatalf("Window() = %+v", in)
	}
	for _, at := range []int64{5_000_000_000, 5_000_999_999, 5_000_500_000} {
		f := mustWindowBloom(t, WindowConfig{Capacity: 100, ErrorRate: 1e-6, Window: window})
		f.Advance(at)
		f.Add([]byte("x"))
		f.Advance(at + window)
		if !f.Test([]byte("x")) {
			t.Fatalf("added at %d: absent %d later", at, window)
		}
		retire, ok := f.NextRetire()
		if !ok || retire > at+window+int64(in.Slack) || retire <= at+window {
			t.Fatalf("added at %d: retires at %d, %v; window ends %d, slack %d", at, retire, ok, at+window, in.Slack)
		}
		f.Advance(retire - 1)
		if !f.Test([]byte("x")) {
			t.Fatal("absent before its generation retired")
		}
		f.Advance(retire)
		if f.Test([]byte("x")) || f.Count() != 0 {
			t.Fatal("present once its generation retired")
		}
		if _, ok := f.NextRetire(); ok {
			t.Fatal("an empty window still has a generation to retire")
		}
	}
	c := mustWindowBloom(t, WindowConfig{Capacity: 100, ErrorRate: 1e-6, Last: 100})
	slack := c.Window().Slack // periods of 15: held among the last 100 at least, 119 at most
	if slack != 19 {
		t.Fatalf("count window slack %d", slack)
	}
	c.Add([]byte("x"))
	for i := 1; ; i++ {
		c.Add(fmt.Appendf(nil, "y%d", i))
		if !c.Test([]byte("x")) {
			if i < 100 || i > 100+int(slack) {
				t.Fatalf("absent after %d later insertions; window 100, slack %d", i, slack)
			}
			break
		}
	}
}

// TestWindowAdvanceWritesNothing: retiring generations writes no page of a
// windowed Bloom filter, so a snapshot streaming it copies nothing.
func TestWindowAdvanceWritesNothing(t *testing.T) {
	w := mustWindowBloom(t, WindowConfig{Capacity: 10_000, ErrorRate: 0.01, Window: 7e9})
	for i := range 5000 {
		w.Advance(int64(i) * 1e6)
		w.Add(fmt.Appendf(nil, "a%d", i))
	}
	g := w.Fork()
	g.Advance(1e12)
	if shared, total := ktSharedPages(w, g); shared != total || g.Count() != 0 {
		t.Fatalf("after retiring every generation the fork shares %d of %d pages, counts %d", shared, total, g.Count())
	}
}

// wtOps applies n random operations to f (adds of a small universe, moves in
// time, deletes for a cuckoo filter), the same for the same seed.
func wtOps(f Filter, seed uint64, n int) {
	rng := rand.New(rand.NewPCG(seed, 7))
	now := int64(1_700_000_000_000_000_000)
	for range n {
		item := fmt.Appendf(nil, "det-%d", rng.IntN(3000))
		if rng.IntN(40) == 0 {
			now += rng.Int64N(3_000_000)
		}
		switch v := f.(type) {
		case *WindowBloom:
			v.Advance(now)
			v.Add(item)
		case *WindowCuckoo:
			v.Advance(now)
			if rng.IntN(3) == 0 {
				v.Delete(item)
			} else {
				_ = v.Add(item)
			}
		}
	}
}

// TestWindowDeterminism: the same operations on two filters give the same
// bytes, and a filter decoded in the middle (a snapshot taken mid-window)
// goes on exactly as the one it was taken from.
func TestWindowDeterminism(t *testing.T) {
	for _, mk := range []func() Filter{
		func() Filter {
			return mustWindowBloom(t, WindowConfig{Capacity: 2000, ErrorRate: 0.01, Window: 7_000_000})
		},
		func() Filter { return mustWindowBloom(t, WindowConfig{Capacity: 2000, ErrorRate: 0.001, Last: 3000}) },
		func() Filter { return mustWindowCuckoo(t, WindowConfig{Capacity: 2000, Window: 7_000_000}) },
	} {
		a, b := mk(), mk()
		wtOps(a, 1, 20_000)
		wtOps(b, 1, 20_000)
		if !bytes.Equal(ctEncode(t, a), ctEncode(t, b)) {
			t.Fatalf("%v: the same operations gave different encodings", a.Kind())
		}
		restored, err := Decode(bytes.NewReader(ctEncode(t, a)))
		if err != nil {
			t.Fatal(err)
		}
		wtOps(a, 2, 20_000)
		wtOps(restored, 2, 20_000)
		if !bytes.Equal(ctEncode(t, a), ctEncode(t, restored)) {
			t.Fatalf("%v: a restored filter went on differently", a.Kind())
		}
	}
}

// TestWindowGolden pins the encodings of windowed filters after fixed
// operations: a changed layout, hash or sizing would make old snapshots
// answer differently.
func TestWindowGolden(t *testing.T) {
	var lines []string
	for _, f := range []Filter{
		mustWindowBloom(t, WindowConfig{Capacity: 50, ErrorRate: 0.01, Window: 7_000_000}),
		mustWindowBloom(t, WindowConfig{Capacity: 50, ErrorRate: 0.001, Last: 70}),
		mustWindowCuckoo(t, WindowConfig{Capacity: 50, Window: 7_000_000}),
	} {
		wtOps(f, 3, 400)
		lines = append(lines, bfHexLines(f.Kind().String(), ctEncode(t, f))...)
	}
	bfGolden(t, "windowed.hex", lines, *updateWindowed)
}

// FuzzDecodeWindowed feeds the decoders of both windowed kinds raw encodings
// and, through bfContainer, arbitrary params and payloads behind valid
// checksums: no panic, and a filter that decodes takes operations and
// re-encodes stably.
func FuzzDecodeWindowed(f *testing.F) {
	for _, flt := range []Filter{
		mustWindowBloom(f, WindowConfig{Capacity: 30, ErrorRate: 0.01, Window: 7_000_000}),
		mustWindowBloom(f, WindowConfig{Capacity: 30, ErrorRate: 0.1, Last: 40}),
		mustWindowCuckoo(f, WindowConfig{Capacity: 30, Window: 7_000_000}),
	} {
		wtOps(flt, 4, 100)
		enc := ctEncode(f, flt)
		pay := bfBytes(dtWords(flt))
		f.Add(enc, flt.params(), pay, uint8(flt.Kind()))
		f.Add(enc[:len(enc)/2], flt.params()[:5], pay[:16], uint8(flt.Kind()))
	}
	f.Fuzz(func(t *testing.T, raw, params, payload []byte, kind uint8) {
		k := KindWindowBloom
		if kind&1 != 0 {
			k = KindWindowCuckoo
		}
		for _, data := range [][]byte{raw, bfContainer(k, params, bfWords(payload))} {
			g, err := Decode(bytes.NewReader(data))
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
					t.Fatalf("Decode: %v", err)
				}
				continue
			}
			enc := ctEncode(t, g)
			wtOps(g, 5, 50)
			h, err := Decode(bytes.NewReader(enc))
			if err != nil || !bytes.Equal(ctEncode(t, h), enc) {
				t.Fatalf("re-encoding of a decoded %v: %v", g.Kind(), err)
			}
		}
	})
}

func benchWindowKeys(n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "bench-%d", i)
	}
	return keys
}

// BenchmarkWindowBloom: add and lookup of a 10M-item window at 1%, full, next
// to a plain Bloom filter of the same capacity (bench/filterbench reports
// both with rotating filters).
func BenchmarkWindowBloom(b *testing.B) {
	const n = 10_000_000
	keys := benchWindowKeys(1 << 20)
	w := mustWindowBloom(b, WindowConfig{Capacity: n, ErrorRate: 0.01, Last: n})
	for i := range n {
		w.Add(keys[i&(1<<20-1)])
	}
	b.Run("add", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			w.Add(keys[i&(1<<20-1)])
		}
	})
	b.Run("test", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			w.Test(keys[i&(1<<20-1)])
		}
	})
}
