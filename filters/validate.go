package filters

import (
	"fmt"
	"math/bits"
)

// What each kind's payload must satisfy (check.go): how its arrays are cut into
// lanes, and which counters their totals must agree with. Every rule here holds
// of any filter that this package's operations built, whatever they were, so a
// faithful dump always loads; a payload that breaks one was not built by them.

func (b *Bloom) lanesOf(int) lanes {
	return lanes{width: 64, n: b.m / 64, used: b.m, class: bitWords}
}

// verify: every Add that counted set between 1 and k bits, and nothing else sets
// any (Union adds counts as it adds bits), so the set bits lie in [1, k*count]
// when count > 0 and are none when it is 0.
func (b *Bloom) verify(totals []tally) error { return b.verifyOnes(totals[0].lanes, false) }

// verifyOnes checks ones set bits against the count. A scalable filter's
// sub-filter is never a Union, and each item it counted set at least one bit
// clear before: chained requires at least count bits.
func (b *Bloom) verifyOnes(ones uint64, chained bool) error {
	switch {
	case ones > satMul(uint64(b.k), b.count):
		return fmt.Errorf("%w: bloom has %d bits set, more than %d items set with %d hashes", ErrCorrupt, ones, b.count, b.k)
	case (ones == 0) != (b.count == 0):
		return fmt.Errorf("%w: bloom has %d bits set and %d items", ErrCorrupt, ones, b.count)
	case chained && ones < b.count:
		return fmt.Errorf("%w: bloom sub-filter has %d bits set for %d items", ErrCorrupt, ones, b.count)
	}
	return nil
}

func (b *Bloom) settle(totals []tally) { b.ones = totals[0].lanes }

func (s *Scalable) lanesOf(seg int) lanes { return s.filters[seg].lanesOf(0) }

func (s *Scalable) verify(totals []tally) error {
	for i, f := range s.filters {
		if err := f.verifyOnes(totals[i].lanes, true); err != nil {
			return fmt.Errorf("sub-filter %d: %w", i, err)
		}
	}
	return nil
}

func (s *Scalable) settle(totals []tally) {
	for i, f := range s.filters {
		f.ones = totals[i].lanes
	}
}

// checkChain checks a decoded chain against the rules that Add grows it by: the
// first sub-filter at firstRate, each next one with expansion times the capacity
// and half the rate, every sub-filter but the newest holding exactly its capacity
// (the chain grows only when the newest is full), and the newest at most its own.
// So Count and Capacity, sums over at most 1024 sub-filters of at most 2^53 each,
// never overflow.
func (s *Scalable) checkChain() error {
	for i, f := range s.filters {
		rate, capacity := s.firstRate(s.rate), f.capacity
		if i > 0 {
			prev := s.filters[i-1]
			hi, lo := bits.Mul64(prev.capacity, uint64(s.expansion))
			rate, capacity = prev.rate*tighteningRatio, lo
			if hi != 0 {
				capacity = 0
			}
		}
		switch last := i == len(s.filters)-1; {
		case f.rate != rate || f.capacity != capacity:
			return fmt.Errorf("%w: scalable sub-filter %d: capacity %d, rate %v; the chain gives %d, %v",
				ErrCorrupt, i, f.capacity, f.rate, capacity, rate)
		case f.count > f.capacity || !last && f.count != f.capacity:
			return fmt.Errorf("%w: scalable sub-filter %d of %d holds %d items for a capacity of %d",
				ErrCorrupt, i, len(s.filters), f.count, f.capacity)
		}
	}
	return nil
}

// sumCounters4 and sumCounters8 return the sum of a word of packed 4- and 8-bit
// counters and how many are saturated. Padding counters are zero.
func sumCounters4(v uint64) (sum, sat uint64) {
	x := v&0x0F0F0F0F0F0F0F0F + v>>4&0x0F0F0F0F0F0F0F0F // bytes of at most 30
	return x * 0x0101010101010101 >> 56, uint64(bits.OnesCount64(v & (v >> 1) & (v >> 2) & (v >> 3) & 0x1111111111111111))
}

func sumCounters8(v uint64) (sum, sat uint64) {
	x := v&0x00FF00FF00FF00FF + v>>8&0x00FF00FF00FF00FF // 16-bit lanes of at most 510
	return x * 0x0001000100010001 >> 48, 8 - nonZeroBytes(^v)
}

func (c *Counting) lanesOf(int) lanes {
	l := lanes{width: 64, n: countingWords(c.m, c.lgPer), used: c.m << c.lgBits, class: nibbleCounters}
	if c.bits == 8 {
		l.class = byteCounters
	}
	return l
}

// verify: until some counter saturates, every add has added exactly k to the
// counters and every delete taken at most k away, so they sum to at least
// k*items. A saturated counter stops counting for good, and after one no bound
// holds (an item added a million times saturates its counters at 15 each).
func (c *Counting) verify(totals []tally) error {
	t := totals[0]
	if t.sat == 0 && t.sum < satMul(uint64(c.k), c.items) {
		return fmt.Errorf("%w: counters sum to %d, less than %d items of %d hashes", ErrCorrupt, t.sum, c.items, c.k)
	}
	return nil
}

func (c *Counting) settle([]tally) {}

// lanesOf: the cells of every sub-table, then the overflow bits. A cell is
// remainder<<c | counter, and a free cell (counter 0) is all zero: a cell that
// has a remainder and no count is odd.
func (f *DLeft) lanesOf(seg int) lanes {
	if seg == 1 {
		return lanes{width: 64, n: f.flags.len(), used: f.buckets, class: bitWords}
	}
	n := uint64(f.tables) * f.buckets * uint64(f.cellsPer)
	return lanes{width: f.cellBits, n: n, used: n * f.cellBits, class: cells, cmax: f.cmax}
}

// verify: until a counter saturates or an insert overflows, every add adds one to
// exactly one counter and every delete takes one from exactly one, so the
// counters sum to items. Both are for good, and after either no bound holds.
func (f *DLeft) verify(totals []tally) error {
	cells, flags := totals[0], totals[1]
	if cells.sat == 0 && flags.lanes == 0 && cells.sum != f.items {
		return fmt.Errorf("%w: d-left counters sum to %d for %d items", ErrCorrupt, cells.sum, f.items)
	}
	return nil
}

func (f *DLeft) settle(totals []tally) { f.overflow = totals[1].lanes != 0 }

// lanesOf: a sub-filter's fingerprints, f bits each, 0 for an empty slot. Every
// other f-bit value is a fingerprint some item has, in any bucket, so none is
// odd. Fingerprints of 8 and 16 bits are counted a word at a time.
func (c *Cuckoo) lanesOf(seg int) lanes {
	t := &c.subs[seg]
	used := t.m * t.b * t.f
	switch t.f {
	case 8:
		return lanes{width: 64, n: cuckooTableWords(t.m, t.b, t.f), used: used, class: byteWords}
	case 16:
		return lanes{width: 64, n: cuckooTableWords(t.m, t.b, t.f), used: used, class: wydeWords}
	}
	return lanes{width: t.f, n: t.m * t.b, used: used, class: fpLanes}
}

// verify: every successful Add stores one fingerprint and counts it, every
// successful Delete removes one and uncounts it, and evictions only move them, so
// the filter holds exactly items fingerprints. A filter holding more would let
// deletes of items never added take the count below zero.
func (c *Cuckoo) verify(totals []tally) error {
	n := uint64(0)
	for _, t := range totals {
		n += t.lanes
	}
	if n != c.items {
		return fmt.Errorf("%w: cuckoo holds %d fingerprints for %d items", ErrCorrupt, n, c.items)
	}
	return nil
}

func (c *Cuckoo) settle([]tally) {}
