package filters

import (
	"fmt"
	"io"
	"math/bits"
	"slices"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Scalable is a scalable Bloom filter (Almeida, Baquero, Preguiça, Hutchison,
// "Scalable Bloom Filters", 2007) with RedisBloom's growth rules: a chain of Blooms
// of which only the newest takes new items. When the newest has taken its capacity
// of new items, the next new item starts a sub-filter with expansion times its
// capacity and half its error rate. The first sub-filter of a scaling filter gets
// half the requested rate, so the compound rate, at most p/2 + p/4 + ... , stays
// below the request however far the filter grows.
//
// A non-scaling filter (expansion 0, or nonScaling) is one Bloom at the requested
// rate that refuses new items with ErrFull once it holds its capacity.
type Scalable struct {
	filters    []*Bloom // oldest first; never empty
	rate       float64  // as requested
	expansion  uint32
	nonScaling bool

	loadable
	growable
}

const (
	// scalableParamVersion is the first byte of a Scalable's params.
	scalableParamVersion = 1
	// scalableOverhead is the fixed memory MemoryBytes adds for the chain itself.
	scalableOverhead = 64
	// scalableMaxExpansion is the largest expansion factor a Scalable accepts
	// (RedisBloom's limit).
	scalableMaxExpansion = 32768
	// scalableMaxFilters bounds the chain, so that the params of every sub-filter
	// (at most 36 bytes each) fit one encoding header. Halving the error rate each
	// time, the 1075th sub-filter's rate would underflow to 0 anyway.
	scalableMaxFilters = 1024
	// tighteningRatio is the factor between the error rates of consecutive
	// sub-filters (RedisBloom's ERROR_TIGHTENING_RATIO).
	tighteningRatio = 0.5
)

// NewScalable returns an empty scalable Bloom filter whose first sub-filter holds
// capacity items, with a compound false-positive rate below errorRate. expansion
// (at most 32768) multiplies each new sub-filter's capacity; expansion 0 makes the
// filter non-scaling, as nonScaling does.
func NewScalable(capacity uint64, errorRate float64, expansion uint32, nonScaling bool) (*Scalable, error) {
	if err := scalableCheck(capacity, errorRate, expansion); err != nil {
		return nil, err
	}
	s := &Scalable{rate: errorRate, expansion: expansion, nonScaling: nonScaling || expansion == 0}
	first, err := NewBloom(capacity, s.firstRate(errorRate))
	if err != nil {
		return nil, err
	}
	s.filters = []*Bloom{first}
	return s, nil
}

// scalableCheck validates the arguments of NewScalable. The error rate is checked
// before it is halved: 1.5 must not pass as a first sub-filter's 0.75.
func scalableCheck(capacity uint64, errorRate float64, expansion uint32) error {
	if expansion > scalableMaxExpansion {
		return errdetail.New(ErrBadParam, "expansion %d out of range [0, %d]", expansion, scalableMaxExpansion)
	}
	return bloomCheck(capacity, errorRate)
}

// firstRate returns the first sub-filter's error rate.
func (s *Scalable) firstRate(errorRate float64) float64 {
	if s.nonScaling {
		return errorRate
	}
	return errorRate * tighteningRatio
}

// ScalableBytes reports the MemoryBytes of a new Scalable with these parameters,
// without allocating it. It returns the same errors as NewScalable.
func ScalableBytes(capacity uint64, errorRate float64, expansion uint32, nonScaling bool) (uint64, error) {
	if err := scalableCheck(capacity, errorRate, expansion); err != nil {
		return 0, err
	}
	s := Scalable{nonScaling: nonScaling || expansion == 0}
	n, err := BloomBytes(capacity, s.firstRate(errorRate))
	if err != nil {
		return 0, err
	}
	return n + scalableOverhead, nil
}

// Add inserts item. It reports false, changing nothing, if any sub-filter may
// already hold it; else it adds the item to the newest sub-filter, first growing the
// chain if that one is full. A full non-scaling filter, or a chain that cannot grow
// (its next sub-filter would be too large, or its error rate underflow), returns
// ErrFull and changes nothing.
func (s *Scalable) Add(item []byte) (bool, error) { return s.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (s *Scalable) AddDigest(d Digest) (bool, error) {
	if s.TestDigest(d) {
		return false, nil
	}
	cur := s.filters[len(s.filters)-1]
	if cur.count >= cur.capacity {
		capacity, rate, err := s.next()
		if err != nil {
			return false, err
		}
		if n, err := BloomBytes(capacity, rate); err == nil && !s.take(n) {
			return false, ErrGrowthBudget
		}
		if cur, err = NewBloom(capacity, rate); err != nil {
			return false, fmt.Errorf("%w: next sub-filter: %v", ErrFull, err)
		}
		s.filters = append(s.filters, cur)
	}
	// No sub-filter holds the item, so some bit of it is clear and Add returns
	// true.
	return cur.AddDigest(d), nil
}

// next returns the capacity and error rate of the sub-filter the chain would add
// next, or ErrFull if it cannot grow.
func (s *Scalable) next() (uint64, float64, error) {
	if s.nonScaling {
		return 0, 0, ErrFull
	}
	if len(s.filters) >= scalableMaxFilters {
		return 0, 0, fmt.Errorf("%w: %d sub-filters", ErrFull, len(s.filters))
	}
	cur := s.filters[len(s.filters)-1]
	hi, capacity := bits.Mul64(cur.capacity, uint64(s.expansion))
	if hi != 0 || capacity > bloomMaxCapacity {
		return 0, 0, fmt.Errorf("%w: next sub-filter's capacity overflows", ErrFull)
	}
	rate := cur.rate * tighteningRatio
	if rate == 0 {
		return 0, 0, fmt.Errorf("%w: next sub-filter's error rate underflows", ErrFull)
	}
	return capacity, rate, nil
}

// Test reports whether item may be in the filter. False means it was never added.
func (s *Scalable) Test(item []byte) bool { return s.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed. It looks at the newest, largest
// sub-filter first, where most items are.
func (s *Scalable) TestDigest(d Digest) bool {
	for i := len(s.filters) - 1; i >= 0; i-- {
		if s.filters[i].TestDigest(d) {
			return true
		}
	}
	return false
}

// Count returns the number of items inserted: Adds that returned true (BF.CARD).
func (s *Scalable) Count() uint64 {
	var n uint64
	for _, f := range s.filters {
		n += f.count
	}
	return n
}

// Capacity returns the sum of the sub-filters' capacities.
func (s *Scalable) Capacity() uint64 {
	var n uint64
	for _, f := range s.filters {
		n += f.capacity
	}
	return n
}

// Filters returns the number of sub-filters.
func (s *Scalable) Filters() int { return len(s.filters) }

// Expansion returns the growth factor of the sub-filters' capacities, as given
// when the filter was created (0 for a filter created non-scaling that way).
func (s *Scalable) Expansion() uint32 { return s.expansion }

// Links returns the chain's Bloom filters, oldest first, for reading only.
func (s *Scalable) Links() []*Bloom { return slices.Clone(s.filters) }

// NonScaling reports whether the filter refuses to grow.
func (s *Scalable) NonScaling() bool { return s.nonScaling }

// ErrorRate returns the error rate requested when the filter was created.
func (s *Scalable) ErrorRate() float64 { return s.rate }

// NextGrowthBytes returns the memory the next sub-filter would take: what an Add
// of a new item costs when the newest sub-filter is full. It is 0 for a
// non-scaling filter and for a chain that cannot grow, whose Add returns ErrFull.
func (s *Scalable) NextGrowthBytes() uint64 {
	capacity, rate, err := s.next()
	if err != nil {
		return 0
	}
	n, err := BloomBytes(capacity, rate)
	if err != nil {
		return 0
	}
	return n
}

// Clone returns an independent copy of s.
func (s *Scalable) Clone() *Scalable {
	c := *s
	c.filters = make([]*Bloom, len(s.filters))
	for i, f := range s.filters {
		c.filters[i] = f.Clone()
	}
	return &c
}

// Fork returns a copy of s whose sub-filters share their bits with s's, page
// by page, until one of the two writes a page (Fork in fork.go).
func (s *Scalable) Fork() *Scalable {
	c := *s
	c.filters = make([]*Bloom, len(s.filters))
	for i, f := range s.filters {
		c.filters[i] = f.Fork()
	}
	return &c
}

// Kind returns KindScalable.
func (s *Scalable) Kind() Kind { return KindScalable }

// MemoryBytes returns the memory the filter occupies: every sub-filter's and a
// fixed overhead.
func (s *Scalable) MemoryBytes() uint64 {
	n := uint64(scalableOverhead)
	for _, f := range s.filters {
		n += f.MemoryBytes()
	}
	return n
}

// WriteTo streams the filter's encoding to w.
func (s *Scalable) WriteTo(w io.Writer) (int64, error) { return Encode(w, s) }

// ReadFrom replaces the filter with the one encoded in r, which must be a Scalable.
func (s *Scalable) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindScalable)
	if err != nil {
		return n, err
	}
	*s = *f.(*Scalable)
	return n, nil
}

func (s *Scalable) params() []byte {
	var w paramWriter
	w.byte(scalableParamVersion)
	w.float(s.rate)
	w.uint(uint64(s.expansion))
	w.bool(s.nonScaling)
	w.uint(uint64(len(s.filters)))
	for _, f := range s.filters {
		f.writeShape(&w)
	}
	return w.bytesOut()
}

// payload returns the sub-filters' bits, oldest first.
func (s *Scalable) payload() []*paged {
	segs := make([]*paged, len(s.filters))
	for i, f := range s.filters {
		segs[i] = &f.bits
	}
	return segs
}

func init() { registerDecoder(KindScalable, decodeScalable) }

// decodeScalable parses a Scalable's params: its own, then each sub-filter's shape
// as a Bloom's params hold it, range-checked the same way.
func decodeScalable(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != scalableParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: scalable params version %d", ErrVersion, v)
	}
	s := &Scalable{rate: r.rate()}
	s.expansion = uint32(r.uintIn("expansion", 0, scalableMaxExpansion))
	s.nonScaling = r.bool()
	maxFilters := uint64(scalableMaxFilters)
	if s.nonScaling {
		maxFilters = 1
	}
	nf := r.uintIn("sub-filters", 1, maxFilters)
	if r.Err() == nil && s.expansion == 0 && !s.nonScaling {
		r.Fail("expansion 0 on a scaling filter")
	}
	if r.Err() != nil {
		// uintIn returns the value it read even when out of range; it must not
		// size anything.
		return nil, nil, nil, r.Err()
	}
	lens := make([]int, 0, nf)
	for i := uint64(0); i < nf && r.Err() == nil; i++ {
		f := readBloomShape(r)
		s.filters = append(s.filters, f)
		lens = append(lens, int(f.m/64))
	}
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	if err := s.checkChain(); err != nil {
		return nil, nil, nil, err
	}
	install := func(segs []paged) error {
		if len(segs) != len(s.filters) {
			return fmt.Errorf("%w: scalable payload", ErrCorrupt)
		}
		for i, f := range s.filters {
			if err := f.install(segs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	return s, lens, install, nil
}
