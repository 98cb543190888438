package filters

import (
	"fmt"
	"io"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// CuckooConfig holds the parameters of a new Cuckoo. A zero BucketSize,
// FingerprintBits or MaxIterations takes the default; a zero Expansion means the
// filter never grows.
type CuckooConfig struct {
	// Capacity is the number of fingerprint slots of the first sub-filter, >= 1.
	// It gets ceil(Capacity/BucketSize) buckets, with no rounding to a power of
	// two. Inserts start to fail (or grow the filter) before every slot is used:
	// at 65-75% of them with the defaults (2 slots, 20 evictions), about 85% with
	// 2 slots and 500 evictions, about 97% with 4 slots and 500 evictions.
	Capacity uint64
	// BucketSize is the number of slots per bucket, 1..255, default 2.
	BucketSize int
	// FingerprintBits is the size of a fingerprint, 8 (default), 12 or 16. The
	// false-positive rate is about 2*BucketSize/2^FingerprintBits.
	FingerprintBits int
	// MaxIterations is how many evictions an insert tries before it gives up on
	// the newest sub-filter, 1..65535, default 20.
	MaxIterations int
	// Expansion multiplies the bucket count of each new sub-filter: sub-filter j
	// has Buckets() * Expansion^j buckets. 0 never grows; other values are rounded
	// up to a power of two, at most 32768.
	Expansion uint32
}

// MaxCuckooFilters is the most sub-filters a Cuckoo grows to.
const MaxCuckooFilters = 32

const (
	cuckooDefaultBucketSize    = 2
	cuckooDefaultFPBits        = 8
	cuckooDefaultMaxIterations = 20
	cuckooMaxBucketSize        = 255
	cuckooMaxIterations        = 65535
	cuckooMaxExpansion         = 32768
	// cuckooMaxWords bounds the words of all sub-filters together, so that the
	// encoding fits the codec's payload limit.
	cuckooMaxWords = maxPayloadBytes / 8
	// cuckooOverhead and cuckooTableOverhead are the fixed memory MemoryBytes
	// adds for the filter and for each sub-filter.
	cuckooOverhead      = 96
	cuckooTableOverhead = 128
	// cuckooParamVersion is the first byte of a Cuckoo's params.
	cuckooParamVersion = 1
)

// Cuckoo is a cuckoo filter (Fan, Andersen, Kaminsky, Mitzenmacher, "Cuckoo
// Filter: Practically Better Than Bloom", 2014) that grows by sub-filters as
// RedisBloom's does. It is a multiset of fingerprints: adding an item twice stores
// two copies, and deleting it once removes one.
//
// Delete only items that were added: deleting an item that was never added may
// remove another item's fingerprint, a false negative for that item.
type Cuckoo struct {
	subs       []cuckooTable // oldest first; never empty
	m0         uint64        // buckets of the first sub-filter
	capacity   uint64
	bucketSize uint64
	fpBits     uint64
	maxIter    int
	expansion  uint32 // a power of two, or 0
	items      uint64 // fingerprints held now
	deleted    uint64 // successful deletes

	loadable
	growable
}

// cuckooShape is a validated CuckooConfig with defaults applied.
type cuckooShape struct {
	capacity, b, f, m0 uint64
	maxIter            int
	expansion          uint32
}

// cuckooCheck validates cfg and applies the defaults.
func cuckooCheck(cfg CuckooConfig) (cuckooShape, error) {
	s := cuckooShape{capacity: cfg.Capacity, maxIter: cfg.MaxIterations}
	bs, fb := cfg.BucketSize, cfg.FingerprintBits
	if bs == 0 {
		bs = cuckooDefaultBucketSize
	}
	if fb == 0 {
		fb = cuckooDefaultFPBits
	}
	if s.maxIter == 0 {
		s.maxIter = cuckooDefaultMaxIterations
	}
	switch {
	case cfg.Capacity < 1:
		return s, errdetail.New(ErrBadParam, "capacity must be at least 1")
	case bs < 1 || bs > cuckooMaxBucketSize:
		return s, errdetail.New(ErrBadParam, "bucket size %d out of range [1, %d]", bs, cuckooMaxBucketSize)
	case fb != 8 && fb != 12 && fb != 16:
		return s, errdetail.New(ErrBadParam, "fingerprint bits %d, want 8, 12 or 16", fb)
	case s.maxIter < 1 || s.maxIter > cuckooMaxIterations:
		return s, errdetail.New(ErrBadParam, "max iterations %d out of range [1, %d]", s.maxIter, cuckooMaxIterations)
	case cfg.Expansion > cuckooMaxExpansion:
		return s, errdetail.New(ErrBadParam, "expansion %d out of range [0, %d]", cfg.Expansion, cuckooMaxExpansion)
	}
	s.b, s.f = uint64(bs), uint64(fb)
	s.m0 = cfg.Capacity / s.b
	if cfg.Capacity%s.b != 0 {
		s.m0++
	}
	if s.m0 > cuckooMaxBuckets(s.b, s.f, cuckooMaxWords) {
		return s, tooLarge(float64(s.m0) * float64(s.b*s.f))
	}
	s.expansion = cfg.Expansion
	if s.expansion > 1 {
		s.expansion = 1 << bits.Len32(s.expansion-1)
	}
	return s, nil
}

// cuckooMaxBuckets returns the most buckets a table of b slots of f bits may have
// in at most words words.
func cuckooMaxBuckets(b, f, words uint64) uint64 { return words * 64 / f / b }

// NewCuckoo returns an empty cuckoo filter with one sub-filter.
func NewCuckoo(cfg CuckooConfig) (*Cuckoo, error) {
	s, err := cuckooCheck(cfg)
	if err != nil {
		return nil, err
	}
	c := s.filter()
	c.subs = []cuckooTable{newCuckooTable(s.m0, 0, s.b, s.f)}
	return c, nil
}

// filter returns a Cuckoo of this shape without sub-filters.
func (s cuckooShape) filter() *Cuckoo {
	return &Cuckoo{m0: s.m0, capacity: s.capacity, bucketSize: s.b, fpBits: s.f, maxIter: s.maxIter, expansion: s.expansion}
}

// CuckooBytes reports the MemoryBytes of a new Cuckoo with this configuration,
// without allocating it. It returns the same errors as NewCuckoo.
func CuckooBytes(cfg CuckooConfig) (uint64, error) {
	s, err := cuckooCheck(cfg)
	if err != nil {
		return 0, err
	}
	return cuckooOverhead + cuckooTableOverhead + pagedBytes(cuckooTableWords(s.m0, s.b, s.f)), nil
}

// key derives what every sub-filter needs of an item. The fingerprint is the top
// f bits of H2 (H1 picks the bucket); 0 marks an empty slot, so a zero
// fingerprint becomes 1.
func (c *Cuckoo) key(d Digest) cuckooKey {
	fp := d.H2 >> (64 - c.fpBits)
	fp += (fp - 1) >> 63 // 0 becomes 1, without a branch
	return cuckooKey{h1: d.H1, h2: d.H2, fp: fp, hf: cuckooAltHash(fp, c.m0, c.fpBits)}
}

// Add inserts a copy of item. It returns ErrFull, changing nothing, when there is
// no room and the filter cannot grow.
func (c *Cuckoo) Add(item []byte) error { return c.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed. RedisBloom's order: a free slot in
// either bucket of any sub-filter, newest first; else evictions in the newest;
// else, if the filter may grow, a new sub-filter.
func (c *Cuckoo) AddDigest(d Digest) error {
	k := c.key(d)
	for j := len(c.subs) - 1; j >= 0; j-- {
		if c.subs[j].putFree(&k) {
			c.items = satInc(c.items)
			return nil
		}
	}
	if c.subs[len(c.subs)-1].kickInsert(&k, c.maxIter) {
		c.items = satInc(c.items)
		return nil
	}
	shift, err := c.nextShift()
	if err != nil {
		return err
	}
	if !c.take(cuckooTableOverhead + pagedBytes(cuckooTableWords(c.subs[0].m<<shift, c.bucketSize, c.fpBits))) {
		return ErrGrowthBudget
	}
	c.subs = append(c.subs, newCuckooTable(c.subs[0].m, shift, c.bucketSize, c.fpBits))
	// An empty table has room in either bucket.
	c.subs[len(c.subs)-1].putFree(&k)
	c.items = satInc(c.items)
	return nil
}

// nextShift returns log2 of the factor by which the next sub-filter has more
// buckets than the first, or ErrFull if the filter cannot grow.
func (c *Cuckoo) nextShift() (uint64, error) {
	n := uint64(len(c.subs))
	switch {
	case c.expansion == 0:
		return 0, ErrFull
	case n >= MaxCuckooFilters:
		return 0, fmt.Errorf("%w: %d sub-filters", ErrFull, n)
	}
	shift := n * uint64(bits.TrailingZeros32(c.expansion))
	used := uint64(0)
	for i := range c.subs {
		// From the bucket count, not len(words): a decoder asks before the
		// words exist.
		used += cuckooTableWords(c.subs[i].m, c.bucketSize, c.fpBits)
	}
	if used >= cuckooMaxWords {
		return 0, fmt.Errorf("%w: next sub-filter too large", ErrFull)
	}
	room := cuckooMaxBuckets(c.bucketSize, c.fpBits, cuckooMaxWords-used)
	if shift >= 64 || c.subs[0].m > room>>shift {
		return 0, fmt.Errorf("%w: next sub-filter too large", ErrFull)
	}
	return shift, nil
}

// AddNX adds item unless the filter may already hold it, and reports whether it
// added it.
func (c *Cuckoo) AddNX(item []byte) (bool, error) { return c.AddNXDigest(Hash(item)) }

// AddNXDigest is AddNX for an item already hashed.
func (c *Cuckoo) AddNXDigest(d Digest) (bool, error) {
	if c.TestDigest(d) {
		return false, nil
	}
	if err := c.AddDigest(d); err != nil {
		return false, err
	}
	return true, nil
}

// Test reports whether item may be in the filter. False means no copy of it is.
func (c *Cuckoo) Test(item []byte) bool { return c.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed. It looks at the newest
// sub-filter first.
func (c *Cuckoo) TestDigest(d Digest) bool {
	k := c.key(d)
	for j := len(c.subs) - 1; j >= 0; j-- {
		if c.subs[j].contains(&k) {
			return true
		}
	}
	return false
}

// Count returns an upper bound of the copies of item the filter holds: the
// fingerprints equal to its own in its buckets of every sub-filter.
func (c *Cuckoo) Count(item []byte) uint64 { return c.CountDigest(Hash(item)) }

// CountDigest is Count for an item already hashed.
func (c *Cuckoo) CountDigest(d Digest) uint64 {
	k := c.key(d)
	n := uint64(0)
	for j := range c.subs {
		n += c.subs[j].count(&k)
	}
	return n
}

// Delete removes one copy of item, looking in the newest sub-filter first, and
// reports whether it found one. Only delete items that were added.
func (c *Cuckoo) Delete(item []byte) bool { return c.DeleteDigest(Hash(item)) }

// DeleteDigest is Delete for an item already hashed.
func (c *Cuckoo) DeleteDigest(d Digest) bool {
	// The filter holds exactly Items fingerprints (checked whenever a payload
	// comes from outside), so an empty one finds none; refusing here first
	// keeps Items from ever wrapping below zero.
	if c.items == 0 {
		return false
	}
	k := c.key(d)
	for j := len(c.subs) - 1; j >= 0; j-- {
		if c.subs[j].remove(&k) {
			c.items--
			c.deleted = satInc(c.deleted)
			return true
		}
	}
	return false
}

// Compact moves fingerprints from newer sub-filters into free slots of older
// ones, newest first, and drops each newest sub-filter it empties, as
// RedisBloom's CF.COMPACT does after deletes have made room; it resets
// Deleted. Every item stays exactly as held: a fingerprint moves only into a
// bucket its item maps to in the older sub-filter (a grown sub-filter's index,
// shifted down by the difference of the shifts, is the older one's, and the
// alternate bucket follows from the fingerprint), so Test, Count and Delete
// answer as before.
func (c *Cuckoo) Compact() {
	for j := len(c.subs) - 1; j >= 1; j-- {
		t := &c.subs[j]
		emptied := true
		for b := uint64(0); b < t.m; b++ {
			for p := b * t.w; p < (b+1)*t.w; p += t.f {
				fp := t.laneAt(p)
				if fp == 0 {
					continue
				}
				if c.moveDown(j, b, fp) {
					t.setLaneAt(p, 0)
				} else {
					emptied = false
				}
			}
		}
		if emptied && j == len(c.subs)-1 {
			c.subs = c.subs[:j]
		}
	}
	c.deleted = 0
}

// moveDown puts fp, held in bucket b of sub-filter j, into a free slot of the
// oldest sub-filter with room in that item's buckets, and reports whether it
// found one.
func (c *Cuckoo) moveDown(j int, b, fp uint64) bool {
	from := &c.subs[j]
	h := cuckooAltHash(fp, c.m0, c.fpBits)
	for i := 0; i < j; i++ {
		t := &c.subs[i]
		bi := b >> (from.shift - t.shift)
		if t.putIn(bi, fp) || t.putIn(t.alt(bi, h, fp), fp) {
			return true
		}
	}
	return false
}

// Items returns the number of fingerprints the filter holds: adds minus deletes.
// It is never more than Slots.
func (c *Cuckoo) Items() uint64 { return c.items }

// Deleted returns the number of successful deletes. It stops at the largest
// uint64 rather than wrap.
func (c *Cuckoo) Deleted() uint64 { return c.deleted }

// Buckets returns the bucket count of the first sub-filter.
func (c *Cuckoo) Buckets() uint64 { return c.subs[0].m }

// Filters returns the number of sub-filters.
func (c *Cuckoo) Filters() int { return len(c.subs) }

// BucketSize returns the slots per bucket.
func (c *Cuckoo) BucketSize() int { return int(c.bucketSize) }

// FingerprintBits returns the bits of a fingerprint.
func (c *Cuckoo) FingerprintBits() int { return int(c.fpBits) }

// MaxIterations returns the most evictions one insert tries.
func (c *Cuckoo) MaxIterations() int { return c.maxIter }

// Expansion returns the growth factor of the sub-filters' bucket counts, rounded
// up to a power of two; 0 if the filter never grows.
func (c *Cuckoo) Expansion() uint32 { return c.expansion }

// Capacity returns the capacity the filter was created with.
func (c *Cuckoo) Capacity() uint64 { return c.capacity }

// Slots returns the fingerprint slots of all sub-filters.
func (c *Cuckoo) Slots() uint64 {
	n := uint64(0)
	for i := range c.subs {
		n += c.subs[i].m * c.bucketSize
	}
	return n
}

// TableBytes returns the bytes of the sub-filters' tables alone, without the
// page tables and the fixed overhead MemoryBytes adds.
func (c *Cuckoo) TableBytes() uint64 {
	n := uint64(0)
	for i := range c.subs {
		n += c.subs[i].words.len() * 8
	}
	return n
}

// NextGrowthBytes returns the memory the next sub-filter would take: what an Add
// costs when every sub-filter is full. It is 0 when the filter cannot grow, and
// such an Add returns ErrFull.
func (c *Cuckoo) NextGrowthBytes() uint64 {
	shift, err := c.nextShift()
	if err != nil {
		return 0
	}
	return cuckooTableOverhead + pagedBytes(cuckooTableWords(c.subs[0].m<<shift, c.bucketSize, c.fpBits))
}

// Clone returns an independent copy of c.
func (c *Cuckoo) Clone() *Cuckoo {
	d := *c
	d.subs = make([]cuckooTable, len(c.subs))
	for i := range c.subs {
		d.subs[i] = c.subs[i].clone()
	}
	return &d
}

// Fork returns a copy of c that shares its sub-filters' words, page by page,
// until one of the two writes a page (Fork in fork.go).
func (c *Cuckoo) Fork() *Cuckoo {
	d := *c
	d.subs = make([]cuckooTable, len(c.subs))
	for i := range c.subs {
		d.subs[i] = c.subs[i].fork()
	}
	return &d
}

// Kind returns KindCuckoo.
func (c *Cuckoo) Kind() Kind { return KindCuckoo }

// MemoryBytes returns the memory the filter occupies: its sub-filters' words,
// their page tables and a fixed overhead.
func (c *Cuckoo) MemoryBytes() uint64 {
	n := uint64(cuckooOverhead)
	for i := range c.subs {
		n += cuckooTableOverhead + c.subs[i].words.bytes()
	}
	return n
}

// WriteTo streams the filter's encoding to w.
func (c *Cuckoo) WriteTo(w io.Writer) (int64, error) { return Encode(w, c) }

// ReadFrom replaces the filter with the one encoded in r, which must be a Cuckoo.
func (c *Cuckoo) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindCuckoo)
	if err != nil {
		return n, err
	}
	*c = *f.(*Cuckoo)
	return n, nil
}

// params holds the configuration and counters; the sub-filters' sizes follow
// from the capacity, bucket size and expansion.
func (c *Cuckoo) params() []byte {
	var w paramWriter
	w.byte(cuckooParamVersion)
	w.uint(c.capacity)
	w.uint(c.bucketSize)
	w.uint(c.fpBits)
	w.uint(uint64(c.maxIter))
	w.uint(uint64(c.expansion))
	w.uint(uint64(len(c.subs)))
	w.uint(c.items)
	w.uint(c.deleted)
	return w.bytesOut()
}

// payload returns the sub-filters' words, oldest first.
func (c *Cuckoo) payload() []*paged {
	segs := make([]*paged, len(c.subs))
	for i := range c.subs {
		segs[i] = &c.subs[i].words
	}
	return segs
}

func init() { registerDecoder(KindCuckoo, decodeCuckoo) }

// decodeCuckoo parses a Cuckoo's params, range-checked as NewCuckoo checks its
// configuration, and the sub-filter count against the expansion and the size
// limit.
func decodeCuckoo(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != cuckooParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: cuckoo params version %d", ErrVersion, v)
	}
	var cfg CuckooConfig
	cfg.Capacity = r.uintIn("capacity", 1, 1<<63)
	cfg.BucketSize = int(r.uintIn("bucket size", 1, cuckooMaxBucketSize))
	cfg.FingerprintBits = int(r.uintIn("fingerprint bits", 8, 16))
	cfg.MaxIterations = int(r.uintIn("max iterations", 1, cuckooMaxIterations))
	cfg.Expansion = uint32(r.uintIn("expansion", 0, cuckooMaxExpansion))
	nf := r.uintIn("sub-filters", 1, MaxCuckooFilters)
	items, deleted := r.uint(), r.uint()
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	s, err := cuckooCheck(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: cuckoo params: %v", ErrCorrupt, err)
	}
	if s.expansion != cfg.Expansion {
		return nil, nil, nil, fmt.Errorf("%w: cuckoo expansion %d not a power of two", ErrCorrupt, cfg.Expansion)
	}
	// The tables get no words here: install brings them, once the payload has
	// arrived, so a hostile header cannot make the decoder allocate.
	c := s.filter()
	c.subs = []cuckooTable{cuckooTableShape(s.m0, 0, s.b, s.f)}
	for uint64(len(c.subs)) < nf {
		shift, err := c.nextShift()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%w: cuckoo sub-filters: %v", ErrCorrupt, err)
		}
		c.subs = append(c.subs, cuckooTableShape(s.m0, shift, s.b, s.f))
	}
	if items > c.Slots() {
		return nil, nil, nil, fmt.Errorf("%w: cuckoo items %d exceed slots %d", ErrCorrupt, items, c.Slots())
	}
	c.items, c.deleted = items, deleted
	lens := make([]int, len(c.subs))
	for i := range c.subs {
		lens[i] = int(cuckooTableWords(c.subs[i].m, s.b, s.f))
	}
	install := func(segs []paged) error {
		if len(segs) != len(c.subs) {
			return fmt.Errorf("%w: cuckoo payload", ErrCorrupt)
		}
		for i := range c.subs {
			if segs[i].len() != uint64(lens[i]) {
				return fmt.Errorf("%w: cuckoo sub-filter %d length", ErrCorrupt, i)
			}
			c.subs[i].words = segs[i]
		}
		return nil
	}
	return c, lens, install, nil
}
