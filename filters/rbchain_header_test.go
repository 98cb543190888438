package filters

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// rbHeaderCase is a dump header with the verdicts of this package and of
// RedisBloom on it.
type rbHeaderCase struct {
	name   string
	header []byte
	ours   bool // accepted here
	theirs bool // accepted by RedisBloom 2.6 on x86-64
	// unsafe marks headers RedisBloom would try to allocate absurd memory for;
	// the cross-check does not send them.
	unsafe bool
	// varies marks headers on which RedisBloom's verdict depends on its
	// version: 8.0 lacks the n2 <= 63 check that 2.6 and 8.1 on have.
	varies bool
	// noAdds marks accepted chains on which adds go differently by design
	// (our limits); the cross-check only compares lookups.
	noAdds bool
}

// rbHeaderCases mutates the header of a two-link chain (links of 144 and 312
// bytes) into every rule's edge.
func rbHeaderCases(t testing.TB) []rbHeaderCase {
	c := mustNewRBChain(t, 100, 0.01, 2, false)
	rbAddN(t, c, "h:", 150)
	h := c.DumpHeader()
	set := rbHeaderSet
	f64 := math.Float64bits
	size, size0 := c.Count(), c.links[0].size
	return []rbHeaderCase{
		{name: "as dumped", header: h, ours: true, theirs: true},
		// RedisBloom's rules.
		{name: "short", header: h[:19]},
		{name: "no links", header: set(h[:20], -1, "nfilters", 0)},
		{name: "trailing byte", header: append(bytes.Clone(h), 0)},
		{name: "more links than bytes", header: set(h, -1, "nfilters", 3)},
		{name: "fewer links than bytes", header: set(h, -1, "nfilters", 1)},
		{name: "unknown option", header: set(h, -1, "options", 5|16)},
		{name: "sizes do not sum", header: set(h, -1, "size", size+1)},
		{name: "error 0", header: set(h, 0, "error", 0)},
		{name: "error 1", header: set(h, 1, "error", f64(1))},
		{name: "error negative", header: set(h, 0, "error", f64(-0.1))},
		{name: "error infinite", header: set(h, 0, "error", f64(math.Inf(1)))},
		{name: "n2 64", header: set(h, 0, "n2", 64), varies: true},
		{name: "n2 above the bits", header: set(h, 0, "n2", 11)},
		{name: "no bits", header: set(set(h, 0, "bytes", 0), 0, "bits", 0)},
		{name: "bits not bytes*8", header: set(h, 1, "bits", 312*8+8)},
		{name: "hashes not from bpe", header: set(h, 0, "hashes", 9)},
		{name: "bpe not from hashes", header: set(h, 1, "bpe", f64(20))},
		{name: "bytes*8 wraps", header: set(set(h, 0, "bytes", 1<<61+1), 0, "bits", 8), unsafe: true},
		// Ours: RedisBloom takes these.
		{name: "error NaN", header: set(h, 0, "error", f64(math.NaN())), theirs: true},
		{name: "7e8 hashes", header: set(set(h, 0, "bpe", f64(1e9)), 0, "hashes", 693147181), theirs: true},
		{name: "bpe NaN", header: set(set(h, 0, "bpe", f64(math.NaN())), 0, "hashes", 1<<31), theirs: true},
		{name: "bpe negative", header: set(set(h, 0, "bpe", f64(-5)), 0, "hashes", 1<<32-3), theirs: true},
		{name: "1101 hashes", header: set(set(h, 0, "bpe", f64(1588)), 0, "hashes", 1101), theirs: true},
		{name: "expansion 32769", header: set(h, -1, "growth", rbMaxGrowth+1), theirs: true},
		{name: "capacity 2^53+1", header: set(h, 1, "entries", rbMaxEntries+1), theirs: true},
		{name: "size 2^53+1", header: set(set(h, 1, "size", rbMaxEntries+1), -1, "size", size0+rbMaxEntries+1), theirs: true},
		{name: "link over 64 GiB", header: set(set(h, 0, "bytes", maxPayloadBytes+8), 0, "bits", (maxPayloadBytes+8)*8), unsafe: true},
		{name: "links over 64 GiB", header: set(set(set(set(h, 0, "bytes", maxPayloadBytes/2+8), 0, "bits",
			(maxPayloadBytes/2+8)*8), 1, "bytes", maxPayloadBytes/2), 1, "bits", maxPayloadBytes*4), unsafe: true},
		{name: "1101 links", header: rbTinyLinks(rbMaxLinks + 1), theirs: true},
		// Edges both take.
		{name: "1100 links", header: rbTinyLinks(rbMaxLinks), ours: true, theirs: true, noAdds: true},
		{name: "1100 hashes", header: set(set(h, 0, "bpe", f64(1586)), 0, "hashes", 1100), ours: true, theirs: true},
		{name: "no hashes", header: set(set(h, 0, "bpe", 0), 0, "hashes", 0), ours: true, theirs: true},
		{name: "bpe -0.5", header: set(set(h, 1, "bpe", f64(-0.5)), 1, "hashes", 0), ours: true, theirs: true},
		{name: "3 bytes", header: set(set(h, 1, "bytes", 3), 1, "bits", 24), ours: true, theirs: true},
		{name: "n2 3 in 1 byte", header: set(set(set(h, 1, "bytes", 1), 1, "bits", 8), 1, "n2", 3), ours: true, theirs: true},
		{name: "n2 below the bits", header: set(h, 1, "n2", 10), ours: true, theirs: true},
		{name: "size over capacity", header: set(set(h, 1, "size", 500), -1, "size", size0+500), ours: true, theirs: true},
		{name: "capacity 0", header: set(h, 1, "entries", 0), ours: true, theirs: true},
		{name: "expansion 0, scaling", header: set(h, -1, "growth", 0), ours: true, theirs: true},
		{name: "expansion 32768", header: set(h, -1, "growth", rbMaxGrowth), ours: true, theirs: true},
		{name: "capacity 2^53", header: set(h, 1, "entries", rbMaxEntries), ours: true, theirs: true},
		{name: "no options", header: set(h, -1, "options", 0), ours: true, theirs: true},
		{name: "every option", header: set(h, -1, "options", rbOptAll), ours: true, theirs: true},
		{name: "error just below 1", header: set(h, 1, "error", f64(math.Nextafter(1, 0))), ours: true, theirs: true},
	}
}

// TestRBChainHeaderRules holds every header to its verdict; a refused one fails
// with ErrRBBadData from both entry points and, as params, with ErrCorrupt from
// Decode, and an accepted one gives a chain whose every method works.
func TestRBChainHeaderRules(t *testing.T) {
	for _, hc := range rbHeaderCases(t) {
		n, perr := ParseRBChainHeader(hc.header)
		if hc.ours != (perr == nil) {
			t.Errorf("%s: ParseRBChainHeader: %v, want accepted %v", hc.name, perr, hc.ours)
			continue
		}
		params := append([]byte{rbParamVersion}, hc.header...)
		if !hc.ours {
			_, err := NewRBChainFromHeader(hc.header)
			if !errors.Is(perr, ErrRBBadData) || !errors.Is(err, ErrRBBadData) {
				t.Errorf("%s: %v, %v; want ErrRBBadData", hc.name, perr, err)
			}
			if _, err := Decode(bytes.NewReader(bfContainer(KindRBChain, params, nil))); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s: Decode: %v, want ErrCorrupt", hc.name, err)
			}
			continue
		}
		c, err := NewRBChainFromHeader(hc.header)
		if err != nil || n != c.payloadBytes() {
			t.Fatalf("%s: %v; ParseRBChainHeader says %d bytes for %d", hc.name, err, n, c.payloadBytes())
		}
		rbExercise(t, c, hc.header)
	}
}

// rbExercise calls every method of a chain made from header, checking what
// holds of any chain: it dumps to its header, reloads and re-encodes to itself,
// and its forks and clones are its own.
func rbExercise(t *testing.T, c *RBChain, header []byte) {
	t.Helper()
	if !bytes.Equal(c.DumpHeader(), header) {
		t.Fatal("the chain dumps another header than it was made from")
	}
	rb := c.RedisBloomSize()
	if c.MemoryBytes() < c.payloadBytes() || rb != 32+64*uint64(c.Filters())+c.payloadBytes() {
		t.Fatalf("MemoryBytes %d, RedisBloomSize %d for %d bytes", c.MemoryBytes(), rb, c.payloadBytes())
	}
	if len(c.Links()) != c.Filters() || len(c.Debug()) != c.Filters()+1 {
		t.Fatalf("%d links, %d debug lines for %d filters", len(c.Links()), len(c.Debug()), c.Filters())
	}
	_, _, _, _ = c.Capacity(), c.ErrorRate(), c.Expansion(), c.NonScaling()
	c.LoadChunk(2, []byte{0x5a})
	dump := ourDump(c)
	if err := sameDump(ourDump(rbLoadDump(t, dump)), dump); err != nil {
		t.Fatalf("reloading the dump: %v", err)
	}
	enc := rbEncoding(t, c)
	d, err := Decode(bytes.NewReader(enc))
	if err != nil || !bytes.Equal(rbEncoding(t, d), enc) {
		t.Fatalf("Decode of the encoding: %v", err)
	}
	clone, fork := c.Clone(), c.Fork()
	for _, it := range rbItems("exercise:", 0, 20) {
		next, before := fork.NextGrowthBytes(), fork.MemoryBytes()
		ok, err := fork.Add(it)
		switch {
		case err != nil && !errors.Is(err, ErrFull) && !errors.Is(err, ErrGrowth):
			t.Fatalf("Add: %v", err)
		case err == nil && !fork.Test(it):
			t.Fatalf("Add(%q) = %v, then not found", it, ok)
		case fork.MemoryBytes() != before && fork.MemoryBytes() != before+next:
			t.Fatalf("growing took %d bytes, NextGrowthBytes said %d", fork.MemoryBytes()-before, next)
		}
	}
	if !bytes.Equal(rbEncoding(t, c), enc) || !bytes.Equal(rbEncoding(t, clone), enc) {
		t.Fatal("adds to a fork changed the original or a clone")
	}
}
