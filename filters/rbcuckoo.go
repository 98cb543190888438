package filters

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// RBCuckoo is RedisBloom's cuckoo filter, bit for bit: the same hash, the same
// bytes in the same places, the same choices on insert, delete and compaction,
// so that a dump taken from a Redis with RedisBloom (CF.SCANDUMP) loads into it
// and then answers every CF.EXISTS and CF.COUNT, and takes every later write,
// exactly as RedisBloom would, and its own dump loads back into RedisBloom.
//
// An item is hashed with MurmurHash64A, seed 0, to h. Its fingerprint is one
// byte, fp = h mod 255 + 1 (never 0, which marks an empty slot); its buckets in
// a sub-filter of nb buckets (a power of two) are h mod nb and
// (h ^ fp*0x5bd1e995) mod nb, so each is the other's alternate. A bucket is bs
// consecutive bytes. The filter grows by sub-filters, sub-filter i having
// Buckets() * Expansion()^i buckets, and it is a multiset: adding an item twice
// stores two copies.
//
// It differs from Cuckoo (this package's own layout) in every choice that
// RedisBloom makes differently: power-of-two bucket counts, 8-bit fingerprints
// only, alternate indexes that are not consistent across sub-filters of
// different sizes, and deletes that compact the filter when they pass a tenth
// of its items. DESIGN.md ("RedisBloom's cuckoo filter") says why it exists.
//
// The zero value is not usable; use NewRBCuckoo or NewRBCuckooFromHeader.
type RBCuckoo struct {
	subs       []rbcSub // oldest first; never empty
	numBuckets uint64   // buckets of the first sub-filter, a power of two
	bucketSize uint64   // 1..255
	maxIter    uint64   // 1..65535
	expansion  uint64   // 0, or a power of two up to 32768
	items      uint64   // RedisBloom's numItems
	deletes    uint64   // RedisBloom's numDeletes: deletes since the last compaction

	loadable
	growable
}

// Limits of an RBCuckoo. RedisBloom's are its configuration ranges (cf-bucket-size,
// cf-max-iterations, cf-expansion-factor); RBCuckooMaxFilters and the size limit
// are ours.
const (
	// RBCuckooMaxFilters is the most sub-filters an RBCuckoo holds. RedisBloom
	// refuses CF.ADD and CF.INSERT once a filter has cf-max-expansions
	// sub-filters (RBCuckooMaxExpansions by default), checked before a command
	// rather than per insert, so one CF.INSERT may take a filter past it;
	// RedisBloom itself stops at 65535. This bound leaves room for such a
	// command to grow a filter by another 32 sub-filters, and keeps every
	// lookup to at most 128 buckets and a compaction to at most 64 passes over
	// the filter. An insert that would need more fails as RedisBloom's fails
	// when it cannot allocate (ErrRBCuckooGrow), and a header with more is
	// refused.
	RBCuckooMaxFilters = 64
	// RBCuckooMaxExpansions is RedisBloom's default cf-max-expansions: a
	// filter with this many sub-filters takes no more CF.ADD or CF.INSERT
	// (CheckExpansions).
	RBCuckooMaxExpansions = 32

	rbcMaxBucketSize = 255
	rbcMaxIter       = 65535
	rbcMaxExpansion  = 32768
	// rbcMaxNumBuckets is RedisBloom's CF_MAX_NUM_BUCKETS: a sub-filter's
	// bucket count is a 56-bit field.
	rbcMaxNumBuckets = 1<<56 - 1
	// rbcScanDumpBytes is RedisBloom's MAX_SCANDUMP_SIZE: the most bytes one
	// CF.SCANDUMP chunk of a large sub-filter carries.
	rbcScanDumpBytes = 16 << 20
	// rbcOverhead and rbcSubOverhead are the fixed memory MemoryBytes counts
	// for the filter and for each sub-filter.
	rbcOverhead    = 96
	rbcSubOverhead = 64
)

// Errors of an RBCuckoo. Those a client sees carry RedisBloom's reply in their
// doc comment, so that a server answers with its exact string.
var (
	// ErrRBCuckooGrow reports an insert that found no room and could not add a
	// sub-filter: RBCuckooMaxFilters reached, or the next sub-filter too large.
	// RedisBloom fails an insert so when it cannot allocate the sub-filter:
	// CF.ADD answers "ERR Insufficient memory", CF.INSERT -1 for that item. It
	// wraps ErrFull.
	ErrRBCuckooGrow = fmt.Errorf("%w: no room for another sub-filter", ErrFull)
	// ErrRBCuckooMaxExpansions reports a filter with the most sub-filters that
	// CF.ADD and CF.INSERT accept: "Maximum expansions reached".
	ErrRBCuckooMaxExpansions = errors.New("filters: maximum expansions reached")
)

// rbcShape is a validated geometry: the first sub-filter's buckets, the bucket
// size, the expansion and the number of sub-filters.
type rbcShape struct {
	nb, bs, expansion uint64
	filters           uint64
}

// subBuckets returns the bucket count of sub-filter i, nb * expansion^i, and
// whether it is within limits. Expansion is 0 or a power of two.
func (s rbcShape) subBuckets(i uint64) (uint64, bool) {
	if i == 0 {
		return s.nb, true // pow(0, 0) is 1 in RedisBloom too
	}
	if s.expansion == 0 {
		return 0, false
	}
	shift := i * uint64(bits.TrailingZeros64(s.expansion))
	if shift >= 64 || s.nb > (maxPayloadBytes/s.bs)>>shift {
		return 0, false
	}
	return s.nb << shift, true
}

// words returns the words all sub-filters take, or false if they exceed the
// payload limit.
func (s rbcShape) words() (uint64, bool) {
	total := uint64(0)
	for i := range s.filters {
		nb, ok := s.subBuckets(i)
		if !ok {
			return 0, false
		}
		total += rbcWords(nb * s.bs)
		if total > maxPayloadBytes/8 {
			return 0, false
		}
	}
	return total, true
}

// memoryBytes returns the MemoryBytes of a filter of this shape; the shape's
// words are within limits.
func (s rbcShape) memoryBytes() uint64 {
	n := uint64(rbcOverhead)
	for i := range s.filters {
		nb, _ := s.subBuckets(i)
		n += rbcSubOverhead + pagedBytes(rbcWords(nb*s.bs))
	}
	return n
}

// rbcNextPow2 is RedisBloom's getNextN2: the smallest power of two >= n, with
// 0 for 0 (and for n above 2^63, where it wraps).
func rbcNextPow2(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return 1 << (64 - bits.LeadingZeros64(n-1))
}

// rbcReserve validates NewRBCuckoo's arguments and returns its shape.
func rbcReserve(capacity uint64, bucketSize, maxIterations, expansion uint16) (rbcShape, error) {
	bs := uint64(bucketSize)
	switch {
	case bs < 1 || bs > rbcMaxBucketSize:
		return rbcShape{}, errdetail.New(ErrBadParam, "bucket size %d out of range [1, %d]", bs, rbcMaxBucketSize)
	case maxIterations < 1:
		return rbcShape{}, errdetail.New(ErrBadParam, "max iterations must be at least 1")
	case expansion > rbcMaxExpansion:
		return rbcShape{}, errdetail.New(ErrBadParam, "expansion %d out of range [0, %d]", expansion, rbcMaxExpansion)
	case capacity < 2*bs:
		return rbcShape{}, errdetail.New(ErrBadParam, "capacity %d below twice the bucket size", capacity)
	case capacity/bs > maxPayloadBytes/bs:
		// Checked first: rounding capacity/bs up to a power of two may wrap.
		return rbcShape{}, tooLarge(math.Ldexp(float64(bs)*8, bits.Len64(capacity/bs-1)))
	}
	s := rbcShape{nb: max(rbcNextPow2(capacity/bs), 1), bs: bs, expansion: rbcNextPow2(uint64(expansion)), filters: 1}
	if s.nb*bs > maxPayloadBytes {
		return rbcShape{}, tooLarge(float64(s.nb*bs) * 8)
	}
	return s, nil
}

// NewRBCuckoo returns an empty filter as RedisBloom's CF.RESERVE creates it:
// capacity/bucketSize buckets rounded up to a power of two (at least one), of
// bucketSize slots (1..255), at most maxIterations evictions per insert (at
// least 1), and expansion rounded up to a power of two (0..32768, 0: never
// grows). RedisBloom refuses a capacity below twice the bucket size; its
// command also bounds the capacity by cf-initial-size's maximum (2^30), which
// is the caller's to check.
func NewRBCuckoo(capacity uint64, bucketSize, maxIterations, expansion uint16) (*RBCuckoo, error) {
	s, err := rbcReserve(capacity, bucketSize, maxIterations, expansion)
	if err != nil {
		return nil, err
	}
	c := s.filter(uint64(maxIterations))
	c.subs = []rbcSub{newRBCSub(s.nb, s.bs)}
	return c, nil
}

// filter returns a filter of this shape without sub-filters.
func (s rbcShape) filter(maxIter uint64) *RBCuckoo {
	return &RBCuckoo{numBuckets: s.nb, bucketSize: s.bs, maxIter: maxIter, expansion: s.expansion}
}

// RBCuckooBytes reports the MemoryBytes of NewRBCuckoo(capacity, bucketSize,
// maxIterations, expansion), without allocating it. It returns the same errors.
func RBCuckooBytes(capacity uint64, bucketSize, maxIterations, expansion uint16) (uint64, error) {
	s, err := rbcReserve(capacity, bucketSize, maxIterations, expansion)
	if err != nil {
		return 0, err
	}
	return s.memoryBytes(), nil
}

// rbcKey is what every sub-filter needs of an item: RedisBloom's LookupParams.
type rbcKey struct {
	h1, h2, fp uint64
}

// rbcKeyOf hashes item as RedisBloom does.
func rbcKeyOf(item []byte) rbcKey {
	h := murmurHash64A(item, 0)
	fp := h%255 + 1
	return rbcKey{h1: h, h2: h ^ fp*rbcMurmurM, fp: fp}
}

// Add inserts a copy of item, as CF.ADD does. RedisBloom's order: a free slot in
// either bucket (first, then second) of any sub-filter, newest first; else
// evictions in the newest; else, if the filter may grow, a new sub-filter. It
// returns ErrFull, changing nothing, when there is no room and the expansion is
// 0, and ErrRBCuckooGrow when there is no room for another sub-filter.
func (c *RBCuckoo) Add(item []byte) error { return c.add(rbcKeyOf(item)) }

func (c *RBCuckoo) add(k rbcKey) error {
	for {
		for j := len(c.subs) - 1; j >= 0; j-- {
			s := &c.subs[j]
			if s.putFree(s.index(k.h1, c.bucketSize), c.bucketSize, k.fp) ||
				s.putFree(s.index(k.h2, c.bucketSize), c.bucketSize, k.fp) {
				c.items = satInc(c.items)
				return nil
			}
		}
		if c.subs[len(c.subs)-1].kickInsert(k.h1, k.fp, c.bucketSize, c.maxIter) {
			c.items = satInc(c.items)
			return nil
		}
		if c.expansion == 0 {
			return ErrFull
		}
		if err := c.grow(); err != nil {
			return err
		}
		// RedisBloom tries the whole insert again; the new sub-filter is
		// empty, so it takes the item in its first bucket.
	}
}

// shape returns the filter's geometry.
func (c *RBCuckoo) shape() rbcShape {
	return rbcShape{nb: c.numBuckets, bs: c.bucketSize, expansion: c.expansion, filters: uint64(len(c.subs))}
}

// nextSub returns the bucket count of the sub-filter the filter would add next,
// or false if it cannot add one.
func (c *RBCuckoo) nextSub() (uint64, bool) {
	if c.expansion == 0 || len(c.subs) >= RBCuckooMaxFilters {
		return 0, false
	}
	s := c.shape()
	s.filters++
	if _, ok := s.words(); !ok {
		return 0, false
	}
	return s.subBuckets(s.filters - 1)
}

// grow adds a sub-filter of Buckets() * Expansion()^Filters() buckets, as
// RedisBloom's CuckooFilter_Grow does.
func (c *RBCuckoo) grow() error {
	nb, ok := c.nextSub()
	if !ok {
		return ErrRBCuckooGrow
	}
	if !c.take(rbcSubOverhead + pagedBytes(rbcWords(nb*c.bucketSize))) {
		return ErrGrowthBudget
	}
	c.subs = append(c.subs, newRBCSub(nb, c.bucketSize))
	return nil
}

// AddNX adds item unless the filter may already hold it, as CF.ADDNX does, and
// reports whether it added it.
func (c *RBCuckoo) AddNX(item []byte) (bool, error) {
	k := rbcKeyOf(item)
	if c.test(k) {
		return false, nil
	}
	if err := c.add(k); err != nil {
		return false, err
	}
	return true, nil
}

// CheckExpansions returns ErrRBCuckooMaxExpansions if the filter has at least
// limit sub-filters (RedisBloom's cf-max-expansions, RBCuckooMaxExpansions by
// default). RedisBloom checks this once before each CF.ADD, CF.ADDNX,
// CF.INSERT and CF.INSERTNX, before any of its items.
func (c *RBCuckoo) CheckExpansions(limit int) error {
	if len(c.subs) >= limit {
		return ErrRBCuckooMaxExpansions
	}
	return nil
}

// Test reports whether item may be in the filter, as CF.EXISTS does. False
// means no copy of it is.
func (c *RBCuckoo) Test(item []byte) bool { return c.test(rbcKeyOf(item)) }

func (c *RBCuckoo) test(k rbcKey) bool {
	for j := range c.subs {
		s := &c.subs[j]
		if _, ok := s.find(s.index(k.h1, c.bucketSize), c.bucketSize, k.fp); ok {
			return true
		}
		if _, ok := s.find(s.index(k.h2, c.bucketSize), c.bucketSize, k.fp); ok {
			return true
		}
	}
	return false
}

// Count returns CF.COUNT of item: the slots holding its fingerprint in its two
// buckets of every sub-filter, an upper bound of its copies. When both of its
// buckets are the same bucket, RedisBloom counts that bucket twice, and so
// does Count.
func (c *RBCuckoo) Count(item []byte) uint64 {
	k := rbcKeyOf(item)
	n := uint64(0)
	for j := range c.subs {
		s := &c.subs[j]
		n += s.count(s.index(k.h1, c.bucketSize), c.bucketSize, k.fp) +
			s.count(s.index(k.h2, c.bucketSize), c.bucketSize, k.fp)
	}
	return n
}

// Delete removes one copy of item, as CF.DEL does, and reports whether it found
// one: the first slot holding its fingerprint in its first, then its second,
// bucket of the newest sub-filter that has one. Then, when the filter has more
// than one sub-filter and the deletes since the last compaction exceed a tenth
// of its items, it compacts the filter as RedisBloom does (Compact, stopping at
// the first sub-filter it cannot empty). Only delete items that were added.
//
// Items never goes below zero: a filter loaded from a header that claimed
// fewer items than it holds stops there, where RedisBloom's counter wraps.
func (c *RBCuckoo) Delete(item []byte) bool {
	k := rbcKeyOf(item)
	for j := len(c.subs) - 1; j >= 0; j-- {
		s := &c.subs[j]
		i, ok := s.find(s.index(k.h1, c.bucketSize), c.bucketSize, k.fp)
		if !ok {
			i, ok = s.find(s.index(k.h2, c.bucketSize), c.bucketSize, k.fp)
		}
		if !ok {
			continue
		}
		s.setByte(i, 0)
		if c.items > 0 {
			c.items--
		}
		c.deletes = satInc(c.deletes)
		// RedisBloom compares in double precision; so does this.
		if len(c.subs) > 1 && float64(c.deletes) > float64(c.items)*0.10 {
			c.compact(false)
		}
		return true
	}
	return false
}

// Compact is CF.COMPACT: it moves fingerprints from newer sub-filters into free
// slots of older ones and drops the newest sub-filter while it is empty, as
// RedisBloom's CuckooFilter_Compact does, and resets Deleted.
func (c *RBCuckoo) Compact() { c.compact(true) }

// compact visits the sub-filters from the newest to the second oldest. Each
// fingerprint moves to the first free slot of its first, then second, bucket
// in the oldest sub-filter that has one, its buckets there taken from its
// bucket index where it is: the item's own buckets when the sub-filters have
// power-of-two bucket counts. A sub-filter whose every fingerprint moved is
// dropped if it is the newest. When one keeps a fingerprint, the older ones
// cannot be dropped any more, and compact stops there unless cont is set.
func (c *RBCuckoo) compact(cont bool) {
	for j := len(c.subs) - 1; j > 0; j-- {
		if !c.compactSub(j) && !cont {
			break
		}
	}
	c.deletes = 0
}

// compactSub moves what it can of sub-filter j into older ones, bucket by
// bucket and slot by slot, and drops j if it is the newest and is left empty.
// It reports whether every fingerprint moved.
func (c *RBCuckoo) compactSub(j int) bool {
	s := &c.subs[j]
	all := true
	for w := range rbcWords(s.size) {
		x := s.words.at(w)
		for x != 0 {
			i := w*8 + uint64(bits.TrailingZeros64(x))/8
			x &^= 0xff << (i & 7 * 8)
			if !c.relocate(j, i) {
				all = false
			}
		}
	}
	if all && j == len(c.subs)-1 {
		c.subs[j] = rbcSub{}
		c.subs = c.subs[:j]
	}
	return all
}

// relocate moves the fingerprint in byte i of sub-filter j, not 0, into the
// oldest sub-filter with a free slot in its buckets (RedisBloom's relocateSlot)
// and reports whether it found one.
func (c *RBCuckoo) relocate(j int, i uint64) bool {
	s := &c.subs[j]
	fp := s.byteAt(i)
	b := i / c.bucketSize
	h2 := b ^ fp*rbcMurmurM
	for o := range c.subs[:j] {
		t := &c.subs[o]
		if t.putFree(t.index(b, c.bucketSize), c.bucketSize, fp) ||
			t.putFree(t.index(h2, c.bucketSize), c.bucketSize, fp) {
			s.setByte(i, 0)
			return true
		}
	}
	return false
}
