package main

import (
	"bytes"
	"fmt"
	"io"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/rookerydb/rookery/filters"
)

// The bloom family puts Rookery's Bloom beside bits-and-blooms/bloom v3, sized for
// the same n and p, and adds a scalable Bloom grown from n/16 to show what a chain
// of five sub-filters costs. The rookery rows' notes give their lookup times as a
// fraction of bits-and-blooms' in the same run.

func init() { register("bloom", runBloom) }

// bloomUnderTest is what the benchmark needs from each implementation.
type bloomUnderTest struct {
	add    func(item []byte)
	test   func(item []byte) bool
	bits   func() float64 // memory in bits, read after the adds
	encode func(w io.Writer) error
	note   string
}

func runBloom(cfg Config, keys *Keys) []Result {
	bb := bloom.NewWithEstimates(uint(cfg.N), cfg.P)
	ref := measureBloom("bits-and-blooms/bloom v3.7.1", bloomUnderTest{
		add:    func(item []byte) { bb.Add(item) },
		test:   bb.Test,
		bits:   func() float64 { return float64(bb.Cap()) },
		encode: func(w io.Writer) error { _, err := bb.WriteTo(w); return err },
		note:   fmt.Sprintf("k=%d", bb.K()),
	}, cfg, keys)
	rows := []Result{ref}

	b, err := filters.NewBloom(uint64(cfg.N), cfg.P)
	if err != nil {
		return append(rows, Result{Family: "bloom", Impl: "rookery Bloom", N: cfg.N, P: cfg.P, Note: err.Error()})
	}
	layout := "classic"
	if b.Blocked() {
		layout = "blocked"
	}
	r := measureBloom("rookery Bloom", bloomUnderTest{
		add:    func(item []byte) { b.Add(item) },
		test:   b.Test,
		bits:   func() float64 { return float64(b.MemoryBytes() * 8) },
		encode: func(w io.Writer) error { _, err := b.WriteTo(w); return err },
		note:   fmt.Sprintf("%s k=%d", layout, b.Hashes()),
	}, cfg, keys)
	r.Note += fmt.Sprintf("; vs b&b: add %.2fx, present %.2fx, absent %.2fx, bits %.2fx",
		r.Add/ref.Add, r.TestPresent/ref.TestPresent, r.TestAbsent/ref.TestAbsent, r.BitsPerItem/ref.BitsPerItem)
	rows = append(rows, r)

	s, err := filters.NewScalable(uint64(max(cfg.N/16, 1)), cfg.P, 2, false)
	if err != nil {
		return append(rows, Result{Family: "bloom", Impl: "rookery Scalable", N: cfg.N, P: cfg.P, Note: err.Error()})
	}
	r = measureBloom("rookery Scalable from n/16, x2", bloomUnderTest{
		add:    func(item []byte) { s.Add(item) },
		test:   s.Test,
		bits:   func() float64 { return float64(s.MemoryBytes() * 8) },
		encode: func(w io.Writer) error { _, err := s.WriteTo(w); return err },
	}, cfg, keys)
	r.Note = fmt.Sprintf("%d sub-filters", s.Filters())
	rows = append(rows, r)
	return append(rows, runRBChain(cfg, keys)...)
}

// runRBChain measures RedisBloom's own layout (filters.RBChain, what a dump taken
// from RedisBloom loads into) beside ours: one chain reserved for n, and one
// grown from n/16 like the Scalable row. Its first link gets p/2, as in
// RedisBloom, so it takes more bits than a Bloom sized for p.
func runRBChain(cfg Config, keys *Keys) []Result {
	var rows []Result
	for _, start := range []int{cfg.N, max(cfg.N/16, 1)} {
		impl := "rookery RBChain (RedisBloom layout)"
		if start != cfg.N {
			impl = "rookery RBChain from n/16, x2"
		}
		c, err := filters.NewRBChain(uint64(start), cfg.P, 2, false)
		if err != nil {
			rows = append(rows, Result{Family: "bloom", Impl: impl, N: cfg.N, P: cfg.P, Note: err.Error()})
			continue
		}
		r := measureBloom(impl, bloomUnderTest{
			add:    func(item []byte) { c.Add(item) },
			test:   c.Test,
			bits:   func() float64 { return float64(c.MemoryBytes() * 8) },
			encode: func(w io.Writer) error { _, err := c.WriteTo(w); return err },
		}, cfg, keys)
		links := c.Links()
		r.Note = fmt.Sprintf("%d links, k=%d..%d", len(links), links[0].Hashes, links[len(links)-1].Hashes)
		rows = append(rows, r)
	}
	return rows
}

// measureBloom fills f with the n present keys and measures one pass of each
// operation, then the time to encode the full filter into a buffer grown in
// advance.
func measureBloom(impl string, f bloomUnderTest, cfg Config, keys *Keys) Result {
	n, absent := keys.N(), keys.Absent()
	r := Result{Family: "bloom", Impl: impl, N: cfg.N, P: cfg.P, Delete: na, LoadAtFailure: na, Note: f.note}
	r.Add = perOp(n, func(i int) { f.add(keys.P(i)) })
	missed := 0
	r.TestPresent = perOp(n, func(i int) {
		if !f.test(keys.P(i)) {
			missed++
		}
	})
	if missed > 0 {
		r.Note += fmt.Sprintf(", %d FALSE NEGATIVES", missed)
	}
	fp := 0
	r.TestAbsent = perOp(absent, func(i int) {
		if f.test(keys.A(i)) {
			fp++
		}
	})
	r.FPP = float64(fp) / float64(absent)
	r.BitsPerItem = f.bits() / float64(n)
	var buf bytes.Buffer
	buf.Grow(int(f.bits()/8) + 4096)
	r.EncodeMs = elapsedMs(func() {
		if err := f.encode(&buf); err != nil {
			panic(err)
		}
	})
	return r
}
