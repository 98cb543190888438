package main

import (
	"bytes"
	"fmt"

	"github.com/rookerydb/rookery/filters"
)

// The counting family compares Rookery's two deletable Bloom layouts: the standard
// counting Bloom filter and the d-left one, both with 4-bit counters. No library in
// the required set has a counting Bloom filter, so these rows stand alone.

func init() { register("counting", runCounting) }

// countingUnderTest is what the benchmark needs from either layout.
type countingUnderTest interface {
	filters.Filter
	Add(item []byte) bool
	Test(item []byte) bool
	Delete(item []byte) bool
}

func runCounting(cfg Config, keys *Keys) []Result {
	var rows []Result
	c, err := filters.NewCounting(uint64(cfg.N), cfg.P, 4)
	if err != nil {
		return []Result{{Family: "counting", Impl: "rookery Counting 4-bit", N: cfg.N, P: cfg.P, Note: err.Error()}}
	}
	note := fmt.Sprintf("k=%d", c.Hashes())
	rows = append(rows, measureCounting("rookery Counting 4-bit", c, cfg, keys, note))

	d, err := filters.NewDLeft(uint64(cfg.N), cfg.P, 4)
	if err != nil {
		return append(rows, Result{Family: "counting", Impl: "rookery DLeft 4-bit", N: cfg.N, P: cfg.P, Note: err.Error()})
	}
	note = fmt.Sprintf("d=%d h=%d r=%d", d.Tables(), d.CellsPerBucket(), d.RemainderBits())
	r := measureCounting("rookery DLeft 4-bit", d, cfg, keys, note)
	if d.Overflowed() {
		r.Note += ", overflowed"
	}
	return append(rows, r)
}

// measureCounting fills f with the n present keys and measures one pass of each
// operation; deletes come last and remove every key.
func measureCounting(impl string, f countingUnderTest, cfg Config, keys *Keys, note string) Result {
	n, absent := keys.N(), keys.Absent()
	r := Result{Family: "counting", Impl: impl, N: cfg.N, P: cfg.P, LoadAtFailure: na, Note: note}
	r.Add = perOp(n, func(i int) { f.Add(keys.P(i)) })
	r.TestPresent = perOp(n, func(i int) {
		if f.Test(keys.P(i)) {
			sink++
		}
	})
	fp := 0
	r.TestAbsent = perOp(absent, func(i int) {
		if f.Test(keys.A(i)) {
			fp++
		}
	})
	r.FPP = float64(fp) / float64(absent)
	r.BitsPerItem = float64(f.MemoryBytes()*8) / float64(n)
	var buf bytes.Buffer
	buf.Grow(int(f.MemoryBytes()) + 1024)
	r.EncodeMs = elapsedMs(func() {
		if _, err := f.WriteTo(&buf); err != nil {
			panic(err)
		}
	})
	failed := 0
	r.Delete = perOp(n, func(i int) {
		if !f.Delete(keys.P(i)) {
			failed++
		}
	})
	if failed > 0 {
		// A refused delete of an added key would be a false negative.
		r.Note += fmt.Sprintf(", %d DELETES REFUSED", failed)
	}
	return r
}
