package main

import (
	"fmt"
	"io"
	"math"

	"github.com/rookerydb/rookery/filters"
)

// The window family measures filters that remember the last n insertions
// (BF.RESERVE key p n LAST n): Rookery's windowed Bloom and cuckoo filters
// beside a plain Bloom filter of capacity n (which forgets nothing), and beside
// rotating whole Bloom filters, what users build by hand: two generations of
// capacity n each (the naive rotation), and eight generations of n/7 each at
// p/8 (the windowed Bloom's own sizing in separate filters).
//
// Each windowed filter first takes 2n insertions, then n measured ones, then
// as many more as bring it to its worst moment, the newest generation about to
// be rotated out; lookups of the last n keys (which must all answer present)
// and of absent keys are measured then. Bits per item are over the window: the
// filter's memory divided by n.

func init() { register("window", runWindow) }

// windowUnderTest is one implementation: add, test, memory, and how many
// more insertions bring it to the moment before its next rotation.
type windowUnderTest struct {
	add    func(item []byte)
	test   func(item []byte) bool
	bytes  func() uint64
	toEdge func() int
	note   string
}

func runWindow(cfg Config, keys *Keys) []Result {
	n := cfg.N
	stream := newKeys(4*n, 0, uint64(n)^0x77696e646f77) // 2n warm-up, n measured, up to n more
	var rows []Result

	b, err := filters.NewBloom(uint64(n), cfg.P)
	if err != nil {
		return []Result{{Family: "window", Impl: "rookery Bloom", N: n, P: cfg.P, Note: err.Error()}}
	}
	plain := measureBloom("rookery Bloom (no window)", bloomUnderTest{
		add: func(item []byte) { b.Add(item) }, test: b.Test,
		bits:   func() float64 { return float64(b.MemoryBytes() * 8) },
		encode: func(w io.Writer) error { _, err := b.WriteTo(w); return err },
	}, cfg, keys)
	plain.Family, plain.EncodeMs = "window", na
	// Timed as the windowed rows are: the fastest of windowPasses.
	for range windowPasses - 1 {
		plain.TestPresent = min(plain.TestPresent, perOp(n, func(i int) { b.Test(keys.P(i)) }))
		plain.TestAbsent = min(plain.TestAbsent, perOp(keys.Absent(), func(i int) { b.Test(keys.A(i)) }))
	}
	c, err := filters.NewBloom(uint64(n), cfg.P)
	if err != nil {
		return []Result{{Family: "window", Impl: "rookery Bloom", N: n, P: cfg.P, Note: err.Error()}}
	}
	per := n / windowPasses
	for p := range windowPasses {
		plain.Add = min(plain.Add, perOp(per, func(i int) { c.Add(keys.P(p*per + i)) }))
	}
	plain.Note = fmt.Sprintf("k=%d; every row the fastest of %d passes", b.Hashes(), windowPasses)
	rows = append(rows, plain)

	cases := []struct {
		impl string
		make func() (windowUnderTest, error)
	}{
		{"rookery WindowBloom LAST n", func() (windowUnderTest, error) { return windowBloom(n, cfg.P) }},
		{"rotating 2 Blooms of n at p/2", func() (windowUnderTest, error) { return rotating(n, cfg.P, 2) }},
		{"rotating 8 Blooms of n/7 at p/8", func() (windowUnderTest, error) { return rotating(n, cfg.P, 8) }},
		{"rookery WindowCuckoo LAST n", func() (windowUnderTest, error) { return windowCuckoo(n) }},
	}
	for _, c := range cases {
		w, err := c.make()
		if err != nil {
			rows = append(rows, Result{Family: "window", Impl: c.impl, N: n, P: cfg.P, Note: err.Error()})
			continue
		}
		r := measureWindow(c.impl, w, cfg, keys, stream)
		r.Note += fmt.Sprintf("; vs plain Bloom: bits %.2fx, add %.2fx, present %.2fx, absent %.2fx",
			r.BitsPerItem/plain.BitsPerItem, r.Add/plain.Add, r.TestPresent/plain.TestPresent, r.TestAbsent/plain.TestAbsent)
		rows = append(rows, r)
	}
	return rows
}

func windowBloom(n int, p float64) (windowUnderTest, error) {
	w, err := filters.NewWindowBloom(filters.WindowConfig{Capacity: uint64(n), ErrorRate: p, Last: uint64(n)})
	if err != nil {
		return windowUnderTest{}, err
	}
	in := w.Window()
	period := int(in.Window+in.Slack+1) / 8
	added := 0
	return windowUnderTest{
		add:    func(item []byte) { w.Add(item); added++ },
		test:   w.Test,
		bytes:  w.MemoryBytes,
		toEdge: func() int { return period - 1 - added%period },
		note:   fmt.Sprintf("k=%d, 8 generations of %d, slack %d", w.Hashes(), period, in.Slack),
	}, nil
}

func windowCuckoo(n int) (windowUnderTest, error) {
	c, err := filters.NewWindowCuckoo(filters.WindowConfig{Capacity: uint64(n), Last: uint64(n)})
	if err != nil {
		return windowUnderTest{}, err
	}
	in := c.Window()
	period := int(in.Window+in.Slack+1) / 8
	added, full := 0, 0
	return windowUnderTest{
		add: func(item []byte) {
			if c.Add(item) != nil {
				full++
			}
			added++
		},
		test:   c.Test,
		bytes:  c.MemoryBytes,
		toEdge: func() int { return period - 1 - added%period },
		note:   "b=4, 12-bit fingerprints and 4-bit generations",
	}, nil
}

// rotating keeps gens whole Bloom filters, each of n/(gens-1) items at
// p/gens: the newest takes adds, and when it is full the oldest is cleared
// and becomes the newest. A lookup tests every one.
func rotating(n int, p float64, gens int) (windowUnderTest, error) {
	per := (n + gens - 2) / (gens - 1)
	rate := p / float64(gens)
	if gens == 2 {
		rate = 1 - math.Sqrt(1-p) // two filters: 1-(1-r)^2 = p
	}
	fs := make([]*filters.Bloom, gens)
	for i := range fs {
		b, err := filters.NewBloom(uint64(per), rate)
		if err != nil {
			return windowUnderTest{}, err
		}
		fs[i] = b
	}
	cur, in := 0, 0
	return windowUnderTest{
		add: func(item []byte) {
			if in == per {
				cur = (cur + 1) % gens
				fs[cur], _ = filters.NewBloom(uint64(per), rate)
				in = 0
			}
			fs[cur].Add(item)
			in++
		},
		test: func(item []byte) bool {
			found := false
			for _, f := range fs {
				found = f.Test(item) || found
			}
			return found
		},
		bytes: func() uint64 {
			s := uint64(0)
			for _, f := range fs {
				s += f.MemoryBytes()
			}
			return s
		},
		toEdge: func() int { return per - in },
		note:   fmt.Sprintf("%d generations of %d, k=%d", gens, per, fs[0].Hashes()),
	}, nil
}

// windowPasses is how many times the window family measures each figure,
// keeping the fastest: a shared machine's noise only ever slows a pass.
const windowPasses = 3

// measureWindow runs the schedule described above. Adds are timed in
// windowPasses slices of n/windowPasses insertions, lookups in windowPasses
// whole passes; each figure is the fastest.
func measureWindow(impl string, w windowUnderTest, cfg Config, keys *Keys, stream *Keys) Result {
	n := cfg.N
	r := Result{Family: "window", Impl: impl, N: n, P: cfg.P, Delete: na, LoadAtFailure: na, EncodeMs: na, Note: w.note}
	for i := range 2 * n {
		w.add(stream.P(i))
	}
	r.Add = math.Inf(1)
	per := n / windowPasses
	for p := range windowPasses {
		from := 2*n + p*per
		r.Add = min(r.Add, perOp(per, func(i int) { w.add(stream.P(from + i)) }))
	}
	next := 2*n + per*windowPasses
	for range w.toEdge() {
		w.add(stream.P(next))
		next++
	}
	missed, fp := 0, 0
	r.TestPresent, r.TestAbsent = math.Inf(1), math.Inf(1)
	for range windowPasses {
		missed, fp = 0, 0
		r.TestPresent = min(r.TestPresent, perOp(n, func(i int) {
			if !w.test(stream.P(next - n + i)) {
				missed++
			}
		}))
		r.TestAbsent = min(r.TestAbsent, perOp(keys.Absent(), func(i int) {
			if w.test(keys.A(i)) {
				fp++
			}
		}))
	}
	if missed > 0 {
		r.Note += fmt.Sprintf(", %d FALSE NEGATIVES", missed)
	}
	r.FPP = float64(fp) / float64(keys.Absent())
	r.BitsPerItem = float64(w.bytes()*8) / float64(n)
	return r
}
