package filters

import (
	"fmt"
	"io"
	"math"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// WindowBloom is a Bloom filter over a sliding window of time or of
// insertions: an age-partitioned Bloom filter whose eight generations share
// every position. The array is cut into superblocks of 512 bytes (8 cache
// lines); an item picks one superblock with H1 and k of its 504 position bytes
// with H2, and generation g is bit g mod 8 of each byte. An add sets the
// current generation's bit in its k bytes; a lookup ANDs the k bytes and
// answers present if some live generation has all k bits, so it reads one
// superblock, k bytes and a tag, whatever the number of generations.
//
// Retiring a generation writes nothing: the first word of each superblock is
// a tag, the generation of its latest add. A superblock whose tag is older than
// generation g holds in g's bit what an earlier generation left there, and
// lookups ignore it; the first add into it in a newer generation clears the
// bits of every generation that has begun since, then sets the tag. So moving
// to the next generation costs nothing however large the filter is, and a
// snapshot that is streaming the filter copies no page for it.
//
// Each generation is a blocked Bloom filter of 504-position blocks holding a
// seventh of the capacity, sized for a rate of p/8: a lookup may match in any
// of the eight, and the union of eight rates of p/8 is below p. DESIGN.md
// ("Windowed filters") says what this costs against a plain Bloom filter and
// why.
type WindowBloom struct {
	capacity uint64
	rate     float64
	clock    genClock
	k        int
	supers   uint64
	// items counts, per generation (index g mod 8), the adds in generation g
	// that set one of its bits: the items new to it.
	items [windowGens]uint64
	words paged

	loadable
}

const (
	// wbSuperWords is a superblock's words: 512 bytes, a whole number of them
	// in a page, so a superblock never straddles two.
	wbSuperWords = 64
	// wbPositions is a superblock's position bytes: all but the tag word.
	wbPositions = (wbSuperWords - 1) * 8
	// wbMinRate bounds the error rate from below: a generation's rate p/8 stays
	// where the block model is exact to far better than the rate.
	wbMinRate = 1e-6
	// wbParamVersion is the first byte of a WindowBloom's params.
	wbParamVersion = 1
	// wbOverhead is the fixed memory MemoryBytes adds to the array.
	wbOverhead = 160
	// wbEveryByte spreads a byte to the eight bytes of a word.
	wbEveryByte = 0x0101010101010101
)

// wbCheck validates a windowed Bloom's configuration and returns its clock.
func wbCheck(cfg WindowConfig) (genClock, error) {
	if cfg.Capacity < 1 || cfg.Capacity > bloomMaxCapacity {
		return genClock{}, errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", cfg.Capacity, uint64(bloomMaxCapacity))
	}
	if !(cfg.ErrorRate >= wbMinRate && cfg.ErrorRate < 1) {
		return genClock{}, errdetail.New(ErrBadParam, "error rate %v of a windowed filter must lie in [%v, 1)", cfg.ErrorRate, wbMinRate)
	}
	return newGenClock(cfg)
}

// wbSize chooses k and the number of superblocks: for each k, the highest mean
// load of a generation per superblock at which the block model gives at most
// p/8, and the k that carries the most (the rate is unimodal in k; the walk
// starts near the classic k and stops past the best on each side).
func wbSize(clock genClock, capacity uint64, rate float64) (k int, supers uint64, err error) {
	target := float64(rate / windowGens)
	perItem := float64(-detLn(target)) / float64(ln2*ln2)
	// A superblock's load lies between a quarter and twice what the classic
	// layout's bits per item would give.
	lo, hi := float64(wbPositions/float64(4*perItem)), float64(2*wbPositions/perItem)
	k0 := min(max(1, int(math.Floor(float64(perItem*ln2)+0.5))), blockedMaxK)
	best, bestK := lo, 0
	for _, dir := range []int{0, -1, 1} {
		for j := k0 + dir; j >= 1 && j <= blockedMaxK; j += dir {
			l, ok := wbLoad(j, best, hi, target)
			if ok && (l > best || bestK == 0) {
				best, bestK = l, j
			} else if bestK != 0 {
				break
			}
			if dir == 0 {
				break
			}
		}
	}
	if bestK == 0 {
		return 0, 0, errdetail.New(ErrBadParam, "no block geometry meets error rate %v", rate)
	}
	n := math.Ceil(float64(clock.perGen(capacity)) / best)
	if !(n*wbSuperWords <= maxPayloadBytes/8) {
		return 0, 0, tooLarge(n * wbSuperWords * 64)
	}
	return bestK, max(uint64(n), 1), nil
}

// wbLoad is blockedLoad for a superblock's 504 positions.
func wbLoad(k int, lo, hi, rate float64) (float64, bool) {
	bm := newBlockModel(k, wbPositions)
	if bm.fpr(lo) > rate {
		return 0, false
	}
	if bm.fpr(hi) <= rate {
		return hi, true
	}
	for range 30 {
		mid := float64(float64(lo+hi) / 2)
		if bm.fpr(mid) <= rate {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}

// NewWindowBloom returns an empty windowed Bloom filter for cfg (Capacity,
// ErrorRate, and Window or Last). A time window starts at generation 0; the
// first Advance moves it to the present.
func NewWindowBloom(cfg WindowConfig) (*WindowBloom, error) {
	clock, err := wbCheck(cfg)
	if err != nil {
		return nil, err
	}
	k, supers, err := wbSize(clock, cfg.Capacity, cfg.ErrorRate)
	if err != nil {
		return nil, err
	}
	w := &WindowBloom{capacity: cfg.Capacity, rate: cfg.ErrorRate, clock: clock, k: k, supers: supers}
	w.words = newPaged(supers * wbSuperWords)
	return w, nil
}

// WindowBloomBytes reports the MemoryBytes of a new WindowBloom for cfg,
// without allocating it. It returns the same errors as NewWindowBloom. The
// filter never grows.
func WindowBloomBytes(cfg WindowConfig) (uint64, error) {
	clock, err := wbCheck(cfg)
	if err != nil {
		return 0, err
	}
	_, supers, err := wbSize(clock, cfg.Capacity, cfg.ErrorRate)
	if err != nil {
		return 0, err
	}
	return pagedBytes(supers*wbSuperWords) + wbOverhead, nil
}

// wbValid is the mask of the generation bits a superblock tagged tag holds
// for the live generations when cur is current: those begun after cur-8 and
// not after its latest add. The others hold what older generations left.
func wbValid(cur, tag uint64) uint64 {
	if tag >= cur {
		return 0xFF
	}
	d := cur - tag
	if d >= windowGens {
		return 0
	}
	n := windowGens - d // generations tag-n+1 .. tag
	return uint64(bits.RotateLeft8(uint8(1)<<n-1, int((tag-n+1)%windowGens)))
}

// super returns the superblock an item falls into, for reading.
func (w *WindowBloom) super(d Digest) *[wbSuperWords]uint64 {
	i := reduce(d.H1, w.supers) * wbSuperWords
	return (*[wbSuperWords]uint64)(w.words.pages[i>>pageShift].w[i&pageMask:][:wbSuperWords])
}

// positions returns the item's k position bytes in the superblock (8 to
// 511): the top 24 bits of H2*C^i, as Bloom's blocked layout takes its
// positions, mapped onto the 504 by a multiply and a shift (uniform to a few
// parts in 100,000, and cheaper than a full reduce).
func (w *WindowBloom) positions(d Digest, pos *[blockedMaxK]uint16) []uint16 {
	h := d.H2
	for i := range w.k {
		h *= blockMul
		pos[i] = uint16(h>>40*wbPositions>>24) + 8
	}
	return pos[:w.k]
}

// probe ANDs the item's k position bytes.
func probe(sb *[wbSuperWords]uint64, pos []uint16) uint64 {
	acc := uint64(0xFF)
	for _, p := range pos {
		acc &= sb[p>>3] >> (p & 7 * 8)
	}
	return acc & 0xFF
}

// Add inserts item into the current generation and reports whether it was new:
// absent from every live generation before (as Bloom's Add, an item whose bits
// were all set by others answers false). A count window then counts the
// insertion, and begins a new generation after every Period of them.
func (w *WindowBloom) Add(item []byte) bool { return w.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (w *WindowBloom) AddDigest(d Digest) bool {
	var buf [blockedMaxK]uint16
	pos := w.positions(d, &buf)
	i := reduce(d.H1, w.supers) * wbSuperWords
	sb := (*[wbSuperWords]uint64)(w.words.page(i >> pageShift)[i&pageMask:][:wbSuperWords])
	cur := w.clock.cur
	acc := probe(sb, pos)
	valid := wbValid(cur, sb[0])
	isNew := acc&valid == 0
	slot := cur % windowGens
	if sb[0] != cur {
		// Clear what older generations left in the bits of those begun since
		// the latest add; the tag then vouches for every bit.
		keep := valid * wbEveryByte
		for j := 1; j < wbSuperWords; j++ {
			sb[j] &= keep
		}
		sb[0] = cur
		acc = 0
	}
	if acc>>slot&1 == 0 {
		w.items[slot] = satInc(w.items[slot])
		bit := uint64(1) << slot
		for _, p := range pos {
			sb[p>>3] |= bit << (p & 7 * 8)
		}
	}
	if w.clock.inserted() {
		w.items[w.clock.cur%windowGens] = 0
	}
	return isNew
}

// Test reports whether item may have been added within the window (and its
// slack). False means it was not.
func (w *WindowBloom) Test(item []byte) bool { return w.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed. It stops at the first
// position that leaves no live generation: an absent item reads two or three
// of the superblock's lines, not all it would touch.
func (w *WindowBloom) TestDigest(d Digest) bool {
	sb := w.super(d)
	acc := wbValid(w.clock.cur, sb[0])
	h := d.H2
	for range w.k {
		h *= blockMul
		p := h>>40*wbPositions>>24 + 8 // as positions computes them
		if acc &= sb[p>>3] >> (p & 7 * 8); acc&0xFF == 0 {
			return false
		}
	}
	return true
}

// Advance moves a time window to now (Unix nanoseconds), retiring every
// generation that ended at least seven periods before now's. A time earlier
// than the current generation, and any time for a count window, changes
// nothing. It writes no array.
func (w *WindowBloom) Advance(now int64) {
	from := w.clock.cur
	steps := w.clock.advance(now)
	for g := from + 1; g <= from+min(steps, windowGens); g++ {
		w.items[g%windowGens] = 0
	}
}

// NextRetire returns the time (Unix nanoseconds) at which the oldest
// generation holding items retires, and false if none does: a count window, or
// one with no items. Until then Advance changes no answer.
func (w *WindowBloom) NextRetire() (int64, bool) {
	if !w.clock.byTime {
		return 0, false
	}
	g, ok := w.clock.oldestHolding(&w.items)
	if !ok {
		return 0, false
	}
	return w.clock.retireAt(g), true
}

// Count returns the items in the window: for each live generation, the adds
// in it of items new to it (an item added in several generations counts in
// each). BF.CARD.
func (w *WindowBloom) Count() uint64 {
	n := uint64(0)
	for _, c := range w.items {
		if n += c; n < c {
			return math.MaxUint64
		}
	}
	return n
}

// Window describes the window and its generations.
func (w *WindowBloom) Window() WindowInfo { return w.clock.info(&w.items) }

// EstimatedFPP estimates the false-positive rate now from each generation's
// items: one minus the chance that no generation matches.
func (w *WindowBloom) EstimatedFPP() float64 {
	bm := newBlockModel(w.k, wbPositions)
	none := 1.0
	for _, n := range w.items {
		none = float64(none * float64(1-bm.fpr(float64(n)/float64(w.supers))))
	}
	return min(max(1-none, 0), 1)
}

// Capacity returns the items one window was sized for.
func (w *WindowBloom) Capacity() uint64 { return w.capacity }

// ErrorRate returns the target false-positive rate.
func (w *WindowBloom) ErrorRate() float64 { return w.rate }

// Hashes returns k, the positions each item sets.
func (w *WindowBloom) Hashes() int { return w.k }

// Superblocks returns the number of 512-byte superblocks.
func (w *WindowBloom) Superblocks() uint64 { return w.supers }

// Clone returns an independent copy of w.
func (w *WindowBloom) Clone() *WindowBloom {
	c := *w
	c.words = w.words.clone()
	return &c
}

// Fork returns a copy of w that shares its pages until one of the two writes
// one (Fork in fork.go).
func (w *WindowBloom) Fork() *WindowBloom {
	c := *w
	c.words = w.words.fork()
	return &c
}

func (w *WindowBloom) fork() Filter { return w.Fork() }

// Kind returns KindWindowBloom.
func (w *WindowBloom) Kind() Kind { return KindWindowBloom }

// MemoryBytes returns the memory the filter occupies: its array, page table
// and a fixed overhead. It never changes.
func (w *WindowBloom) MemoryBytes() uint64 { return w.words.bytes() + wbOverhead }

// WriteTo streams the filter's encoding to w.
func (w *WindowBloom) WriteTo(wr io.Writer) (int64, error) { return Encode(wr, w) }

// ReadFrom replaces the filter with the one encoded in r, which must be a
// WindowBloom.
func (w *WindowBloom) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindWindowBloom)
	if err != nil {
		return n, err
	}
	*w = *f.(*WindowBloom)
	return n, nil
}

func (w *WindowBloom) params() []byte {
	var pw paramWriter
	pw.byte(wbParamVersion)
	w.clock.write(&pw)
	pw.uint(w.capacity)
	pw.float(w.rate)
	pw.uint(uint64(w.k))
	pw.uint(w.supers)
	for _, n := range w.items {
		pw.uint(n)
	}
	return pw.bytesOut()
}

func (w *WindowBloom) payload() []*paged { return []*paged{&w.words} }

// lanesOf: words, whose bits any payload may hold. A tag newer than the
// current generation, or bits no add set, give false positives and nothing
// else: no operation takes a count down, so no payload can make one wrap.
func (w *WindowBloom) lanesOf(int) lanes {
	n := w.supers * wbSuperWords
	return lanes{width: 64, n: n, used: n * 64, class: bitWords}
}

func (w *WindowBloom) verify([]tally) error { return nil }

func (w *WindowBloom) settle([]tally) {}

// Prefetch reads each item's superblock tag, the line an add or a lookup
// reads first.
func (w *WindowBloom) Prefetch(items [][]byte) uint64 {
	var sum uint64
	for _, it := range items {
		sum += w.super(Hash(it))[0]
	}
	return sum
}

func init() { registerDecoder(KindWindowBloom, decodeWindowBloom) }

// decodeWindowBloom parses a WindowBloom's params. k and the superblocks are
// stored, not recomputed, and range-checked each on its own, as Bloom's are.
func decodeWindowBloom(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != wbParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: windowed bloom params version %d", ErrVersion, v)
	}
	w := &WindowBloom{clock: readGenClock(r)}
	w.capacity = r.uintIn("capacity", 1, bloomMaxCapacity)
	w.rate = r.rate()
	if r.Err() == nil && w.rate < wbMinRate {
		r.Fail("error rate below the windowed minimum")
	}
	w.k = int(r.uintIn("hashes", 1, blockedMaxK))
	w.supers = r.uintIn("superblocks", 1, maxPayloadBytes/8/wbSuperWords)
	for i := range w.items {
		w.items[i] = r.uint()
	}
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	n := w.supers * wbSuperWords
	install := func(segs []paged) error {
		if len(segs) != 1 || segs[0].len() != n {
			return fmt.Errorf("%w: windowed bloom payload", ErrCorrupt)
		}
		w.words = segs[0]
		return nil
	}
	return w, []int{int(n)}, install, nil
}
