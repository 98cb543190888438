package filters

import "math/bits"

// cuckooTable is one cuckoo hash table, a sub-filter of a Cuckoo: m buckets of b
// slots, each slot an f-bit fingerprint, 0 meaning empty. Slots are packed without
// gaps into 64-bit words: slot s of bucket i occupies bits [(i*b+s)*f, (i*b+s+1)*f)
// of the table, so memory is m*b*f bits whatever m is.
//
// Buckets of at most 64 bits (b*f <= 64; every bucket size that matters in
// practice) are read as one word and searched with SWAR tricks: all b
// fingerprints are compared with one subtraction and a few logical operations
// instead of a loop. When b*f divides 64 (b = 2 or 4 with 8- or 16-bit
// fingerprints, and b = 1 or 8 with 8-bit ones) a bucket never straddles two words
// and is a single shifted load. Wider buckets are searched slot by slot.
//
// The bucket index space is split in two so that the sub-filters of one Cuckoo,
// whose bucket counts are m0 * 2^(j*e), agree on which items share a bucket pair
// (see altIndex).
type cuckooTable struct {
	words paged
	m     uint64 // buckets
	m0    uint64 // buckets of the first sub-filter: the range of the coarse index
	shift uint64 // log2(m / m0): the bits of the fine index, below 64
	b     uint64 // slots per bucket
	f     uint64 // fingerprint bits
	w     uint64 // bits per bucket, b*f
	fmask uint64 // f one bits

	// SWAR constants for buckets of at most 64 bits: lo has the lowest bit of each
	// of the b lanes set, hi the highest, low the bits below each lane's highest;
	// bmask covers all b lanes.
	lo, hi, low, bmask uint64
	wide               bool // w > 64: search slot by slot
}

// cuckooKey is what every sub-filter needs of one item, derived once per
// operation from its Digest.
type cuckooKey struct {
	h1 uint64 // chooses the first bucket
	h2 uint64 // seeds the choice of eviction victims
	fp uint64 // the fingerprint, never 0
	hf uint64 // cuckooAltHash(fp, m0, f), m0 the first sub-filter's bucket count
}

// newCuckooKey returns the key of the f-bit fingerprint fp, for tables whose
// first sub-filter has m0 buckets.
func newCuckooKey(h1, h2, fp, m0, f uint64) cuckooKey {
	return cuckooKey{h1: h1, h2: h2, fp: fp, hf: cuckooAltHash(fp, m0, f)}
}

// cuckooTableWords returns the words a table of m buckets takes.
func cuckooTableWords(m, b, f uint64) uint64 { return (m*b*f + 63) / 64 }

// cuckooTableShape returns a table of m = m0 << shift buckets without its words:
// a decoder installs them once the payload has arrived. The caller has checked
// that its size is within limits.
func cuckooTableShape(m0, shift, b, f uint64) cuckooTable {
	t := cuckooTable{m0: m0, shift: shift, m: m0 << shift, b: b, f: f, w: b * f, fmask: 1<<f - 1}
	t.setShape()
	return t
}

// newCuckooTable returns an empty table of m = m0 << shift buckets.
func newCuckooTable(m0, shift, b, f uint64) cuckooTable {
	t := cuckooTableShape(m0, shift, b, f)
	t.words = newPaged(cuckooTableWords(t.m, b, f))
	return t
}

// setShape derives the SWAR constants and the access mode from b and f.
func (t *cuckooTable) setShape() {
	t.wide = t.w > 64
	if t.wide {
		return
	}
	t.lo = 0
	for s := uint64(0); s < t.b; s++ {
		t.lo |= 1 << (s * t.f)
	}
	t.hi = t.lo << (t.f - 1)
	t.low = t.hi - t.lo
	t.bmask = t.hi | t.low
}

// load returns bucket i's b fingerprints as lanes of one word, slot 0 lowest.
// Buckets wider than 64 bits have no such form.
func (t *cuckooTable) load(i uint64) uint64 {
	p := i * t.w
	k, off := p>>6, p&63
	x := t.words.at(k) >> off
	// Never taken when w divides 64, so predicted right every time. The two
	// words may lie in two pages; at reads each from its own.
	if off+t.w > 64 {
		x |= t.words.at(k+1) << ((64 - off) & 63)
	}
	return x & t.bmask
}

// lanesEqual returns, for a bucket x from load, the highest bit of every lane that
// holds v, and nothing else: the exact SWAR zero-lane test applied to x ^ v*lo.
// Adding low to a lane's lower bits carries into its highest bit exactly when
// they are not all zero, and never into the next lane.
func (t *cuckooTable) lanesEqual(x, v uint64) uint64 {
	y := x ^ v*t.lo
	return ^(((y & t.low) + t.low) | y | t.low) & t.hi
}

// hasLane2 reports whether some lane of bucket x1 or x2 holds v, with one branch
// rather than two: whether an item is found in its first or second bucket is a
// coin toss the branch predictor cannot learn. The has-zero-lane test here is
// cheaper than lanesEqual's: it may also flag a lane above a true match, through
// a borrow, but flags nothing when no lane matches, which is all a yes/no answer
// needs.
func (t *cuckooTable) hasLane2(x1, x2, v uint64) bool {
	vv := v * t.lo
	y1, y2 := x1^vv, x2^vv
	return ((y1-t.lo)&^y1|(y2-t.lo)&^y2)&t.hi != 0
}

// laneAt returns the f bits at bit position p.
func (t *cuckooTable) laneAt(p uint64) uint64 {
	k, off := p>>6, p&63
	x := t.words.at(k) >> off
	if off+t.f > 64 {
		x |= t.words.at(k+1) << ((64 - off) & 63)
	}
	return x & t.fmask
}

// setLaneAt stores v in the f bits at bit position p.
func (t *cuckooTable) setLaneAt(p, v uint64) {
	k, off := p>>6, p&63
	w := t.words.ref(k)
	*w = *w&^(t.fmask<<off) | v<<off
	if off+t.f > 64 {
		r := 64 - off // bits of the lane held by word k
		w = t.words.ref(k + 1)
		*w = *w&^(t.fmask>>r) | v>>r
	}
}

// laneBit converts a flag from lanesEqual in bucket i into the bit position of its
// lane: the flag is the lane's highest bit.
func (t *cuckooTable) laneBit(i, flags uint64) uint64 {
	return i*t.w + uint64(bits.TrailingZeros64(flags)) + 1 - t.f
}

// cuckooFineMul hashes a fingerprint for the fine part of a grown sub-filter's
// alternate index: one multiplication (Fibonacci hashing), whose top bits altFine
// uses. It is murmur3's 64-bit constant, odd.
const cuckooFineMul = 0xc2b2ae3d27d4eb4f

// cuckooAltHash returns h(fp) in [0, m0), to which the coarse indexes of fp's
// bucket pair sum: fp scaled linearly onto [0, m0). The fingerprint is already a
// uniform hash of the item, so scaling spreads pairs as evenly as hashing it
// again would, and costs one multiplication on the path of every lookup to its
// second bucket instead of several. fp < 2^16 and m0 < 2^40, so the product
// fits.
func cuckooAltHash(fp, m0, f uint64) uint64 { return fp * m0 >> (f & 63) }

// altIndex returns the other bucket of the pair holding fingerprint fp in bucket
// i. It is its own inverse: altIndex(altIndex(i, fp), fp) = i.
//
// In the first sub-filter (shift 0) it is Fan et al.'s partial-key cuckoo
// hashing with a subtraction instead of the XOR, which needs a power-of-two
// bucket count: i2 = (h(fp) - i) mod m0, h(fp) in [0, m0). Sub-filter j has
// m0 * 2^shift buckets; its index is a coarse part (the high bits, in [0, m0)),
// which takes the same subtraction, and a fine part of shift bits, which is XORed
// with the top shift bits of another hash of fp. Dropping the low fine bits of
// both buckets of a pair gives the pair of an older, smaller sub-filter, as
// reduce does for the first bucket, so two items that share a pair in a newer
// sub-filter share it in every older one. That is what makes deleting newest
// first safe: the copy removed may be another item's, but the deleted item's own
// copy then sits where that other item looks for it.
func (t *cuckooTable) altIndex(i, fp uint64) uint64 {
	return t.alt(i, cuckooAltHash(fp, t.m0, t.f), fp)
}

// alt is altIndex given h = cuckooAltHash(fp, m0, f), the same in every
// sub-filter, so an operation computes it once (cuckooKey.hf).
func (t *cuckooTable) alt(i, h, fp uint64) uint64 {
	if t.shift != 0 {
		return t.altFine(i, h, fp)
	}
	return t.altFirst(i, h)
}

// altFirst is alt for the first sub-filter: (h - i) mod m0, without a branch.
// Both are below m0 < 2^63, so the difference wraps to a negative int64 exactly
// when m0 must be added.
func (t *cuckooTable) altFirst(i, h uint64) uint64 {
	i2 := h - i
	return i2 + t.m0&uint64(int64(i2)>>63)
}

// altFine is alt for a grown sub-filter: the coarse part as in the first, the
// fine part XORed with the top bits of another hash of fp. Shift counts are
// masked with 63 so the compiler drops its guards for counts of 64 and more.
//
//go:noinline
func (t *cuckooTable) altFine(i, h, fp uint64) uint64 {
	c2 := h - i>>(t.shift&63)
	c2 += t.m0 & uint64(int64(c2)>>63)
	fine := (i ^ (fp*cuckooFineMul)>>((64-t.shift)&63)) & (1<<(t.shift&63) - 1)
	return c2<<(t.shift&63) | fine
}

// indexes returns the bucket pair of k.
func (t *cuckooTable) indexes(k *cuckooKey) (uint64, uint64) {
	i1 := reduce(k.h1, t.m)
	return i1, t.alt(i1, k.hf, k.fp)
}

// contains reports whether either bucket of k holds its fingerprint.
func (t *cuckooTable) contains(k *cuckooKey) bool {
	// indexes, written out here and in putFree and remove, where a call would
	// cost more than the arithmetic: alt does not inline because of altFine.
	i1 := reduce(k.h1, t.m)
	var i2 uint64
	if t.shift == 0 {
		i2 = t.altFirst(i1, k.hf)
	} else {
		i2 = t.altFine(i1, k.hf, k.fp)
	}
	// Both loads are issued before either is examined, so the two cache misses
	// of an absent item overlap.
	if t.w == 64 {
		// A bucket is a word (4 slots of 16 bits, or 8 of 8): load's general
		// shifts and masks are not needed.
		return t.hasLane2(t.words.at(i1), t.words.at(i2), k.fp)
	}
	if !t.wide {
		return t.hasLane2(t.load(i1), t.load(i2), k.fp)
	}
	return t.wideFind(i1, k.fp) || t.wideFind(i2, k.fp)
}

// count returns the copies of k's fingerprint in its buckets, counting a bucket
// once when both are the same.
func (t *cuckooTable) count(k *cuckooKey) uint64 {
	i1, i2 := t.indexes(k)
	n := t.countIn(i1, k.fp)
	if i2 != i1 {
		n += t.countIn(i2, k.fp)
	}
	return n
}

func (t *cuckooTable) countIn(i, fp uint64) uint64 {
	if !t.wide {
		return uint64(bits.OnesCount64(t.lanesEqual(t.load(i), fp)))
	}
	n := uint64(0)
	for p := i * t.w; p < (i+1)*t.w; p += t.f {
		if t.laneAt(p) == fp {
			n++
		}
	}
	return n
}

// wideFind reports whether bucket i, wider than 64 bits, holds fp.
func (t *cuckooTable) wideFind(i, fp uint64) bool {
	for p := i * t.w; p < (i+1)*t.w; p += t.f {
		if t.laneAt(p) == fp {
			return true
		}
	}
	return false
}

// replaceIn stores to in the first slot of bucket i holding from, and reports
// whether there was one. With from 0 it puts a fingerprint in a free slot; with
// to 0 it deletes one.
func (t *cuckooTable) replaceIn(i, from, to uint64) bool {
	if !t.wide {
		flags := t.lanesEqual(t.load(i), from)
		if flags == 0 {
			return false
		}
		t.setLaneAt(t.laneBit(i, flags), to)
		return true
	}
	for p := i * t.w; p < (i+1)*t.w; p += t.f {
		if t.laneAt(p) == from {
			t.setLaneAt(p, to)
			return true
		}
	}
	return false
}

// replacePair is replaceIn on bucket i1, else on i2. Both buckets are loaded
// before either is examined, so their cache misses overlap: right for a delete,
// which finds its fingerprint in either bucket as often.
func (t *cuckooTable) replacePair(i1, i2, from, to uint64) bool {
	if t.wide {
		return t.replaceIn(i1, from, to) || t.replaceIn(i2, from, to)
	}
	var x1, x2 uint64
	if t.w == 64 {
		x1, x2 = t.words.at(i1), t.words.at(i2)
	} else {
		x1, x2 = t.load(i1), t.load(i2)
	}
	if flags := t.lanesEqual(x1, from); flags != 0 {
		t.setLaneAt(t.laneBit(i1, flags), to)
		return true
	}
	if flags := t.lanesEqual(x2, from); flags != 0 {
		t.setLaneAt(t.laneBit(i2, flags), to)
		return true
	}
	return false
}

// putFree stores k's fingerprint in a free slot of its first bucket, else of its
// second, and reports whether there was one. One bucket at a time: the first
// has room for most inserts, so the second bucket is not even computed, and a
// second load issued in parallel would still cost a TLB miss and memory
// bandwidth.
func (t *cuckooTable) putFree(k *cuckooKey) bool {
	i1 := reduce(k.h1, t.m)
	if t.w == 64 {
		// putIn, written out for the first bucket: most inserts end here.
		x := t.words.at(i1)
		if flags := t.lanesEqual(x, 0); flags != 0 {
			t.words.set(i1, x|k.fp<<(uint64(bits.TrailingZeros64(flags))+1-t.f))
			return true
		}
	} else if t.replaceIn(i1, 0, k.fp) {
		return true
	}
	var i2 uint64
	if t.shift == 0 {
		i2 = t.altFirst(i1, k.hf)
	} else {
		i2 = t.altFine(i1, k.hf, k.fp)
	}
	return t.putIn(i2, k.fp)
}

// putIn stores fp in a free slot of bucket i and reports whether there was one.
// A bucket that is a whole word takes a short path: the free lane is zero, so an
// OR fills it.
func (t *cuckooTable) putIn(i, fp uint64) bool {
	if t.w != 64 {
		return t.replaceIn(i, 0, fp)
	}
	x := t.words.at(i)
	flags := t.lanesEqual(x, 0)
	if flags == 0 {
		return false
	}
	t.words.set(i, x|fp<<(uint64(bits.TrailingZeros64(flags))+1-t.f))
	return true
}

// remove deletes one copy of k's fingerprint from its first bucket, else its
// second, and reports whether there was one.
func (t *cuckooTable) remove(k *cuckooKey) bool {
	i1 := reduce(k.h1, t.m)
	var i2 uint64
	if t.shift == 0 {
		i2 = t.altFirst(i1, k.hf)
	} else {
		i2 = t.altFine(i1, k.hf, k.fp)
	}
	return t.replacePair(i1, i2, k.fp, 0)
}

// clone returns an independent copy of t.
func (t *cuckooTable) clone() cuckooTable {
	c := *t
	c.words = t.words.clone()
	return c
}

// fork returns a copy of t that shares its words, page by page, until one of
// the two writes a page.
func (t *cuckooTable) fork() cuckooTable {
	c := *t
	c.words = t.words.fork()
	return c
}
