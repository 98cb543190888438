package filters

import (
	"fmt"
	"io"
	"math"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// DLeft is a d-left counting Bloom filter (Bonomi, Mitzenmacher, Panigrahy, Singh,
// Varghese, "An Improved Construction for Counting Bloom Filters", ESA 2006).
//
// It keeps d sub-tables of B buckets, each bucket holding h cells, each cell a
// remainder of r bits and a counter of 4 or 8 bits (a zero counter marks a free
// cell). An item's digest gives its true fingerprint F = (b, rem), b in [0, B) and
// rem in [0, 2^r). Sub-table t stores F as remainder rem in bucket
// (b + g_t(rem)) mod B, where g_t is a hash of the remainder: a permutation of the
// fingerprint space, since rem and the bucket give back b. Two fingerprints that
// share a (bucket, remainder) in any sub-table are therefore equal, and share all
// their candidates; that is what makes deletes exact (section 3 of the paper).
//
// An insert increments the cell holding the item's remainder in any of its d
// candidate buckets; failing that it takes a free cell in the least loaded
// candidate, ties going to the leftmost sub-table, which keeps the loads very even.
// Counters saturate like Counting's and a saturated counter is never decremented.
//
// If every candidate bucket is full the insert cannot be stored. Rather than lose
// the item (a false negative), the filter sets the overflow bit of the item's
// bucket in the first sub-table; lookups that find no cell consult that bit, so
// the item, and every item sharing that first-table bucket, tests positive from
// then on. Overflow bits are never cleared, exactly like a saturated counter: they
// trade false positives for never producing a false negative, and at the designed
// load they are essentially never set (see the package documentation).
type DLeft struct {
	capacity uint64
	rate     float64
	cbits    uint8  // counter bits: 4 or 8
	rbits    uint8  // remainder bits r
	tables   int    // d
	cellsPer int    // h, cells per bucket
	buckets  uint64 // B, buckets per sub-table
	items    uint64 // adds minus successful deletes
	// cells is one bit stream: sub-table t, bucket b, cell j starts at bit
	// ((t*B + b)*h + j) * (r + c). A cell is rem<<c | counter.
	cells paged
	// flags holds one overflow bit per bucket of the first sub-table.
	flags paged

	cellBits uint64 // r + c
	cellMask uint64 // low r+c bits
	cmax     uint64 // saturated counter, also the counter's mask
	overflow bool   // some overflow bit is set; derived from flags

	loadable
}

const (
	// dleftParamVersion is the first byte of a DLeft's params.
	dleftParamVersion = 1
	// dleftOverhead is the fixed per-filter memory MemoryBytes adds to the arrays.
	dleftOverhead = 128
	// dleftMaxCapacity bounds the capacity a DLeft accepts.
	dleftMaxCapacity = 1 << 40
	// dleftTables (d) and dleftCells (h) are the geometry new filters use, the
	// paper's own choice; decoders accept up to dleftMaxTables and dleftMaxCells.
	dleftTables    = 4
	dleftCells     = 8
	dleftMaxTables = 8
	dleftMaxCells  = 64
	// dleftLoad is the average number of items per bucket at capacity: 6 of 8
	// cells, a 75% load, at which d = 4 choices leave no bucket full in practice.
	dleftLoad = 6
	// dleftNoCell marks "no cell" where a bit offset is expected.
	dleftNoCell = math.MaxUint64
)

// dleftCounterOK reports whether bits is a supported counter width.
func dleftCounterOK(bits uint8) bool { return bits == 4 || bits == 8 }

// dleftWords returns the words of the cell stream and of the overflow bits.
func dleftWords(tables, cellsPer int, buckets uint64, cellBits uint64) (cells, flags uint64) {
	total := uint64(tables) * buckets * uint64(cellsPer) * cellBits
	return (total + 63) / 64, (buckets + 63) / 64
}

// dleftMaxBuckets is the most buckets per sub-table whose arrays fit one encoding.
func dleftMaxBuckets(tables, cellsPer int, cellBits uint64) uint64 {
	return (maxPayloadBytes*8 - 128) / (uint64(tables)*uint64(cellsPer)*cellBits + 1)
}

// dleftGeometry chooses the buckets per sub-table B and the remainder bits r for n
// items at false-positive rate p. A lookup of an absent item is positive only if
// its true fingerprint equals a stored one, so the rate is n / (B 2^r); it must not
// exceed p, and B must leave every bucket at most dleftLoad items on average. Among
// the r that satisfy both, the one with the fewest bits in total wins: a larger r
// costs bits in every cell, a smaller one needs more buckets, run emptier.
func dleftGeometry(capacity uint64, errorRate float64, counterBits uint8) (buckets uint64, rbits uint8, err error) {
	if capacity < 1 || capacity > dleftMaxCapacity {
		return 0, 0, errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", capacity, uint64(dleftMaxCapacity))
	}
	if !(errorRate > 0 && errorRate < 1) {
		return 0, 0, errdetail.New(ErrBadParam, "error rate %v must lie in (0, 1)", errorRate)
	}
	if !dleftCounterOK(counterBits) {
		return 0, 0, errdetail.New(ErrBadParam, "counter bits %d must be 4 or 8", counterBits)
	}
	n := float64(capacity)
	minBuckets := math.Ceil(n / (dleftTables * dleftLoad))
	bestCost, leastOver := math.Inf(1), math.Inf(1)
	for r := 1; r <= 64-int(counterBits); r++ {
		cellBits := uint64(r) + uint64(counterBits)
		// Ldexp scales by a power of two exactly; the division rounds the same way
		// on every replica.
		b := math.Max(math.Ceil(n/math.Ldexp(errorRate, r)), minBuckets)
		if !(b <= float64(dleftMaxBuckets(dleftTables, dleftCells, cellBits))) {
			leastOver = math.Min(leastOver, float64(b*float64(cellBits)))
			continue
		}
		if cost := float64(b * float64(cellBits)); cost < bestCost {
			bestCost, buckets, rbits = cost, uint64(b), uint8(r)
		}
	}
	if rbits == 0 {
		return 0, 0, tooLarge(float64(leastOver * dleftTables * dleftCells))
	}
	return buckets, rbits, nil
}

// NewDLeft returns an empty d-left counting Bloom filter sized to hold capacity
// items at a false-positive rate of errorRate, with counters of counterBits bits
// (4 or 8).
func NewDLeft(capacity uint64, errorRate float64, counterBits uint8) (*DLeft, error) {
	buckets, rbits, err := dleftGeometry(capacity, errorRate, counterBits)
	if err != nil {
		return nil, err
	}
	f := newDLeftShape(capacity, errorRate, counterBits, rbits, dleftTables, dleftCells, buckets)
	cw, fw := dleftWords(f.tables, f.cellsPer, f.buckets, f.cellBits)
	f.cells = newPaged(cw)
	f.flags = newPaged(fw)
	return f, nil
}

// newDLeftShape returns a DLeft with its geometry set and no arrays. The caller has
// validated the parameters.
func newDLeftShape(capacity uint64, errorRate float64, cbits, rbits uint8, tables, cellsPer int, buckets uint64) *DLeft {
	cellBits := uint64(rbits) + uint64(cbits)
	return &DLeft{
		capacity: capacity,
		rate:     errorRate,
		cbits:    cbits,
		rbits:    rbits,
		tables:   tables,
		cellsPer: cellsPer,
		buckets:  buckets,
		cellBits: cellBits,
		cellMask: ^uint64(0) >> (64 - cellBits),
		cmax:     uint64(1)<<cbits - 1,
	}
}

// DLeftBytes reports the MemoryBytes of a new DLeft with these parameters, without
// allocating it. It returns the same errors as NewDLeft.
func DLeftBytes(capacity uint64, errorRate float64, counterBits uint8) (uint64, error) {
	buckets, rbits, err := dleftGeometry(capacity, errorRate, counterBits)
	if err != nil {
		return 0, err
	}
	cw, fw := dleftWords(dleftTables, dleftCells, buckets, uint64(rbits)+uint64(counterBits))
	return pagedBytes(cw) + pagedBytes(fw) + dleftOverhead, nil
}

// fingerprint splits d into the true fingerprint (b, rem).
func (f *DLeft) fingerprint(d Digest) (b, rem uint64) {
	return reduce(d.H1, f.buckets), d.H2 >> (64 - f.rbits)
}

// candidate returns the bucket in sub-table t that holds fingerprint (b, rem):
// (b + g_t(rem)) mod B, a permutation of the fingerprint space for each t.
func (f *DLeft) candidate(t int, b, rem uint64) uint64 {
	g := reduce(mix64(rem+uint64(t+1)*0x9e3779b97f4a7c15), f.buckets)
	if b += g; b >= f.buckets {
		b -= f.buckets
	}
	return b
}

// bucketBit returns the bit offset of bucket b of sub-table t.
func (f *DLeft) bucketBit(t int, b uint64) uint64 {
	return (uint64(t)*f.buckets + b) * uint64(f.cellsPer) * f.cellBits
}

// cell reads the cell at bit offset off. A cell that straddles two words may
// straddle two pages; at reads each word from its own.
func (f *DLeft) cell(off uint64) uint64 {
	i, s := off>>6, off&63
	v := f.cells.at(i) >> s
	if s+f.cellBits > 64 {
		v |= f.cells.at(i+1) << (64 - s)
	}
	return v & f.cellMask
}

// setCell writes v, which fits in cellBits, at bit offset off.
func (f *DLeft) setCell(off, v uint64) {
	i, s := off>>6, off&63
	w := f.cells.ref(i)
	*w = *w&^(f.cellMask<<s) | v<<s
	if s+f.cellBits > 64 {
		hi := 64 - s
		w = f.cells.ref(i + 1)
		*w = *w&^(f.cellMask>>hi) | v>>hi
	}
}

// scan looks through the bucket at bit offset off, whose first word is first, for
// a cell holding rem. It returns that cell's offset (or dleftNoCell), and the number of
// occupied cells and the offset of the first free one (or dleftNoCell), which an insert
// needs when no cell matches.
func (f *DLeft) scan(off, first, rem uint64) (match uint64, load int, free uint64) {
	cells, width, mask, cmax := &f.cells, f.cellBits, f.cellMask, f.cmax
	want := rem << f.cbits
	free = dleftNoCell
	i, s := off>>6, off&63
	word := first
	for j := range uint64(f.cellsPer) {
		v := word >> s
		if s+width > 64 {
			v |= cells.at(i+1) << (64 - s)
		}
		switch {
		case v&cmax == 0:
			if free == dleftNoCell {
				free = off + j*width
			}
		case v&mask^want <= cmax:
			return off + j*width, load + 1, free
		default:
			load++
		}
		if s += width; s >= 64 {
			s -= 64
			// The next cell starts in the next word; after the bucket's last
			// cell that word may lie past the array.
			if i++; j+1 < uint64(f.cellsPer) {
				word = cells.at(i)
			}
		}
	}
	return dleftNoCell, load, free
}

// candidates returns the bit offset of each candidate bucket and its first word.
// Loading every bucket's first word before scanning any lets the d cache misses
// overlap instead of following one another.
func (f *DLeft) candidates(b, rem uint64) (offs, firsts [dleftMaxTables]uint64) {
	for t := range f.tables {
		offs[t] = f.bucketBit(t, f.candidate(t, b, rem))
		firsts[t] = f.cells.at(offs[t] >> 6)
	}
	return offs, firsts
}

// find returns the offset of the cell holding the fingerprint, or dleftNoCell.
func (f *DLeft) find(b, rem uint64) uint64 {
	offs, firsts := f.candidates(b, rem)
	for t := range f.tables {
		if m, _, _ := f.scan(offs[t], firsts[t], rem); m != dleftNoCell {
			return m
		}
	}
	return dleftNoCell
}

// flagged reports whether the overflow bit covering the fingerprint is set.
func (f *DLeft) flagged(b, rem uint64) bool {
	if !f.overflow {
		return false
	}
	c := f.candidate(0, b, rem)
	return f.flags.at(c>>6)>>(c&63)&1 != 0
}

// Add inserts item and reports whether it was absent before (Test was false).
func (f *DLeft) Add(item []byte) bool { return f.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (f *DLeft) AddDigest(d Digest) bool {
	b, rem := f.fingerprint(d)
	if f.items < math.MaxUint64 {
		f.items++
	}
	offs, firsts := f.candidates(b, rem)
	bestLoad, bestFree := f.cellsPer+1, uint64(dleftNoCell)
	for t := range f.tables {
		m, load, free := f.scan(offs[t], firsts[t], rem)
		if m != dleftNoCell {
			if v := f.cell(m); v&f.cmax < f.cmax {
				f.setCell(m, v+1)
			}
			return false
		}
		if load < bestLoad { // strictly less: ties go to the leftmost sub-table
			bestLoad, bestFree = load, free
		}
	}
	wasFlagged := f.flagged(b, rem)
	if bestFree != dleftNoCell {
		f.setCell(bestFree, rem<<f.cbits|1)
		return !wasFlagged
	}
	c := f.candidate(0, b, rem)
	*f.flags.ref(c >> 6) |= 1 << (c & 63)
	f.overflow = true
	return !wasFlagged
}

// Delete removes one occurrence of item. It returns false, changing nothing, when
// the item is not present (Test is false). An item held only by an overflow bit,
// like one whose counter saturated, is deleted without changing any cell and stays
// a (false) positive. Deleting an item that was never added but shares a stored
// fingerprint succeeds and takes that occurrence away from the item that owns it;
// callers delete only what they added.
func (f *DLeft) Delete(item []byte) bool { return f.DeleteDigest(Hash(item)) }

// DeleteDigest is Delete for an item already hashed.
func (f *DLeft) DeleteDigest(d Digest) bool {
	// An empty filter holds nothing, even if saturated cells remain; refusing here
	// also keeps Items from wrapping below zero.
	if f.items == 0 {
		return false
	}
	b, rem := f.fingerprint(d)
	m := f.find(b, rem)
	if m == dleftNoCell {
		// An item whose insert overflowed is present only through its overflow
		// bit, which cannot be cleared: like a saturated counter, the delete
		// succeeds and the item stays a (false) positive.
		if f.flagged(b, rem) {
			f.items--
			return true
		}
		return false
	}
	switch v := f.cell(m); {
	case v&f.cmax == f.cmax: // saturated: it no longer knows its count
	case v&f.cmax == 1:
		f.setCell(m, 0) // freed cells are all zero, so equal states encode equally
	default:
		f.setCell(m, v-1)
	}
	f.items--
	return true
}

// Test reports whether item may be in the filter. It never returns false for an
// item that was added and not deleted since.
func (f *DLeft) Test(item []byte) bool { return f.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed.
func (f *DLeft) TestDigest(d Digest) bool {
	b, rem := f.fingerprint(d)
	return f.find(b, rem) != dleftNoCell || f.flagged(b, rem)
}

// Count returns an upper bound of item's multiplicity: the counter of the cell
// holding its fingerprint. It is the saturated counter value when that counter
// saturated or when the item's overflow bit is set, since occurrences may then be
// missing from the count.
func (f *DLeft) Count(item []byte) uint64 { return f.CountDigest(Hash(item)) }

// CountDigest is Count for an item already hashed.
func (f *DLeft) CountDigest(d Digest) uint64 {
	b, rem := f.fingerprint(d)
	if f.flagged(b, rem) {
		return f.cmax
	}
	if m := f.find(b, rem); m != dleftNoCell {
		return f.cell(m) & f.cmax
	}
	return 0
}

// Items returns the number of adds minus the number of successful deletes.
func (f *DLeft) Items() uint64 { return f.items }

// Capacity returns the number of items the filter was sized for.
func (f *DLeft) Capacity() uint64 { return f.capacity }

// ErrorRate returns the false-positive rate the filter was sized for.
func (f *DLeft) ErrorRate() float64 { return f.rate }

// CounterBits returns the width of each cell's counter: 4 or 8.
func (f *DLeft) CounterBits() uint8 { return f.cbits }

// RemainderBits returns r, the fingerprint bits each cell stores.
func (f *DLeft) RemainderBits() uint8 { return f.rbits }

// Tables returns d, the number of sub-tables.
func (f *DLeft) Tables() int { return f.tables }

// Buckets returns B, the number of buckets in each sub-table.
func (f *DLeft) Buckets() uint64 { return f.buckets }

// CellsPerBucket returns h, the number of cells in each bucket.
func (f *DLeft) CellsPerBucket() int { return f.cellsPer }

// Overflowed reports whether some insert ever found all its candidate buckets full
// (and so raised the false-positive rate of part of the filter for good).
func (f *DLeft) Overflowed() bool { return f.overflow }

// Kind returns KindDLeft.
func (f *DLeft) Kind() Kind { return KindDLeft }

// MemoryBytes returns the memory the filter occupies: its cells and overflow
// bits, their page tables and a fixed overhead.
func (f *DLeft) MemoryBytes() uint64 {
	return f.cells.bytes() + f.flags.bytes() + dleftOverhead
}

// Clone returns an independent copy of the filter.
func (f *DLeft) Clone() *DLeft {
	cp := *f
	cp.cells = f.cells.clone()
	cp.flags = f.flags.clone()
	return &cp
}

// Fork returns a copy of f that shares its arrays, page by page, until one of
// the two writes a page (Fork in fork.go).
func (f *DLeft) Fork() *DLeft {
	cp := *f
	cp.cells = f.cells.fork()
	cp.flags = f.flags.fork()
	return &cp
}

// WriteTo streams the filter's encoding to w.
func (f *DLeft) WriteTo(w io.Writer) (int64, error) { return Encode(w, f) }

// ReadFrom replaces the filter with the one encoded in r, which must be a DLeft.
func (f *DLeft) ReadFrom(r io.Reader) (int64, error) {
	g, n, err := decodeInto(r, KindDLeft)
	if err != nil {
		return n, err
	}
	*f = *g.(*DLeft)
	return n, nil
}

func (f *DLeft) params() []byte {
	var w paramWriter
	w.byte(dleftParamVersion)
	w.uint(f.capacity)
	w.float(f.rate)
	w.byte(f.cbits)
	w.byte(f.rbits)
	w.uint(uint64(f.tables))
	w.uint(uint64(f.cellsPer))
	w.uint(f.buckets)
	w.uint(f.items)
	return w.bytesOut()
}

func (f *DLeft) payload() []*paged { return []*paged{&f.cells, &f.flags} }

func init() { registerDecoder(KindDLeft, decodeDLeft) }

// decodeDLeft parses a DLeft's params. The geometry is stored rather than
// recomputed, so a future change of sizing still reads old encodings; every value
// is range-checked, and the arrays' total size bounded, before anything is built.
func decodeDLeft(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != dleftParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: d-left params version %d", ErrVersion, v)
	}
	capacity := r.uintIn("capacity", 1, dleftMaxCapacity)
	rate := r.rate()
	cbits := r.byte()
	if r.Err() == nil && !dleftCounterOK(cbits) {
		r.Fail(fmt.Sprintf("counter bits %d", cbits))
	}
	rbits := r.byte()
	if r.Err() == nil && (rbits < 1 || int(rbits)+int(cbits) > 64) {
		r.Fail(fmt.Sprintf("remainder bits %d", rbits))
	}
	tables := r.uintIn("tables", 1, dleftMaxTables)
	cellsPer := r.uintIn("cells per bucket", 1, dleftMaxCells)
	cellBits := uint64(rbits) + uint64(cbits)
	buckets := uint64(0)
	if r.Err() == nil {
		buckets = r.uintIn("buckets", 1, dleftMaxBuckets(int(tables), int(cellsPer), cellBits))
	}
	items := r.uint()
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	f := newDLeftShape(capacity, rate, cbits, rbits, int(tables), int(cellsPer), buckets)
	f.items = items
	cw, fw := dleftWords(f.tables, f.cellsPer, f.buckets, f.cellBits)
	install := func(segs []paged) error {
		if len(segs) != 2 || segs[0].len() != cw || segs[1].len() != fw {
			return fmt.Errorf("%w: d-left payload length", ErrCorrupt)
		}
		f.cells, f.flags = segs[0], segs[1]
		return nil // overflow is set when the payload is checked (settle)
	}
	return f, []int{int(cw), int(fw)}, install, nil
}
