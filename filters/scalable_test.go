package filters

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

var updateScalable = flag.Bool("update-scalable", false, "rewrite testdata/golden/scalable.hex")

func mustNewScalable(t testing.TB, capacity uint64, p float64, expansion uint32, nonScaling bool) *Scalable {
	t.Helper()
	s, err := NewScalable(capacity, p, expansion, nonScaling)
	if err != nil {
		t.Fatalf("NewScalable(%d, %v, %d, %v): %v", capacity, p, expansion, nonScaling, err)
	}
	return s
}

// TestScalableGrowth follows RedisBloom's rules item by item: the chain grows on
// the Add that finds the newest sub-filter holding its capacity of new items; the
// new sub-filter has expansion times the capacity and half the error rate; the
// first has half the requested rate.
func TestScalableGrowth(t *testing.T) {
	for _, expansion := range []uint32{1, 2, 3} {
		s := mustNewScalable(t, 100, 0.01, expansion, false)
		if bb, _ := ScalableBytes(100, 0.01, expansion, false); bb != s.MemoryBytes() {
			t.Fatalf("ScalableBytes %d, MemoryBytes %d", bb, s.MemoryBytes())
		}
		trues := uint64(0)
		for i := range uint64(2000) {
			newest := s.filters[len(s.filters)-1]
			full := newest.count >= newest.capacity
			filters, mem, growth := s.Filters(), s.MemoryBytes(), s.NextGrowthBytes()
			isNew, err := s.Add(bfItem(i))
			if err != nil {
				t.Fatalf("expansion %d, item %d: %v", expansion, i, err)
			}
			if isNew {
				trues++
			}
			grew := s.Filters() == filters+1
			if grew != (isNew && full) || s.Filters() > filters+1 {
				t.Fatalf("expansion %d, item %d: new %v, newest full %v, filters %d -> %d", expansion, i, isNew, full, filters, s.Filters())
			}
			if grew && s.MemoryBytes() != mem+growth {
				t.Fatalf("expansion %d: growth took %d bytes, NextGrowthBytes said %d", expansion, s.MemoryBytes()-mem, growth)
			}
		}
		if s.Count() != trues {
			t.Fatalf("expansion %d: Count %d, Adds that returned true %d", expansion, s.Count(), trues)
		}
		var capSum uint64
		for i, f := range s.filters {
			wantCap := uint64(100) * uint64(math.Pow(float64(expansion), float64(i)))
			wantRate := 0.005 * math.Pow(0.5, float64(i))
			if f.Capacity() != wantCap || f.ErrorRate() != wantRate {
				t.Fatalf("expansion %d: sub-filter %d has capacity %d, rate %v; want %d, %v", expansion, i, f.Capacity(), f.ErrorRate(), wantCap, wantRate)
			}
			if i < len(s.filters)-1 && f.Count() != f.Capacity() {
				t.Fatalf("expansion %d: sub-filter %d left behind with %d of %d items", expansion, i, f.Count(), f.Capacity())
			}
			capSum += wantCap
		}
		if s.Capacity() != capSum || s.Expansion() != expansion || s.NonScaling() || s.ErrorRate() != 0.01 {
			t.Fatalf("expansion %d: Capacity %d (want %d), Expansion %d, NonScaling %v, ErrorRate %v",
				expansion, s.Capacity(), capSum, s.Expansion(), s.NonScaling(), s.ErrorRate())
		}
		if s.Filters() < 3 {
			t.Fatalf("expansion %d: only %d sub-filters after 2000 items", expansion, s.Filters())
		}
	}
}

func TestScalableNonScaling(t *testing.T) {
	for _, s := range []*Scalable{mustNewScalable(t, 50, 0.01, 2, true), mustNewScalable(t, 50, 0.01, 0, false)} {
		if !s.NonScaling() || s.filters[0].ErrorRate() != 0.01 || s.NextGrowthBytes() != 0 {
			t.Fatalf("non-scaling: NonScaling %v, rate %v, NextGrowthBytes %d", s.NonScaling(), s.filters[0].ErrorRate(), s.NextGrowthBytes())
		}
		var i uint64
		for ; s.Count() < 50; i++ {
			if _, err := s.Add(bfItem(i)); err != nil {
				t.Fatalf("Add with %d of 50 items: %v", s.Count(), err)
			}
		}
		before := encodeOf(t, s)
		for j := range uint64(20) {
			isNew, err := s.Add(bfItem(i + j))
			if isNew || err != nil && !errors.Is(err, ErrFull) || err == nil && !s.Test(bfItem(i+j)) {
				t.Fatalf("Add to a full non-scaling filter: %v, %v", isNew, err)
			}
		}
		// An item already present is answered 0, not refused.
		if isNew, err := s.Add(bfItem(0)); isNew || err != nil {
			t.Fatalf("Add of a present item to a full filter: %v, %v", isNew, err)
		}
		if !bytes.Equal(before, encodeOf(t, s)) || s.Filters() != 1 || s.Count() != s.Capacity() {
			t.Fatal("a full non-scaling filter changed")
		}
	}
}

// TestScalableCannotGrow forges chains at each limit of growth: the Add that would
// grow them fails with ErrFull, changes nothing, and NextGrowthBytes says 0.
func TestScalableCannotGrow(t *testing.T) {
	huge := mustNewScalable(t, 100, 0.01, 32768, false)
	huge.filters[0].capacity = 1 << 40 // the next would hold 2^55 items
	tiny := mustNewScalable(t, 100, 0.01, 2, false)
	tiny.filters[0].rate = math.SmallestNonzeroFloat64
	big := mustNewScalable(t, 100, 0.01, 2, false)
	big.filters[0].capacity = 1 << 38 // needs more bits than an encoding holds
	long := mustNewScalable(t, 1, 0.25, 1, false)
	for long.Filters() < scalableMaxFilters {
		long.filters = append(long.filters, long.filters[0].Clone())
	}
	for name, s := range map[string]*Scalable{"capacity": huge, "rate": tiny, "size": big, "length": long} {
		for _, f := range s.filters {
			f.count = f.capacity
		}
		before := encodeOf(t, s)
		if _, err := s.Add([]byte("one more")); !errors.Is(err, ErrFull) {
			t.Errorf("%s: Add = %v, want ErrFull", name, err)
		}
		if s.NextGrowthBytes() != 0 || !bytes.Equal(before, encodeOf(t, s)) {
			t.Errorf("%s: NextGrowthBytes %d; changed %v", name, s.NextGrowthBytes(), !bytes.Equal(before, encodeOf(t, s)))
		}
	}
}

func TestScalableBadParams(t *testing.T) {
	for _, tc := range []struct {
		n         uint64
		p         float64
		expansion uint32
	}{
		{0, 0.01, 2}, {100, 0, 2}, {100, 1, 2}, {100, 1.5, 2}, {100, math.NaN(), 2},
		{100, 0.01, 32769}, {bloomMaxCapacity + 1, 0.01, 2},
	} {
		for _, nonScaling := range []bool{false, true} {
			if _, err := NewScalable(tc.n, tc.p, tc.expansion, nonScaling); !errors.Is(err, ErrBadParam) {
				t.Errorf("NewScalable(%d, %v, %d, %v): %v, want ErrBadParam", tc.n, tc.p, tc.expansion, nonScaling, err)
			}
			if _, err := ScalableBytes(tc.n, tc.p, tc.expansion, nonScaling); !errors.Is(err, ErrBadParam) {
				t.Errorf("ScalableBytes(%d, %v, %d, %v): %v, want ErrBadParam", tc.n, tc.p, tc.expansion, nonScaling, err)
			}
		}
	}
	for _, nonScaling := range []bool{false, true} {
		s := mustNewScalable(t, 1000, 0.01, 32768, nonScaling)
		if bb, err := ScalableBytes(1000, 0.01, 32768, nonScaling); err != nil || bb != s.MemoryBytes() {
			t.Errorf("ScalableBytes = %d, %v; MemoryBytes %d", bb, err, s.MemoryBytes())
		}
	}
}

// TestScalableModel runs random adds and lookups against scaling and non-scaling
// filters and an exact set: no false negatives, Add of a present item answers
// false, a refused Add (ErrFull) changes nothing, Count is the Adds that returned
// true.
func TestScalableModel(t *testing.T) {
	for _, tc := range []struct {
		n          uint64
		p          float64
		expansion  uint32
		nonScaling bool
	}{
		{10, 0.01, 2, false}, {7, 0.1, 1, false}, {40, 0.001, 4, false}, {200, 0.01, 2, true}, {3, 0.25, 0, false},
	} {
		t.Run(fmt.Sprintf("%d-%v-%d-%v", tc.n, tc.p, tc.expansion, tc.nonScaling), func(t *testing.T) {
			s := mustNewScalable(t, tc.n, tc.p, tc.expansion, tc.nonScaling)
			rng := rand.New(rand.NewPCG(tc.n, 11))
			present := map[uint64]bool{}
			trues, refused := uint64(0), 0
			for op := range 3000 {
				i := rng.Uint64N(1000)
				if rng.IntN(3) == 2 {
					if present[i] && !s.Test(bfItem(i)) {
						t.Fatalf("op %d: false negative for item %d", op, i)
					}
					continue
				}
				var before []byte
				if s.NonScaling() && s.Count() >= s.Capacity() {
					before = encodeOf(t, s)
				}
				isNew, err := s.Add(bfItem(i))
				switch {
				case err != nil:
					if !errors.Is(err, ErrFull) || present[i] || !bytes.Equal(before, encodeOf(t, s)) {
						t.Fatalf("op %d: Add(%d) = %v; present %v", op, i, err, present[i])
					}
					refused++
					continue
				case present[i] && isNew:
					t.Fatalf("op %d: Add of present item %d reported new", op, i)
				case isNew:
					trues++
				}
				present[i] = true
			}
			for i := range present {
				if !s.Test(bfItem(i)) {
					t.Fatalf("false negative for item %d at the end", i)
				}
			}
			if s.Count() != trues || s.NonScaling() != (refused > 0) {
				t.Fatalf("Count %d, Adds that returned true %d; %d refused", s.Count(), trues, refused)
			}
		})
	}
}

// TestScalableFalsePositiveRate grows filters to four full sub-filters (rates p/2,
// p/4, p/8, p/16: about 0.94p compound) and measures the rate on absent keys; a
// non-scaling filter of the same total capacity, full, should measure about p. The tolerance is the
// Bloom test's, for the same reasons: 2000 expected false positives (2.2%
// standard deviation) plus a few percent of sizing and layout variation, so at
// most 15% above p; below p/3 would mean the test measures nothing.
func TestScalableFalsePositiveRate(t *testing.T) {
	const tolerance = 0.15
	c0 := uint64(2000)
	if testing.Short() {
		c0 = 1000
	}
	for _, p := range []float64{0.1, 0.01, 0.001, 0.0001} {
		for _, nonScaling := range []bool{false, true} {
			s := mustNewScalable(t, c0, p, 2, false)
			keys := newBFKeys(uint64(1e6*p) + 17)
			if nonScaling {
				// Exactly its capacity of distinct keys. Adding until Count()
				// reaches Capacity() would measure more than p at p = 0.1: an
				// Add counts only if it set a bit, so the counted items are
				// those that set more bits than average (8% over p measured,
				// as with RedisBloom's own counting).
				s = mustNewScalable(t, 15*c0, p, 0, false)
				for range 15 * c0 {
					s.Add(keys.next())
				}
			}
			for !nonScaling && (s.Count() < s.Capacity() || s.Filters() < 4) {
				s.Add(keys.next())
			}
			trials := bfFPRTrials(p, 2000)
			absent := newBFKeys(4242)
			fp := 0
			for range trials {
				if s.Test(absent.next()) {
					fp++
				}
			}
			rate := float64(fp) / float64(trials)
			t.Logf("p=%v non-scaling %v, %d sub-filters, %d items: measured %.5g (%.3f p)", p, nonScaling, s.Filters(), s.Count(), rate, rate/p)
			if rate > p*(1+tolerance) || rate < p/3 {
				t.Errorf("p=%v non-scaling %v: measured false-positive rate %v outside [p/3, p*(1+%v)]", p, nonScaling, rate, tolerance)
			}
		}
	}
}

func scOps(s *Scalable, seed uint64, n int) {
	keys := newBFKeys(seed)
	for range n {
		s.Add(keys.next())
	}
}

func TestScalableCloneAndDeterminism(t *testing.T) {
	a, b := mustNewScalable(t, 100, 0.01, 2, false), mustNewScalable(t, 100, 0.01, 2, false)
	scOps(a, 3, 1000)
	scOps(b, 3, 1000)
	if !bytes.Equal(encodeOf(t, a), encodeOf(t, b)) || a.Filters() < 3 {
		t.Fatalf("the same adds gave different encodings (%d sub-filters)", a.Filters())
	}
	c := a.Clone()
	scOps(c, 4, 1000) // grows the clone's chain too
	if bytes.Equal(encodeOf(t, a), encodeOf(t, c)) || !bytes.Equal(encodeOf(t, a), encodeOf(t, b)) {
		t.Fatal("Clone shares state with the original")
	}
}

func TestScalableGolden(t *testing.T) {
	scaling := mustNewScalable(t, 50, 0.01, 2, false)
	fixed := mustNewScalable(t, 30, 0.001, 0, false)
	for i := range uint64(400) {
		scaling.Add(bfItem(i))
		fixed.Add(bfItem(i))
	}
	if scaling.Filters() != 4 || fixed.Count() != 30 {
		t.Fatalf("golden filters: %d sub-filters, non-scaling count %d", scaling.Filters(), fixed.Count())
	}
	lines := bfHexLines("# NewScalable(50, 0.01, 2, false), items 0..399", encodeOf(t, scaling))
	lines = append(lines, bfHexLines("# NewScalable(30, 0.001, 0, false), items 0..399 (30 taken)", encodeOf(t, fixed))...)
	bfGolden(t, "scalable.hex", lines, *updateScalable)
}

func TestScalableRoundTrip(t *testing.T) {
	// Two sub-filters of about 0.45 and 1 MB: the dump spans two chunks, and the
	// chunk boundary falls inside the second sub-filter.
	big := mustNewScalable(t, 300000, 0.01, 2, false)
	scOps(big, 8, 700000)
	small := mustNewScalable(t, 10, 0.1, 3, false)
	scOps(small, 9, 200)
	fixed := mustNewScalable(t, 10, 0.1, 2, true)
	scOps(fixed, 9, 200)
	for _, s := range []*Scalable{big, small, fixed} {
		enc := encodeOf(t, s)
		f, err := Decode(bytes.NewReader(enc))
		if err != nil || !reflect.DeepEqual(f, owned(s)) {
			t.Fatalf("Decode = %v; equal %v", err, reflect.DeepEqual(f, owned(s)))
		}
		var r Scalable
		if n, err := r.ReadFrom(bytes.NewReader(enc)); err != nil || n != int64(len(enc)) || !reflect.DeepEqual(&r, owned(s)) {
			t.Fatalf("ReadFrom = %d, %v (encoding is %d bytes)", n, err, len(enc))
		}
		g := dumpRoundTrip(t, s).(*Scalable)
		if g.Count() != s.Count() || g.Filters() != s.Filters() {
			t.Fatal("filter loaded from chunks differs")
		}
		scOps(g, 10, 5000)
		for _, f := range g.filters {
			if f.setBits() != f.bits.popcount() {
				t.Fatalf("sub-filter set bits %d after loading and adding, actual %d", f.setBits(), f.bits.popcount())
			}
		}
	}
	var r Scalable
	if _, err := r.ReadFrom(bytes.NewReader(encodeOf(t, mustNewBloom(t, 10, 0.1)))); !errors.Is(err, ErrWrongKind) {
		t.Fatalf("ReadFrom of a Bloom: %v, want ErrWrongKind", err)
	}
}

func TestScalableDecodeErrors(t *testing.T) {
	s := mustNewScalable(t, 20, 0.01, 2, false)
	scOps(s, 1, 50)
	words := s.payload()
	var all []uint64
	for _, w := range words {
		all = append(all, w.slice()...)
	}
	params := func(version byte, rate float64, expansion uint64, nonScaling byte, nf uint64, subs []*Bloom) []byte {
		var w paramWriter
		w.byte(version)
		w.float(rate)
		w.uint(expansion)
		w.byte(nonScaling)
		w.uint(nf)
		for _, f := range subs {
			f.writeShape(&w)
		}
		return w.bytesOut()
	}
	subs := s.filters
	badSub := subs[0].Clone()
	badSub.k = 0
	cases := []struct {
		name   string
		params []byte
		words  []uint64
		want   error
	}{
		{"good", s.params(), all, nil},
		{"good rebuilt", params(1, 0.01, 2, 0, uint64(len(subs)), subs), all, nil},
		{"version", params(2, 0.01, 2, 0, uint64(len(subs)), subs), all, ErrVersion},
		{"rate", params(1, 1, 2, 0, uint64(len(subs)), subs), all, ErrCorrupt},
		{"expansion", params(1, 0.01, 32769, 0, uint64(len(subs)), subs), all, ErrCorrupt},
		{"expansion 0 scaling", params(1, 0.01, 0, 0, uint64(len(subs)), subs), all, ErrCorrupt},
		{"bool", params(1, 0.01, 2, 2, uint64(len(subs)), subs), all, ErrCorrupt},
		{"non-scaling chain", params(1, 0.01, 2, 1, uint64(len(subs)), subs), all, ErrCorrupt},
		{"no sub-filters", params(1, 0.01, 2, 0, 0, nil), nil, ErrCorrupt},
		{"too many", params(1, 0.01, 2, 0, scalableMaxFilters+1, subs), all, ErrCorrupt},
		{"count short", params(1, 0.01, 2, 0, uint64(len(subs))+1, subs), all, ErrCorrupt},
		{"bad sub-filter", params(1, 0.01, 2, 0, 1, []*Bloom{badSub}), words[0].slice(), ErrCorrupt},
		{"trailing", append(s.params(), 0), all, ErrCorrupt},
		{"payload short", s.params(), all[:len(all)-1], ErrCorrupt},
	}
	for _, tc := range cases {
		f, err := Decode(bytes.NewReader(bfContainer(KindScalable, tc.params, tc.words)))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: Decode error %v, want %v", tc.name, err, tc.want)
		}
		if err == nil {
			f.(*Scalable).Add([]byte("usable"))
		}
	}
	enc := encodeOf(t, s)
	for n := range len(enc) {
		if _, err := Decode(bytes.NewReader(enc[:n])); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated to %d bytes: error %v, want ErrCorrupt", n, err)
		}
	}
}

// FuzzDecodeScalable feeds the decoder raw encodings and, through bfContainer,
// arbitrary params and payloads behind valid checksums.
func FuzzDecodeScalable(f *testing.F) {
	scaling := mustNewScalable(f, 10, 0.1, 2, false)
	scOps(scaling, 1, 60)
	fixed := mustNewScalable(f, 20, 0.01, 0, false)
	scOps(fixed, 2, 30)
	for _, s := range []*Scalable{scaling, fixed} {
		enc := encodeOf(f, s)
		var pay []byte
		for _, w := range s.payload() {
			pay = append(pay, bfBytes(w.slice())...)
		}
		f.Add(enc, s.params(), pay)
		f.Add(enc[:len(enc)/2], s.params()[:12], pay[:8])
		flipped := append([]byte(nil), enc...)
		flipped[len(flipped)-7] ^= 0x10
		f.Add(flipped, append([]byte{1}, s.params()...), pay[8:])
	}
	f.Fuzz(func(t *testing.T, raw, params, payload []byte) {
		if len(raw) > 5 && Kind(raw[5]) != KindScalable {
			return // other kinds have their own fuzzers
		}
		bfDecodeAny(t, raw)
		bfDecodeAny(t, bfContainer(KindScalable, params, bfWords(payload)))
	})
}

func BenchmarkScalableAdd(b *testing.B) {
	s := mustNewScalable(b, 1<<16, 0.01, 2, false)
	keys := newBFKeys(1)
	items := make([][]byte, 1<<20)
	for i := range items {
		items[i] = keys.next()
	}
	for i := 0; b.Loop(); i++ {
		s.Add(items[i&(1<<20-1)])
	}
}

func BenchmarkScalableTestAbsent(b *testing.B) {
	s := mustNewScalable(b, 1<<16, 0.01, 2, false)
	scOps(s, 1, 1<<20) // five sub-filters
	keys := newBFKeys(2)
	items := make([][]byte, 1<<20)
	for i := range items {
		items[i] = keys.next()
	}
	for i := 0; b.Loop(); i++ {
		s.Test(items[i&(1<<20-1)])
	}
}
