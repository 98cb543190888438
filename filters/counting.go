package filters

import (
	"fmt"
	"io"
	"math"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Counting is a counting Bloom filter (Fan, Cao, Almeida, Broder, "Summary Cache",
// 2000): a Bloom filter whose bits are small counters, so that items can be deleted.
// An item increments its k counters; a lookup is positive when none of them is zero.
//
// Counters are packed 16 to a word (4 bits, the default) or 8 to a word (8 bits). A
// counter that reaches its maximum (15 or 255) saturates: it is never incremented
// or decremented again, because after an overflow it no longer knows how many items
// share it, and decrementing it could one day zero it under an item that is still
// present. Saturation trades a little false-positive rate for never producing a
// false negative; at the designed load a 4-bit counter saturates with probability
// about 1e-16.
type Counting struct {
	capacity uint64
	rate     float64
	bits     uint8  // counter width: 4 or 8
	lgBits   uint8  // log2(bits)
	lgPer    uint8  // log2(counters per word)
	perMask  uint64 // counters per word - 1
	max      uint64 // saturated counter value
	m        uint64 // counters
	k        int    // hashes
	items    uint64 // adds minus successful deletes
	counters paged

	loadable
}

const (
	// countingParamVersion is the first byte of a Counting's params.
	countingParamVersion = 1
	// countingOverhead is the fixed per-filter memory MemoryBytes adds to the arrays.
	countingOverhead = 96
	// countingMaxCapacity bounds the capacity a Counting accepts.
	countingMaxCapacity = 1 << 40
	// countingMaxHashes bounds k. Even the smallest positive float64 error rate
	// (2^-1074) needs only about 1075 hashes.
	countingMaxHashes = 1100
)

// countingLayout returns log2(bits) and log2(counters per word) for a counter width,
// and false for an unsupported width.
func countingLayout(bits uint8) (lgBits, lgPer uint8, ok bool) {
	switch bits {
	case 4:
		return 2, 4, true
	case 8:
		return 3, 3, true
	}
	return 0, 0, false
}

// countingWords returns the words that m counters of the given width occupy.
func countingWords(m uint64, lgPer uint8) uint64 {
	per := uint64(1) << lgPer
	return (m + per - 1) / per
}

// countingMaxCounters is the most counters whose words fit one encoding's payload.
func countingMaxCounters(lgPer uint8) uint64 {
	return (maxPayloadBytes / 8) << lgPer
}

// countingGeometry sizes a Counting like a classic Bloom filter: m = -n ln p / (ln 2)^2
// counters and k = round((m/n) ln 2) hashes. The maths runs through detLn and
// explicitly rounded products, so every replica computes the same m and k.
func countingGeometry(capacity uint64, errorRate float64, counterBits uint8) (m uint64, k int, err error) {
	if capacity < 1 || capacity > countingMaxCapacity {
		return 0, 0, errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", capacity, uint64(countingMaxCapacity))
	}
	if !(errorRate > 0 && errorRate < 1) {
		return 0, 0, errdetail.New(ErrBadParam, "error rate %v must lie in (0, 1)", errorRate)
	}
	_, lgPer, ok := countingLayout(counterBits)
	if !ok {
		return 0, 0, errdetail.New(ErrBadParam, "counter bits %d must be 4 or 8", counterBits)
	}
	n := float64(capacity)
	mf := math.Ceil(float64(float64(n*-detLn(errorRate)) / float64(ln2*ln2)))
	if !(mf <= float64(countingMaxCounters(lgPer))) {
		return 0, 0, tooLarge(float64(mf * float64(counterBits)))
	}
	m = max(uint64(mf), 1)
	kf := math.Floor(float64(float64(float64(m)/n)*ln2) + 0.5)
	k = int(min(max(kf, 1), countingMaxHashes))
	return m, k, nil
}

// NewCounting returns an empty counting Bloom filter sized to hold capacity items at
// a false-positive rate of errorRate, with counters of counterBits bits (4 or 8).
func NewCounting(capacity uint64, errorRate float64, counterBits uint8) (*Counting, error) {
	m, k, err := countingGeometry(capacity, errorRate, counterBits)
	if err != nil {
		return nil, err
	}
	c := newCountingShape(capacity, errorRate, counterBits, m, k)
	c.counters = newPaged(countingWords(m, c.lgPer))
	return c, nil
}

// newCountingShape returns a Counting with its geometry set and no arrays. The
// caller has validated the parameters.
func newCountingShape(capacity uint64, errorRate float64, bits uint8, m uint64, k int) *Counting {
	lgBits, lgPer, _ := countingLayout(bits)
	return &Counting{
		capacity: capacity,
		rate:     errorRate,
		bits:     bits,
		lgBits:   lgBits,
		lgPer:    lgPer,
		perMask:  uint64(1)<<lgPer - 1,
		max:      uint64(1)<<bits - 1,
		m:        m,
		k:        k,
	}
}

// CountingBytes reports the MemoryBytes of a new Counting with these parameters,
// without allocating it. It returns the same errors as NewCounting.
func CountingBytes(capacity uint64, errorRate float64, counterBits uint8) (uint64, error) {
	m, _, err := countingGeometry(capacity, errorRate, counterBits)
	if err != nil {
		return 0, err
	}
	_, lgPer, _ := countingLayout(counterBits)
	return pagedBytes(countingWords(m, lgPer)) + countingOverhead, nil
}

// slot returns the word and bit shift of counter i.
func (c *Counting) slot(i uint64) (w uint64, shift uint64) {
	return i >> c.lgPer, (i & c.perMask) << c.lgBits
}

// position returns the counter the i-th hash of d selects.
func (c *Counting) position(d Digest, i int) uint64 {
	return reduce(d.probe(uint64(i)), c.m)
}

// Add inserts item and reports whether it was absent before (its count was 0).
func (c *Counting) Add(item []byte) bool { return c.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (c *Counting) AddDigest(d Digest) bool {
	// One pass: the minimum of the values read before incrementing is the item's
	// count before the add. A position that repeats reads its own increment the
	// second time, which is larger and never lowers the minimum.
	least := c.max
	for i := range c.k {
		w, sh := c.slot(c.position(d, i))
		v := c.counters.at(w) >> sh & c.max
		least = min(least, v)
		if v < c.max {
			*c.counters.ref(w) += 1 << sh
		}
	}
	if c.items < math.MaxUint64 {
		c.items++
	}
	return least == 0
}

// Delete removes one occurrence of item. It returns false, changing nothing, when
// the item is not present (some counter is zero). Deleting an item that was never
// added but tests positive (a false positive) succeeds and can cause false
// negatives for other items; callers delete only what they added.
func (c *Counting) Delete(item []byte) bool { return c.DeleteDigest(Hash(item)) }

// DeleteDigest is Delete for an item already hashed.
func (c *Counting) DeleteDigest(d Digest) bool {
	// An empty filter holds nothing, even if saturated counters remain from items
	// deleted since; refusing here also keeps Items from wrapping below zero.
	if c.items == 0 || !c.TestDigest(d) {
		return false
	}
	for i := range c.k {
		w, sh := c.slot(c.position(d, i))
		// Saturated counters stay. A counter can reach zero before the last of
		// several probes that share it only if the item was never added (its own
		// add put at least that many there), so the guard just prevents underflow.
		if v := c.counters.at(w) >> sh & c.max; v > 0 && v < c.max {
			*c.counters.ref(w) -= 1 << sh
		}
	}
	c.items--
	return true
}

// Test reports whether item may be in the filter. It never returns false for an
// item that was added and not deleted since.
func (c *Counting) Test(item []byte) bool { return c.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed.
func (c *Counting) TestDigest(d Digest) bool {
	for i := range c.k {
		w, sh := c.slot(c.position(d, i))
		if c.counters.at(w)>>sh&c.max == 0 {
			return false
		}
	}
	return true
}

// Count returns an upper bound of item's multiplicity: its smallest counter (the
// "minimum selection" estimate of Cohen and Matias, "Spectral Bloom Filters", 2003).
// Once a counter saturates the bound is the saturated value, which may be smaller
// than the true multiplicity.
func (c *Counting) Count(item []byte) uint64 { return c.CountDigest(Hash(item)) }

// CountDigest is Count for an item already hashed.
func (c *Counting) CountDigest(d Digest) uint64 {
	least := c.max
	for i := range c.k {
		w, sh := c.slot(c.position(d, i))
		least = min(least, c.counters.at(w)>>sh&c.max)
		if least == 0 {
			break
		}
	}
	return least
}

// Items returns the number of adds minus the number of successful deletes.
func (c *Counting) Items() uint64 { return c.items }

// Capacity returns the number of items the filter was sized for.
func (c *Counting) Capacity() uint64 { return c.capacity }

// ErrorRate returns the false-positive rate the filter was sized for.
func (c *Counting) ErrorRate() float64 { return c.rate }

// CounterBits returns the width of each counter: 4 or 8.
func (c *Counting) CounterBits() uint8 { return c.bits }

// Counters returns m, the number of counters.
func (c *Counting) Counters() uint64 { return c.m }

// Hashes returns k, the number of counters each item touches.
func (c *Counting) Hashes() int { return c.k }

// Kind returns KindCounting.
func (c *Counting) Kind() Kind { return KindCounting }

// MemoryBytes returns the memory the filter occupies: its counters, their page
// table and a fixed overhead.
func (c *Counting) MemoryBytes() uint64 { return c.counters.bytes() + countingOverhead }

// Clone returns an independent copy of the filter.
func (c *Counting) Clone() *Counting {
	cp := *c
	cp.counters = c.counters.clone()
	return &cp
}

// Fork returns a copy of c that shares its counters, page by page, until one
// of the two writes a page (Fork in fork.go).
func (c *Counting) Fork() *Counting {
	cp := *c
	cp.counters = c.counters.fork()
	return &cp
}

// WriteTo streams the filter's encoding to w.
func (c *Counting) WriteTo(w io.Writer) (int64, error) { return Encode(w, c) }

// ReadFrom replaces the filter with the one encoded in r, which must be a Counting.
func (c *Counting) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindCounting)
	if err != nil {
		return n, err
	}
	*c = *f.(*Counting)
	return n, nil
}

func (c *Counting) params() []byte {
	var w paramWriter
	w.byte(countingParamVersion)
	w.uint(c.capacity)
	w.float(c.rate)
	w.byte(c.bits)
	w.uint(c.m)
	w.uint(uint64(c.k))
	w.uint(c.items)
	return w.bytesOut()
}

func (c *Counting) payload() []*paged { return []*paged{&c.counters} }

func init() { registerDecoder(KindCounting, decodeCounting) }

// decodeCounting parses a Counting's params. m and k are stored rather than
// recomputed, so a future change of sizing still reads old encodings; each is
// range-checked on its own.
func decodeCounting(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != countingParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: counting params version %d", ErrVersion, v)
	}
	capacity := r.uintIn("capacity", 1, countingMaxCapacity)
	rate := r.rate()
	bits := r.byte()
	_, lgPer, ok := countingLayout(bits)
	if r.Err() == nil && !ok {
		r.Fail(fmt.Sprintf("counter bits %d", bits))
	}
	m := r.uintIn("counters", 1, countingMaxCounters(lgPer))
	k := r.uintIn("hashes", 1, countingMaxHashes)
	items := r.uint()
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	c := newCountingShape(capacity, rate, bits, m, int(k))
	c.items = items
	words := countingWords(m, lgPer)
	install := func(segs []paged) error {
		if len(segs) != 1 || segs[0].len() != words {
			return fmt.Errorf("%w: counting payload length", ErrCorrupt)
		}
		c.counters = segs[0]
		return nil
	}
	return c, []int{int(words)}, install, nil
}
