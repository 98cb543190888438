package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// The tests here hold chunk loads, and the checks behind them (check.go,
// validate.go), to what a server relies on: a load that is accepted leaves a
// filter whose counters agree with its arrays, so that no later operation wraps a
// counter, and every state the operations themselves reach is accepted.

// ltOracle recounts what f's arrays hold, by the kinds' own accessors rather
// than the lanes check.go cuts, and reports the first counter they contradict.
func ltOracle(f Filter) error {
	switch v := f.(type) {
	case *Cuckoo:
		fps := uint64(0)
		for i := range v.subs {
			t := &v.subs[i]
			for s := range t.m * t.b {
				if t.laneAt(s*t.f) != 0 {
					fps++
				}
			}
		}
		if fps != v.Items() || v.Items() > v.Slots() {
			return fmt.Errorf("cuckoo holds %d fingerprints, Items %d, Slots %d", fps, v.Items(), v.Slots())
		}
	case *Scalable:
		total := uint64(0)
		for i, b := range v.filters {
			ones := b.bits.popcount()
			if b.count > b.capacity || ones < b.count || ones > uint64(b.k)*b.count || ones != b.ones {
				return fmt.Errorf("sub-filter %d: %d items, capacity %d, %d bits set (cached %d), k %d",
					i, b.count, b.capacity, ones, b.ones, b.k)
			}
			total += b.count
		}
		if v.Count() != total || v.Count() > v.Capacity() {
			return fmt.Errorf("scalable Count %d, sum %d, Capacity %d", v.Count(), total, v.Capacity())
		}
	case *Bloom:
		ones := v.bits.popcount()
		if ones != v.ones || (ones == 0) != (v.count == 0) || ones > satMul(uint64(v.k), v.count) {
			return fmt.Errorf("bloom: %d bits set (cached %d) for %d items, k %d", ones, v.ones, v.count, v.k)
		}
	case *WindowCuckoo:
		n := uint64(0)
		for i := range v.m {
			n += uint64(bits.OnesCount64(live(v.words.at(i), v.clock.cur)))
		}
		sum := uint64(0)
		for _, c := range v.count {
			sum += c
		}
		if n != v.items || sum != v.items || v.items > v.Slots() {
			return fmt.Errorf("windowed cuckoo holds %d live copies, Items %d, generations %v", n, v.items, v.count)
		}
	case *Counting:
		sum, sat := uint64(0), 0
		for i := range v.m {
			w, sh := v.slot(i)
			c := v.counters.at(w) >> sh & v.max
			sum += c
			if c == v.max {
				sat++
			}
		}
		if sat == 0 && sum < uint64(v.k)*v.items {
			return fmt.Errorf("counting: counters sum to %d for %d items of %d hashes", sum, v.items, v.k)
		}
	case *DLeft:
		sum, sat := uint64(0), 0
		for c := range uint64(v.tables) * v.buckets * uint64(v.cellsPer) {
			cell := v.cell(c * v.cellBits)
			if cnt := cell & v.cmax; cnt == 0 && cell != 0 {
				return fmt.Errorf("d-left: free cell %d holds a remainder", c)
			} else if cnt == v.cmax {
				sat++
			} else {
				sum += cnt
			}
		}
		if sat == 0 && !v.overflow && sum != v.items {
			return fmt.Errorf("d-left: counters sum to %d for %d items", sum, v.items)
		}
	}
	return nil
}

// ltReload loads f's dump into a new filter, its payload first changed by
// mutate and every chunk sealed for the dump, in order. It returns the filter
// and the error of the first chunk refused, after which it stops.
func ltReload(t testing.TB, f Filter, mutate func(words []uint64)) (Filter, error) {
	t.Helper()
	_, header, err := DumpChunk(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	g, err := LoadHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	words := dtWords(f)
	mutate(words)
	for _, c := range ltChunks(g, words) {
		if err := LoadChunk(g, c.iter, c.data); err != nil {
			return g, err
		}
	}
	return g, nil
}

// ltChunks cuts words into the chunks of g's dump, each sealed for it.
func ltChunks(g Filter, words []uint64) []dtChunk {
	var out []dtChunk
	for off := 0; off < len(words)*8; off += DumpChunkBytes {
		n := min(DumpChunkBytes, len(words)*8-off)
		body := ctWordBytes(words[off/8 : (off+n)/8])
		iter := int64(off+n) + 1
		out = append(out, dtChunk{iter, dtSeal(g, iter, body)})
	}
	return out
}

// ltSmall is one small filter of every kind, with items in it.
func ltSmall(t testing.TB) []Filter {
	var out []Filter
	seen := map[string]bool{}
	for _, c := range ktCases() {
		if seen[c.kind.String()] {
			continue
		}
		seen[c.kind.String()] = true
		f, _ := ktFill(t, c)
		out = append(out, f)
	}
	return out
}

// ltFew is one filter of every kind, sized for thousands of items and holding
// ten.
func ltFew(t testing.TB) []Filter {
	b := mustNewBloom(t, 5000, 0.01)
	s := mustNewScalable(t, 5000, 0.01, 2, false)
	n := mustNewCounting(t, 1000, 0.01, 4)
	d := mustNewDLeft(t, 1000, 0.01, 4)
	c := mustNewCuckoo(t, CuckooConfig{Capacity: 1024, Expansion: 1})
	for i := range 10 {
		item := fmt.Appendf(nil, "few-%d", i)
		b.Add(item)
		_, _ = s.Add(item)
		n.Add(item)
		d.Add(item)
		_ = c.Add(item)
	}
	return []Filter{b, s, n, d, c}
}

// TestLoadRefusesRandomPayload: random words sealed with a valid checksum for
// the dump (anyone can compute it) do not make a filter. The last chunk is
// refused and the filter stays as it was, still being loaded. Counting filters
// are the exception: random counters saturate, and once one has, no bound ties
// the counters to the item count (validate.go).
func TestLoadRefusesRandomPayload(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range ltFew(t) {
		_, counting := f.(*Counting)
		g, err := ltReload(t, f, func(words []uint64) {
			for i := range words {
				words[i] = rng.Uint64()
			}
			if counting {
				words[len(words)-1] = 0 // its padding counters must stay zero
			}
		})
		if counting {
			if err != nil || ltOracle(g) != nil {
				t.Errorf("counting: random counters with some saturated: %v, %v", err, ltOracle(g))
			}
			continue
		}
		if !errors.Is(err, ErrBadChunk) || !Loading(g) {
			t.Errorf("%v: random payload: %v, loading %v; want ErrBadChunk, still loading", f.Kind(), err, Loading(g))
		}
	}
}

// TestLoadCuckooDeletesNeverWrap is the failure of issue 9: a cuckoo dump whose
// fingerprints outnumber its item count loaded, and deletes of items never added
// then took the count below zero, to 2^64 - 91. Now such a dump is refused; one
// whose fingerprints match its count loads, and deleting never-added items can
// at most take the count to zero.
func TestLoadCuckooDeletesNeverWrap(t *testing.T) {
	src := mustNewCuckoo(t, CuckooConfig{Capacity: 1024, Expansion: 1})
	for i := range 10 {
		if err := src.Add(fmt.Appendf(nil, "real-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(words []uint64) {
		for i := range words {
			words[i] = rng.Uint64()
		}
	}
	if g, err := ltReload(t, src, fill); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("10 items and a full table: %v, want ErrBadChunk", err)
	} else if g.(*Cuckoo).Items() != 10 {
		t.Fatalf("a refused chunk changed the count to %d", g.(*Cuckoo).Items())
	}

	// Exactly 10 random fingerprints: consistent, so it loads, and the filter
	// answers for them as for any 10 items.
	g, err := ltReload(t, src, func(words []uint64) {
		clear(words)
		for i := range 10 {
			words[i*7] = uint64(rng.IntN(255) + 1)
		}
	})
	if err != nil || Loading(g) {
		t.Fatalf("10 fingerprints for 10 items: %v", err)
	}
	c := g.(*Cuckoo)
	deleted := 0
	for i := range 100_000 {
		before := c.Items()
		if c.Delete(fmt.Appendf(nil, "never-%d", i)) {
			deleted++
			if c.Items() != before-1 {
				t.Fatalf("a delete took the count from %d to %d", before, c.Items())
			}
		}
		if c.Items() > c.Slots() {
			t.Fatalf("count %d above %d slots after %d deletes", c.Items(), c.Slots(), deleted)
		}
	}
	if deleted > 10 || ltOracle(c) != nil {
		t.Fatalf("%d deletes succeeded on 10 items: %v", deleted, ltOracle(c))
	}
}

// TestLoadRefusesWhatNoFilterHolds covers each check in turn on a real dump
// changed in one place. Padding is refused with the chunk that sets it; what
// depends on the whole payload, with the last chunk, which may then be sent
// again, right, to complete the filter.
func TestLoadRefusesWhatNoFilterHolds(t *testing.T) {
	cuckoo := mustNewCuckoo(t, CuckooConfig{Capacity: 301, BucketSize: 3, FingerprintBits: 12})
	for i := range 200 {
		_ = cuckoo.Add(fmt.Appendf(nil, "c-%d", i))
	}
	scalable := mustNewScalable(t, 8, 0.1, 2, false)
	for i := range 60 {
		_, _ = scalable.Add(fmt.Appendf(nil, "s-%d", i))
	}
	dleft := mustNewDLeft(t, 3000, 0.01, 4)
	counting := mustNewCounting(t, 100, 0.01, 4)
	for i := range 50 {
		dleft.Add(fmt.Appendf(nil, "d-%d", i))
		counting.Add(fmt.Appendf(nil, "n-%d", i))
	}
	last := func(w []uint64) int { return len(w) - 1 }
	cases := []struct {
		name   string
		f      Filter
		mutate func(w []uint64)
	}{
		{"cuckoo padding", cuckoo, func(w []uint64) { w[cuckoo.subs[0].words.len()-1] |= 1 << 63 }},
		{"cuckoo fingerprint lost", cuckoo, func(w []uint64) {
			i := slices.IndexFunc(w, func(x uint64) bool { return x&0xFFF != 0 })
			w[i] &^= 0xFFF
		}},
		{"cuckoo fingerprint added", cuckoo, func(w []uint64) {
			i := slices.IndexFunc(w, func(x uint64) bool { return x&0xFFF == 0 })
			w[i] |= 0x123
		}},
		{"scalable bits of no item", scalable, func(w []uint64) { w[last(w)] = ^uint64(0) }},
		{"scalable items with no bits", scalable, func(w []uint64) { clear(w[uint64(len(w))-scalable.filters[len(scalable.filters)-1].bits.len():]) }},
		{"d-left free cell with a remainder", dleft, func(w []uint64) {
			i := slices.IndexFunc(w, func(x uint64) bool { return x&0xFFFF == 0 })
			w[i] |= 0x10 // remainder bits, counter 0: 16-bit cells of 12 + 4 bits
		}},
		{"d-left a count too many", dleft, func(w []uint64) {
			i := slices.IndexFunc(w, func(x uint64) bool { return x&0xF != 0 && x&0xF < 14 })
			w[i]++
		}},
		{"counting counters gone", counting, func(w []uint64) { clear(w) }},
		{"counting padding", counting, func(w []uint64) { w[last(w)] |= 1 << 63 }},
	}
	for _, c := range cases {
		g, err := ltReload(t, c.f, c.mutate)
		if !errors.Is(err, ErrBadChunk) || !Loading(g) {
			t.Errorf("%s: %v, loading %v; want ErrBadChunk, still loading", c.name, err, Loading(g))
			continue
		}
		// The refused chunk changed nothing: the faithful one completes the
		// filter, identical to its source.
		for _, ch := range ltChunks(g, dtWords(c.f)) {
			if err := LoadChunk(g, ch.iter, ch.data); err != nil {
				t.Fatalf("%s: the faithful chunk after a refusal: %v", c.name, err)
			}
		}
		if Loading(g) || !bytes.Equal(ctEncode(t, g), ctEncode(t, c.f)) {
			t.Errorf("%s: the faithful chunks did not rebuild the filter", c.name)
		}
	}
	if dleft.cellBits != 16 || cuckoo.subs[0].f != 12 {
		t.Fatal("the cases above assume 16-bit d-left cells and 12-bit fingerprints")
	}
}

// TestDecodeRefusesInconsistent: Decode, which restores snapshots, holds a
// payload to the same checks as a chunked load.
func TestDecodeRefusesInconsistent(t *testing.T) {
	for _, f := range ltFew(t) {
		if _, ok := f.(*Counting); ok {
			continue // no check a random payload fails reliably
		}
		enc := ctEncode(t, f)
		g, err := Decode(bytes.NewReader(enc))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range g.payload() {
			inv := s.slice()
			for i := range inv {
				inv[i] = ^inv[i]
			}
			*s = pagedOf(inv)
		}
		if _, err := Decode(bytes.NewReader(ctEncode(t, g))); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%v with its payload inverted: Decode %v, want ErrCorrupt", f.Kind(), err)
		}
	}
}

// TestLoadInterleavedWithSnapshot: a filter being loaded encodes as such, and
// the copy decoded from that encoding takes and refuses exactly the chunks the
// original does, as a replica restored from a snapshot must.
func TestLoadInterleavedWithSnapshot(t *testing.T) {
	src := mustNewCuckoo(t, CuckooConfig{Capacity: 2_500_000, BucketSize: 4, FingerprintBits: 12})
	for i := range 200_000 {
		_ = src.Add(fmt.Appendf(nil, "i-%d", i))
	}
	header, chunks := dtDump(t, src)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	a, err := LoadHeader(header)
	if err != nil {
		t.Fatal(err)
	}
	if err := LoadChunk(a, chunks[1].iter, chunks[1].data); err != nil {
		t.Fatal(err)
	}
	b, err := Decode(bytes.NewReader(ctEncode(t, a)))
	if err != nil || !Loading(b) || b.Kind() != KindCuckoo {
		t.Fatalf("Decode of a filter being loaded: %v, loading %v", err, Loading(b))
	}
	if !bytes.Equal(ctEncode(t, a), ctEncode(t, b)) {
		t.Fatal("a filter being loaded re-encodes differently")
	}
	bad := slices.Clone(chunks[0].data)
	bad[3] ^= 1
	for _, g := range []Filter{a, b} {
		if err := LoadChunk(g, chunks[0].iter, bad); !errors.Is(err, ErrBadChunk) {
			t.Fatalf("damaged chunk: %v", err)
		}
		for _, c := range chunks {
			if err := LoadChunk(g, c.iter, c.data); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := ctEncode(t, src)
	if !bytes.Equal(ctEncode(t, a), want) || !bytes.Equal(ctEncode(t, b), want) {
		t.Fatal("the original and the restored copy did not both end as the source")
	}
}

// TestChecksHoldUnderOperations: every state that operations reach, however
// odd (deletes of items never added, counters saturated, d-left overflow,
// unions, full and grown filters), passes the checks: a snapshot or a dump of
// it always loads.
func TestChecksHoldUnderOperations(t *testing.T) {
	for _, c := range ktCases() {
		t.Run(c.name, func(t *testing.T) {
			f, err := c.build()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(c.items), 9))
			// A universe a quarter of the capacity: items repeat often enough
			// that counters saturate and small filters overflow or fill.
			for step := range 12 {
				for range max(c.items, 300) {
					ltRandomOp(f, rng, max(2, c.items/4))
				}
				if err := ltOracle(f); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if _, err := Decode(bytes.NewReader(ctEncode(t, f))); err != nil {
					t.Fatalf("step %d: Decode: %v", step, err)
				}
				header, chunks := dtDump(t, f)
				if g := dtLoad(t, header, chunks); Loading(g) || !bytes.Equal(ctEncode(t, g), ctEncode(t, f)) {
					t.Fatalf("step %d: the dump did not reload", step)
				}
			}
			// The states checked include the odd ones the rules must allow.
			switch v := f.(type) {
			case *Counting:
				if v.bits == 4 && !slices.ContainsFunc(v.counters.slice(), func(w uint64) bool {
					return w&(w>>1)&(w>>2)&(w>>3)&0x1111111111111111 != 0
				}) {
					t.Errorf("4-bit counters never saturated")
				}
			case *DLeft:
				if c.items <= 20 && !v.Overflowed() {
					t.Errorf("a small d-left filter never overflowed")
				}
			}
		})
	}
}

// ltRandomOp applies one operation chosen by rng to f: adds and deletes of a
// small universe (so items repeat and counters saturate), deletes of items
// never added, a Bloom's union with a copy of itself, and a windowed filter's
// move to a later time. It reports whether it retired generations, which
// takes their items out of the count.
func ltRandomOp(f Filter, rng *rand.Rand, universe int) (retired bool) {
	item := fmt.Appendf(nil, "op-%d", rng.IntN(universe+1))
	if rng.IntN(4) == 0 {
		item = fmt.Appendf(nil, "never-%d", rng.Uint64())
	}
	switch v := f.(type) {
	case *Bloom:
		if rng.IntN(500) == 0 {
			_ = v.Union(v.Clone())
		}
		v.Add(item)
	case *Scalable:
		_, _ = v.Add(item)
	case *Counting:
		if rng.IntN(3) == 0 {
			v.Delete(item)
		} else {
			v.Add(item)
		}
	case *DLeft:
		if rng.IntN(3) == 0 {
			v.Delete(item)
		} else {
			v.Add(item)
		}
	case *Cuckoo:
		if rng.IntN(3) == 0 {
			v.Delete(item)
		} else {
			_ = v.Add(item)
		}
	case *WindowBloom:
		retired = ltAdvance(v, rng) || !v.clock.byTime // a count window retires as it adds
		v.Add(item)
	case *WindowCuckoo:
		retired = ltAdvance(v, rng) || !v.clock.byTime
		if rng.IntN(3) == 0 {
			v.Delete(item)
		} else {
			_ = v.Add(item)
		}
	}
	return retired
}

// ltAdvance moves a time-windowed filter on now and then: by a generation or
// less, or by more than eight.
func ltAdvance(f interface{ Advance(int64) }, rng *rand.Rand) bool {
	if rng.IntN(50) != 0 {
		return false
	}
	ltNow += rng.Int64N(2_000_000)
	if rng.IntN(10) == 0 {
		ltNow += 20_000_000
	}
	f.Advance(ltNow)
	return true
}

// ltNow is the time ltAdvance moves windowed filters to.
var ltNow = int64(1_700_000_000_000_000_000)

// ltItems returns the count operations must never wrap: BF.CARD, CF's and CBF's
// items.
func ltItems(f Filter) uint64 {
	switch v := f.(type) {
	case *Bloom:
		return v.Count()
	case *Scalable:
		return v.Count()
	case *Counting:
		return v.Items()
	case *DLeft:
		return v.Items()
	case *Cuckoo:
		return v.Items()
	case *WindowBloom:
		return v.Count()
	case *WindowCuckoo:
		return v.Items()
	}
	return 0
}

// FuzzLoadChunks loads a dump of one small filter of each kind whose payload the
// fuzzer patches (patch: pairs of word index and value), in an order it picks,
// each chunk sealed for the dump; then applies operations it picks. Every
// refused chunk changes nothing; a filter that completes satisfies the oracle;
// each operation afterwards keeps it satisfied, a delete takes the count down by
// one at most and never below zero, and the filter always encodes to something
// Decode takes back.
func FuzzLoadChunks(f *testing.F) {
	kinds := ltFuzzFilters(f)
	f.Add(uint8(0), []byte{}, []byte{}, []byte{1, 2, 3})
	f.Add(uint8(4), []byte{0, 0, 0, 0, 0, 0, 0, 0, 0xFF}, []byte{1, 0}, []byte{9, 8, 7, 6})
	for k := range kinds {
		f.Add(uint8(k), []byte{3, 0, 0, 0, 0, 0, 0, 0, 1}, []byte{0}, []byte{5, 5, 5})
		f.Add(uint8(k), []byte{1, 0xF0, 0, 0, 0, 0, 0, 0, 0}, []byte{}, []byte{0, 1, 2, 3})
	}
	f.Fuzz(func(t *testing.T, kind uint8, patch, order, ops []byte) {
		// Each operation is checked against a full recount: a few dozen are
		// plenty, and keep every input fast.
		order, ops = order[:min(len(order), 64)], ops[:min(len(ops), 64)]
		src := kinds[int(kind)%len(kinds)]
		words := dtWords(src)
		for ; len(patch) >= 9; patch = patch[9:] {
			words[int(patch[0])%len(words)] ^= binary.LittleEndian.Uint64(patch[1:9])
		}
		_, header, err := DumpChunk(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		g, err := LoadHeader(header)
		if err != nil {
			t.Fatal(err)
		}
		chunks := ltChunks(g, words)
		sequence := slices.Clone(chunks)
		for _, o := range order {
			sequence = append(sequence, chunks[int(o)%len(chunks)])
		}
		for _, c := range sequence {
			if !Loading(g) {
				break
			}
			before := ctEncode(t, g)
			if err := LoadChunk(g, c.iter, c.data); err != nil {
				if !errors.Is(err, ErrBadChunk) || !bytes.Equal(ctEncode(t, g), before) {
					t.Fatalf("refused chunk: %v, or it changed the filter", err)
				}
			}
		}
		if Loading(g) {
			if _, err := Decode(bytes.NewReader(ctEncode(t, g))); err != nil {
				t.Fatalf("a filter being loaded does not decode: %v", err)
			}
			return
		}
		if err := ltOracle(g); err != nil {
			t.Fatalf("a completed load: %v", err)
		}
		rng := rand.New(rand.NewPCG(uint64(len(ops)), uint64(kind)))
		for _, op := range ops {
			before := ltItems(g)
			retired := ltRandomOp(g, rng, int(op))
			after := ltItems(g)
			if after < before-min(before, 1) && !retired {
				t.Fatalf("an operation took the count from %d to %d", before, after)
			}
			if err := ltOracle(g); err != nil {
				t.Fatalf("after an operation: %v", err)
			}
		}
		if _, err := Decode(bytes.NewReader(ctEncode(t, g))); err != nil {
			t.Fatalf("after operations, Decode: %v", err)
		}
	})
}

// ltFuzzFilters are the filters FuzzLoadChunks loads: small ones of every kind,
// and a cuckoo filter of two sub-filters whose 12-bit fingerprints straddle
// words.
func ltFuzzFilters(t testing.TB) []Filter {
	out := ltSmall(t)
	c := mustNewCuckoo(t, CuckooConfig{Capacity: 40, BucketSize: 3, FingerprintBits: 12, Expansion: 2})
	for i := 0; c.Filters() < 2; i++ {
		if err := c.Add(fmt.Appendf(nil, "grow-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	return append(out, c)
}

// TestSizeError: a filter too large for one filter says how large it would be.
func TestSizeError(t *testing.T) {
	for name, err := range map[string]error{
		"counting": func() error { _, err := CountingBytes(1<<30, 1e-300, 4); return err }(),
		"d-left":   func() error { _, err := DLeftBytes(1<<30, 1e-300, 4); return err }(),
		"bloom":    func() error { _, err := BloomBytes(1<<50, 1e-300); return err }(),
		"cuckoo":   func() error { _, err := CuckooBytes(CuckooConfig{Capacity: 1 << 62}); return err }(),
	} {
		var se *SizeError
		if !errors.As(err, &se) || !errors.Is(err, ErrBadParam) || !(se.Need > float64(se.Max)) || se.Max != maxPayloadBytes {
			t.Errorf("%s: %v, want a SizeError over %d bytes", name, err, uint64(maxPayloadBytes))
		}
	}
	_, err := CountingBytes(1<<30, 1e-300, 4)
	if want := "filters: bad parameter: the filter would need 771890854896 bytes, more than the maximum of 68719476736"; err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
}

// BenchmarkLoadChunk loads one full chunk of each kind's dump into a filter
// being loaded, checks included: what a LOADCHUNK costs the apply goroutine of
// every replica. "again" loads a chunk that is already in.
func BenchmarkLoadChunk(b *testing.B) {
	for _, f := range ltBenchFilters(b) {
		header, chunks := dtDump(b, f)
		c := chunks[1] // full, with neighbours on both sides
		b.Run(f.Kind().String(), func(b *testing.B) {
			b.SetBytes(int64(len(c.data) - 4))
			for range b.N {
				b.StopTimer()
				g, err := LoadHeader(header)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := LoadChunk(g, c.iter, c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(f.Kind().String()+"/again", func(b *testing.B) {
			g, err := LoadHeader(header)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(c.data) - 4))
			for b.Loop() {
				if err := LoadChunk(g, c.iter, c.data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeChecked decodes filters of several MiB, checks included: what
// restoring a snapshot costs per filter.
func BenchmarkDecodeChecked(b *testing.B) {
	for _, f := range ltBenchFilters(b) {
		b.Run(f.Kind().String(), func(b *testing.B) {
			enc := ctEncode(b, f)
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := Decode(bytes.NewReader(enc)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// ltBenchFilters are filters of each kind of more than one chunk, half full.
func ltBenchFilters(b *testing.B) []Filter {
	bl := mustNewScalable(b, 1<<21, 0.01, 2, false)
	n := mustNewCounting(b, 1<<19, 0.01, 4)
	d := mustNewDLeft(b, 1<<20, 0.01, 4)
	c := mustNewCuckoo(b, CuckooConfig{Capacity: 1 << 21, BucketSize: 4, FingerprintBits: 12})
	c8 := mustNewCuckoo(b, CuckooConfig{Capacity: 1 << 22, Expansion: 1})
	for i := range 1 << 19 {
		item := fmt.Appendf(nil, "bench-%d", i)
		_, _ = bl.Add(item)
		n.Add(item)
		d.Add(item)
		_ = c.Add(item)
		_ = c8.Add(item)
	}
	return []Filter{bl, n, d, c, c8}
}
