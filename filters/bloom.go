package filters

import (
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// Bloom is a Bloom filter of m bits and k hashes, in one of two layouts chosen when
// it is created:
//
//   - blocked: the bits form 512-bit blocks, one cache line each. An item picks a
//     block from the high bits of H1 and sets k bits inside it, chosen from H2, so
//     an add or a lookup touches one cache line whatever k is.
//   - classic: the k bits spread over the whole array. It needs the fewest bits, and
//     is used when blocking would cost more than a quarter more memory (small
//     filters, where a block is a large share of the array, and very low error
//     rates, where unevenly loaded blocks dominate the false positives).
//
// Bloom keeps the number of set bits up to date as items are added, so the fill
// ratio behind ApproxCount and EstimatedFPP costs nothing to read.
type Bloom struct {
	capacity uint64
	rate     float64
	layout   uint8
	m        uint64 // bits: 64*len(bits)
	blocks   uint64 // 512-bit blocks; 0 for the classic layout
	k        int
	count    uint64 // Adds that returned true
	bits     paged

	// ones is the number of set bits, kept up to date by Add, Union and loads.
	ones uint64

	loadable
}

const (
	// Layouts of a Bloom's bit array, as they appear in its encoding.
	layoutClassic, layoutBlocked = 0, 1

	// bloomParamVersion is the first byte of a Bloom's params.
	bloomParamVersion = 1
	// bloomOverhead is the fixed per-filter memory MemoryBytes adds to the bits.
	bloomOverhead = 64
	// bloomMaxCapacity bounds a Bloom's capacity: float64 holds it exactly, and a
	// scalable filter's sum of capacities cannot overflow.
	bloomMaxCapacity = 1 << 53
	// bloomMaxBits is the most bits one encoding's payload holds.
	bloomMaxBits = maxPayloadBytes * 8
	// bloomMaxHashes bounds k. Even the smallest positive float64 error rate
	// (2^-1074) needs only about 1075 hashes.
	bloomMaxHashes = 1100

	blockBits  = 512 // one cache line
	blockWords = blockBits / 64
	// The blocked layout may take at most 5/4 of the classic layout's bits.
	blockedMaxNum, blockedMaxDen = 5, 4
	// blockedMaxHashes stops the search for a blocked geometry at error rates where
	// blocking always costs more than 5/4 of the classic size: from about
	// p = 5e-6, a classic k of 18, on.
	blockedMaxHashes = 20
)

// bloomGeometry is the shape of a Bloom's bit array.
type bloomGeometry struct {
	layout uint8
	m      uint64 // bits, a multiple of 64 (classic) or of 512 (blocked)
	k      int
}

// bloomCheck validates a capacity and error rate.
func bloomCheck(capacity uint64, errorRate float64) error {
	if capacity < 1 || capacity > bloomMaxCapacity {
		return errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", capacity, uint64(bloomMaxCapacity))
	}
	if !(errorRate > 0 && errorRate < 1) {
		return errdetail.New(ErrBadParam, "error rate %v must lie in (0, 1)", errorRate)
	}
	return nil
}

// bloomSize chooses the geometry for capacity items at errorRate: blocked if it
// takes at most 5/4 of the classic layout's bits, else classic.
func bloomSize(capacity uint64, errorRate float64) (bloomGeometry, error) {
	if err := bloomCheck(capacity, errorRate); err != nil {
		return bloomGeometry{}, err
	}
	classic, err := classicGeometry(capacity, errorRate)
	if err != nil {
		return bloomGeometry{}, err
	}
	// Both sizes are at most 2^39, so the products cannot overflow.
	if g, ok := blockedGeometry(capacity, errorRate); ok && g.m*blockedMaxDen <= classic.m*blockedMaxNum {
		return g, nil
	}
	return classic, nil
}

// classicGeometry sizes the classic layout: m = -n ln p / (ln 2)^2 bits, rounded up
// to whole words, and k = round((m/n) ln 2).
func classicGeometry(capacity uint64, errorRate float64) (bloomGeometry, error) {
	n := float64(capacity)
	mf := math.Ceil(float64(float64(n*-detLn(errorRate)) / float64(ln2*ln2)))
	words := math.Ceil(mf / 64)
	if !(words <= bloomMaxBits/64) {
		return bloomGeometry{}, tooLarge(mf)
	}
	m := max(uint64(words), 1) * 64
	kf := math.Floor(float64(float64(float64(m)/n)*ln2) + 0.5)
	return bloomGeometry{layout: layoutClassic, m: m, k: int(min(max(kf, 1), bloomMaxHashes))}, nil
}

// blockedGeometry sizes the blocked layout. Items fall into blocks unevenly, so the
// classic formula does not hold: the false-positive rate is the average over the
// Poisson distribution of a block's load (blockedModel). For each candidate k it finds
// the highest mean load per block that still meets errorRate, and keeps the k that
// allows the highest (ties go to the smaller k, which is faster). ok is false when
// no k meets errorRate within 5/4 of the classic size.
func blockedGeometry(capacity uint64, errorRate float64) (g bloomGeometry, ok bool) {
	perItem := float64(-detLn(errorRate)) / float64(ln2*ln2) // classic bits per item
	kc := int(math.Floor(float64(perItem*ln2) + 0.5))        // classic k
	if kc > blockedMaxHashes {
		return g, false
	}
	// Blocking must not take more than 5/4 of the classic bits per item, so the
	// mean load cannot be lower than loMin; it cannot beat the classic layout by
	// much, so 2x the classic load is a safe upper end.
	loMin := float64(blockBits / float64(perItem*blockedMaxNum/blockedMaxDen))
	hiMax := float64(2 * blockBits / perItem)
	if !(hiMax <= blockedMaxLoad) {
		return g, false // error rates near 1: a handful of bits per block
	}
	// The rate at a given load is unimodal in k, and the best blocked k is about
	// 0.85 times the classic one: start there and walk each way while the
	// carried load grows. A k that cannot beat the best load so far is dismissed
	// with one evaluation.
	k0 := max(1, (kc*7+4)/8)
	bestLoad, bestK := loMin, 0
	if l, ok := blockedLoad(k0, loMin, hiMax, errorRate); ok {
		bestLoad, bestK = l, k0
	}
	for _, dir := range []int{-1, 1} {
		for k := k0 + dir; k >= 1 && k <= kc+1; k += dir {
			l, ok := blockedLoad(k, bestLoad, hiMax, errorRate)
			if ok && (l > bestLoad || bestK == 0) {
				bestLoad, bestK = l, k
			} else if bestK != 0 {
				break // past the best k on this side
			}
		}
	}
	if bestK == 0 {
		return g, false
	}
	nb := math.Ceil(float64(capacity) / bestLoad)
	if !(nb <= bloomMaxBits/blockBits) {
		return g, false
	}
	return bloomGeometry{layout: layoutBlocked, m: max(uint64(nb), 1) * blockBits, k: bestK}, true
}

// blockedLoad returns the highest mean load per block, between lo and hi, at which
// k hashes meet errorRate; false if even lo is too much.
func blockedLoad(k int, lo, hi, errorRate float64) (float64, bool) {
	bm := newBlockedModel(k)
	if bm.fpr(lo) > errorRate {
		return 0, false
	}
	if bm.fpr(hi) <= errorRate {
		return hi, true
	}
	// 30 halvings of a range under 2.5x: the load to 3 parts in 1e9.
	for range 30 {
		mid := float64(float64(lo+hi) / 2)
		if bm.fpr(mid) <= errorRate {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}

// blockedMaxLoad bounds the mean load the sizing search tries: at error rates
// near 1 a block would hold hundreds of items setting a bit or two each.
const blockedMaxLoad = 600

// blockedModel is the false-positive rate of a blocked Bloom filter with k hashes as
// a function of its mean load per block, exact for k independent uniform positions
// per item and Poisson-distributed block loads (the number of items in one block
// of a large filter). A query whose k positions cover d distinct bits is a false
// positive when all d are set; after t = jk throws into B = 512 bits, by
// inclusion-exclusion over the bits left clear,
//
//	P(d given bits set) = sum_i (-1)^i C(d,i) (1 - i/B)^t.
//
// Averaging over d (the query's own positions may coincide) and over a Poisson(L)
// load j, whose generating function is E[w^j] = e^(-L(1-w)), gives
//
//	FPR(L) = sum_{i=0..k} c_i e^(-L a_i),  a_i = 1 - (1 - i/B)^k,
//	c_i = (-1)^i sum_{d>=i} P(d distinct) C(d,i).
//
// The simpler (1 - e^(-kj/B))^k per block underestimates the rate by a few percent
// at k = 9 to 12: the number of set bits in a 512-bit block varies enough that
// the k-th power of its average is not the average of its k-th power.
type blockedModel struct {
	k    int
	c, a [blockedMaxK + 1]float64
}

// blockedMaxK bounds k in the blocked layout; the sizing never goes near it.
const blockedMaxK = 32

// newBlockedModel computes the coefficients for 1 <= k <= blockedMaxK. Only +, -,
// *, / are used, each product rounded explicitly, so every replica computes the
// same model.
func newBlockedModel(k int) *blockedModel { return newBlockModel(k, blockBits) }

// newBlockModel is newBlockedModel for blocks of bits positions (a
// windowed Bloom's superblock has 504, wbloom.go).
func newBlockModel(k int, bits float64) *blockedModel {
	bm := &blockedModel{k: k}
	// dist[d]: the chance that k uniform positions cover exactly d distinct bits.
	var dist [blockedMaxK + 1]float64
	dist[0] = 1
	for t := 1; t <= k; t++ {
		for d := t; d >= 1; d-- {
			same := float64(float64(dist[d]*float64(d)) / bits)
			fresh := float64(float64(dist[d-1]*(bits-float64(d)+1)) / bits)
			dist[d] = same + fresh
		}
		dist[0] = 0
	}
	// binom holds row d of Pascal's triangle while d runs; its values are exact.
	var binom [blockedMaxK + 1]float64
	for d := 0; d <= k; d++ {
		for i := d; i >= 1; i-- {
			binom[i] += binom[i-1]
		}
		binom[0] = 1
		for i := 0; i <= d; i++ {
			bm.c[i] = bm.c[i] + float64(dist[d]*binom[i])
		}
	}
	for i := 0; i <= k; i++ {
		if i%2 == 1 {
			bm.c[i] = -bm.c[i]
		}
		bm.a[i] = 1 - powInt(float64(1-float64(i)/bits), k)
	}
	return bm
}

// fpr returns the false-positive rate at a mean load of load items per block.
// The alternating sum cancels to a few parts in 1e11 of 1, far below any error
// rate the blocked layout is chosen for; the result is clamped to [0, 1].
func (bm *blockedModel) fpr(load float64) float64 {
	sum := 0.0
	for i := 0; i <= bm.k; i++ {
		sum = sum + float64(bm.c[i]*detExp(float64(-load*bm.a[i])))
	}
	return min(max(sum, 0), 1)
}

// powInt returns x^n for n >= 0 by repeated squaring, in a fixed order of rounded
// products.
func powInt(x float64, n int) float64 {
	r := 1.0
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			r = float64(r * x)
		}
		x = float64(x * x)
	}
	return r
}

// NewBloom returns an empty Bloom filter sized to hold capacity items at a
// false-positive rate of at most errorRate.
func NewBloom(capacity uint64, errorRate float64) (*Bloom, error) {
	g, err := bloomSize(capacity, errorRate)
	if err != nil {
		return nil, err
	}
	b := newBloomShape(capacity, errorRate, g)
	b.bits = newPaged(g.m / 64)
	return b, nil
}

// newBloomShape returns a Bloom with its geometry set and no bits. The caller has
// validated the geometry.
func newBloomShape(capacity uint64, errorRate float64, g bloomGeometry) *Bloom {
	b := &Bloom{capacity: capacity, rate: errorRate, layout: g.layout, m: g.m, k: g.k}
	if g.layout == layoutBlocked {
		b.blocks = g.m / blockBits
	}
	return b
}

// BloomBytes reports the MemoryBytes of a new Bloom with these parameters, without
// allocating it. It returns the same errors as NewBloom.
func BloomBytes(capacity uint64, errorRate float64) (uint64, error) {
	g, err := bloomSize(capacity, errorRate)
	if err != nil {
		return 0, err
	}
	return pagedBytes(g.m/64) + bloomOverhead, nil
}

// Add inserts item and reports whether it was new: true if it set at least one bit
// (Guava's put). A false answer means the item, or a false positive, was present.
func (b *Bloom) Add(item []byte) bool { return b.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (b *Bloom) AddDigest(d Digest) bool {
	var set int
	if b.blocks != 0 {
		set = b.addBlocked(d)
	} else {
		set = b.addClassic(d)
	}
	b.ones += uint64(set)
	if set == 0 {
		return false
	}
	b.count = satInc(b.count)
	return true
}

// blockAt returns the first word of the block an item falls into, chosen by
// the high bits of H1.
func (b *Bloom) blockAt(d Digest) uint64 { return reduce(d.H1, b.blocks) * blockWords }

// blockMul is the multiplier of the in-block position sequence: odd, with well
// spread bits (2^64 / golden ratio).
const blockMul = 0x9e3779b97f4a7c15

// Positions inside a block come from H2, which the choice of block does not use:
// position i is the top 9 bits of H2 * blockMul^(i+1) (mod 2^64), the scheme
// RocksDB's cache-local Bloom filter uses on 32 bits. Plain double hashing,
// h + i*s, does not work inside 512 bits: each item's positions form an
// arithmetic progression, progressions of different items overlap in whole runs,
// and at k = 9 and 12 the measured false-positive rate came out 1.5x and 4.3x the
// rate of independent positions. Multiplicative positions measured within the
// statistical noise (1-2%) of independent ones at k = 6, 9 and 12.

// addBlocked sets the item's bits in its block and returns how many were clear. It
// builds the block's mask first, so the update is eight branch-free word operations
// whatever k is, and positions that coincide count once.
func (b *Bloom) addBlocked(d Digest) int {
	blk := b.bits.wblock(b.blockAt(d))
	h := d.H2
	var mask [blockWords]uint64
	for range b.k {
		h *= blockMul
		mask[h>>61] |= 1 << (h >> 55 & 63)
	}
	set := 0
	for i := range blockWords {
		set += bits.OnesCount64(mask[i] &^ blk[i])
		blk[i] |= mask[i]
	}
	return set
}

// addClassic sets the item's k bits, positions reduce(h1 + i*h2, m), and returns
// how many were clear.
func (b *Bloom) addClassic(d Digest) int {
	set := 0
	for i := range b.k {
		p := reduce(d.probe(uint64(i)), b.m)
		w, bit := p>>6, uint64(1)<<(p&63)
		if b.bits.at(w)&bit == 0 {
			*b.bits.ref(w) |= bit
			set++
		}
	}
	return set
}

// Test reports whether item may be in the filter. False means it was never added.
func (b *Bloom) Test(item []byte) bool { return b.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed.
func (b *Bloom) TestDigest(d Digest) bool {
	if b.blocks == 0 {
		return b.testClassic(d)
	}
	// All k words are in one cache line, loaded by the first read; testing every
	// bit without branching is cheaper than a mispredicted early exit.
	blk := b.bits.block(b.blockAt(d))
	h := d.H2
	ok := uint64(1)
	for range b.k {
		h *= blockMul
		ok &= blk[h>>61] >> (h >> 55 & 63)
	}
	return ok&1 != 0
}

// testClassic stops at the first clear bit: each probe is a likely cache miss.
func (b *Bloom) testClassic(d Digest) bool {
	for i := range b.k {
		p := reduce(d.probe(uint64(i)), b.m)
		if b.bits.at(p>>6)&(1<<(p&63)) == 0 {
			return false
		}
	}
	return true
}

// Count returns how many Adds returned true: the items inserted, less those that
// were false positives when added. It stops at the largest uint64 rather than
// wrap.
func (b *Bloom) Count() uint64 { return b.count }

// setBits returns the number of set bits.
func (b *Bloom) setBits() uint64 { return b.ones }

// fillLoad returns the mean number of items per block (blocked) or per bit
// (classic, in units of the whole array) that explains the fill ratio: the
// expected fraction of clear bits is e^-(load*(1-q)) for a block of Poisson(load)
// items each leaving a bit clear with chance q = (1-1/512)^k, and e^-(kn/m) in
// the classic layout (Swamidass and Baldi 2007). A full filter is treated as one
// with a single clear bit, the largest finite estimate.
func (b *Bloom) fillLoad() float64 {
	clear := float64(b.m - min(b.setBits(), b.m-1))
	lnZero := float64(detLn(clear) - detLn(float64(b.m)))
	if b.blocks != 0 {
		return float64(-lnZero / float64(1-powInt(1-1.0/blockBits, b.k)))
	}
	return float64(float64(-lnZero*float64(b.m)) / float64(b.k))
}

// ApproxCount estimates the number of distinct items added from the fill ratio:
// -(m/k) ln(1 - X/m) for X set bits in the classic layout (Swamidass and Baldi,
// "Mathematical correction for fingerprint similarity measures", 2007), and the
// same inversion of the Poisson block model in the blocked layout. It counts items
// added through Union too, once each.
func (b *Bloom) ApproxCount() uint64 {
	n := b.fillLoad()
	if b.blocks != 0 {
		n = float64(n * float64(b.blocks))
	}
	return uint64(math.Floor(n + 0.5))
}

// EstimatedFPP estimates the filter's current false-positive probability from its
// fill ratio: (X/m)^k in the classic layout, and the blocked formula at the load
// the fill ratio implies in the blocked layout.
func (b *Bloom) EstimatedFPP() float64 {
	if b.blocks != 0 {
		return newBlockedModel(b.k).fpr(b.fillLoad())
	}
	return powInt(float64(b.setBits())/float64(b.m), b.k)
}

// Union adds every item of o to b. The filters must have the same layout, number
// of bits and hashes (as filters created with the same capacity and error rate
// do); otherwise Union returns ErrIncompatible and changes nothing. Count becomes
// the sum of both counts, so items in both filters count twice.
func (b *Bloom) Union(o *Bloom) error {
	if b.layout != o.layout || b.m != o.m || b.k != o.k || b.bits.len() != o.bits.len() {
		return fmt.Errorf("%w: bloom %d bits, %d hashes, layout %d vs %d bits, %d hashes, layout %d",
			ErrIncompatible, b.m, b.k, b.layout, o.m, o.k, o.layout)
	}
	for p, src := range o.bits.pages {
		// A page that gains no bit is left alone, so a fork keeps sharing it.
		if !covers(b.bits.pages[p].w, src.w) {
			dst := b.bits.page(uint64(p))
			for i, w := range src.w {
				dst[i] |= w
			}
		}
	}
	b.ones = b.bits.popcount()
	if b.count += o.count; b.count < o.count {
		b.count = math.MaxUint64
	}
	return nil
}

// covers reports whether every bit set in src is set in dst.
func covers(dst, src []uint64) bool {
	for i, w := range src {
		if w&^dst[i] != 0 {
			return false
		}
	}
	return true
}

// Clone returns an independent copy of b.
func (b *Bloom) Clone() *Bloom {
	c := *b
	c.bits = b.bits.clone()
	return &c
}

// Fork returns a copy of b that shares its bits, page by page, until one of
// the two writes a page (Fork in fork.go).
func (b *Bloom) Fork() *Bloom {
	c := *b
	c.bits = b.bits.fork()
	return &c
}

// Capacity returns the number of items the filter was sized for.
func (b *Bloom) Capacity() uint64 { return b.capacity }

// ErrorRate returns the false-positive rate the filter was sized for.
func (b *Bloom) ErrorRate() float64 { return b.rate }

// Bits returns m, the size of the bit array.
func (b *Bloom) Bits() uint64 { return b.m }

// Hashes returns k, the number of bits each item sets.
func (b *Bloom) Hashes() int { return b.k }

// Blocked reports whether the filter uses the blocked (cache-line) layout.
func (b *Bloom) Blocked() bool { return b.blocks != 0 }

// Kind returns KindBloom.
func (b *Bloom) Kind() Kind { return KindBloom }

// MemoryBytes returns the memory the filter occupies: its bits, their page
// table and a fixed overhead.
func (b *Bloom) MemoryBytes() uint64 { return b.bits.bytes() + bloomOverhead }

// WriteTo streams the filter's encoding to w.
func (b *Bloom) WriteTo(w io.Writer) (int64, error) { return Encode(w, b) }

// ReadFrom replaces the filter with the one encoded in r, which must be a Bloom.
func (b *Bloom) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindBloom)
	if err != nil {
		return n, err
	}
	*b = *f.(*Bloom)
	return n, nil
}

func (b *Bloom) params() []byte {
	var w paramWriter
	w.byte(bloomParamVersion)
	b.writeShape(&w)
	return w.bytesOut()
}

// writeShape writes everything but the parameter version; a scalable filter
// writes its sub-filters with it.
func (b *Bloom) writeShape(w *paramWriter) {
	w.byte(b.layout)
	w.uint(b.capacity)
	w.float(b.rate)
	w.uint(b.m)
	w.uint(uint64(b.k))
	w.uint(b.count)
}

func (b *Bloom) payload() []*paged { return []*paged{&b.bits} }

// install takes a decoded bit array after checking its length; the set bits are
// counted when the payload is checked (settle).
func (b *Bloom) install(words paged) error {
	if words.len() != b.m/64 {
		return fmt.Errorf("%w: bloom payload length", ErrCorrupt)
	}
	b.bits = words
	return nil
}

func init() { registerDecoder(KindBloom, decodeBloom) }

// decodeBloom parses a Bloom's params. m and k are stored rather than recomputed,
// so a future change of sizing still reads old encodings; each is range-checked on
// its own.
func decodeBloom(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != bloomParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: bloom params version %d", ErrVersion, v)
	}
	b := readBloomShape(r)
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	install := func(segs []paged) error {
		if len(segs) != 1 {
			return fmt.Errorf("%w: bloom payload", ErrCorrupt)
		}
		return b.install(segs[0])
	}
	return b, []int{int(b.m / 64)}, install, nil
}

// readBloomShape reads what writeShape wrote and range-checks it. On error (r.Err()
// set) it returns a harmless empty shape.
func readBloomShape(r *paramReader) *Bloom {
	layout := r.byte()
	unit, maxK := uint64(64), uint64(bloomMaxHashes)
	if layout == layoutBlocked {
		unit, maxK = blockBits, blockedMaxK
	} else if r.Err() == nil && layout != layoutClassic {
		r.Fail(fmt.Sprintf("bloom layout %d", layout))
	}
	capacity := r.uintIn("capacity", 1, bloomMaxCapacity)
	rate := r.rate()
	m := r.uintIn("bits", unit, bloomMaxBits)
	if r.Err() == nil && m%unit != 0 {
		r.Fail(fmt.Sprintf("bits %d not a multiple of %d", m, unit))
	}
	k := r.uintIn("hashes", 1, maxK)
	count := r.uint()
	if r.Err() != nil {
		return &Bloom{}
	}
	b := newBloomShape(capacity, rate, bloomGeometry{layout: layout, m: m, k: int(k)})
	b.count = count
	return b
}

// popcount returns the number of set bits in words.
func popcount(words []uint64) uint64 {
	n := 0
	for _, w := range words {
		n += bits.OnesCount64(w)
	}
	return uint64(n)
}
