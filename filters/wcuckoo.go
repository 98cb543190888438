package filters

import (
	"fmt"
	"io"
	"math/bits"

	"github.com/rookerydb/rookery/internal/errdetail"
)

// WindowCuckoo is a cuckoo filter over a sliding window: every copy of an item
// carries the generation it was added in, and answers only while that
// generation is live. Deletes and counts stay exact for the copies inside the
// window (a coupon valid for 30 days, deleted when redeemed).
//
// A bucket is one word of four 16-bit lanes; a lane is a 12-bit fingerprint
// (never 0) under a 4-bit tag, its generation modulo 16, and 0 when empty. A
// lane is live when its age, (current - tag) mod 16, is below 8; a lane that is
// not live is free, to lookups, counts and inserts alike. Tags repeat every 16
// generations, so an expired lane must be cleared before its tag comes round
// again: the buckets are cut into eight regions, and each new generation g
// clears the expired lanes of region g mod 8. A lane expires at age 8 and its
// region is swept within the next eight generations, before age 16. Only live
// lanes are ever moved by evictions, so a lane's age when its region is swept
// is at most 15 wherever it has moved. A jump of eight generations or more
// (a window that received nothing for that long) expires every lane, and the
// table is cleared at once.
//
// Inserts are Fan et al.'s partial-key cuckoo hashing as in Cuckoo: bucket
// i1 = h(x), i2 = (h(fp) - i1) mod m, a one-step look-ahead, then up to
// MaxIterations evictions undone on failure, victims chosen from the item's
// hash so every replica evicts the same. It never grows: a full filter refuses
// an add (ErrFull) and changes nothing.
type WindowCuckoo struct {
	capacity uint64
	clock    genClock
	maxIter  int
	m        uint64 // buckets
	// count holds the live lanes of each generation (index g mod 8); items is
	// their sum.
	count   [windowGens]uint64
	items   uint64
	deleted uint64
	words   paged

	loadable
}

const (
	wcSlots    = 4  // lanes in a bucket
	wcFPBits   = 12 // fingerprint bits of a lane
	wcTagCycle = 16 // tags count generations modulo this
	// wcLoadNum/wcLoadDen is the load of a full window at capacity: eight
	// generations of a seventh each in 90% of the slots. Four-slot buckets
	// with 500 evictions first fail near 97%.
	wcLoadNum, wcLoadDen = 9, 10
	// wcDefaultMaxIterations is the eviction limit when none is given.
	wcDefaultMaxIterations = 500
	// wcParamVersion is the first byte of a WindowCuckoo's params.
	wcParamVersion = 1
	// wcOverhead is the fixed memory MemoryBytes adds to the table.
	wcOverhead = 160

	wcLo    = 0x0001000100010001 // the lowest bit of every lane
	wcFP    = 0x0FFF0FFF0FFF0FFF // the fingerprints of every lane
	wcTag   = 0x000F000F000F000F // the tags, shifted down by wcFPBits
	wcGuard = 0x0010001000100010 // 16 in every lane: subtraction never borrows
	wcLow15 = 0x7FFF7FFF7FFF7FFF
)

// wcShape validates a windowed cuckoo filter's configuration and returns its
// clock, bucket count and eviction limit.
func wcShape(cfg WindowConfig) (genClock, uint64, int, error) {
	maxIter := cfg.MaxIterations
	if maxIter == 0 {
		maxIter = wcDefaultMaxIterations
	}
	if cfg.Capacity < 1 || cfg.Capacity > bloomMaxCapacity {
		return genClock{}, 0, 0, errdetail.New(ErrBadParam, "capacity %d out of range [1, %d]", cfg.Capacity, uint64(bloomMaxCapacity))
	}
	if maxIter < 1 || maxIter > cuckooMaxIterations {
		return genClock{}, 0, 0, errdetail.New(ErrBadParam, "max iterations %d out of range [1, %d]", maxIter, cuckooMaxIterations)
	}
	clock, err := newGenClock(cfg)
	if err != nil {
		return genClock{}, 0, 0, err
	}
	slots := clock.perGen(cfg.Capacity) * windowGens * wcLoadDen
	m := (slots + wcSlots*wcLoadNum - 1) / (wcSlots * wcLoadNum)
	if m > maxPayloadBytes/8 {
		return genClock{}, 0, 0, tooLarge(float64(m) * 64)
	}
	return clock, m, maxIter, nil
}

// NewWindowCuckoo returns an empty windowed cuckoo filter for cfg (Capacity,
// Window or Last, MaxIterations). A time window starts at generation 0; the
// first Advance moves it to the present.
func NewWindowCuckoo(cfg WindowConfig) (*WindowCuckoo, error) {
	clock, m, maxIter, err := wcShape(cfg)
	if err != nil {
		return nil, err
	}
	return &WindowCuckoo{capacity: cfg.Capacity, clock: clock, maxIter: maxIter, m: m, words: newPaged(m)}, nil
}

// WindowCuckooBytes reports the MemoryBytes of a new WindowCuckoo for cfg,
// without allocating it. It returns the same errors as NewWindowCuckoo. The
// filter never grows.
func WindowCuckooBytes(cfg WindowConfig) (uint64, error) {
	_, m, _, err := wcShape(cfg)
	if err != nil {
		return 0, err
	}
	return pagedBytes(m) + wcOverhead, nil
}

// wcKey is what an operation needs of an item: its buckets and fingerprint.
type wcKey struct {
	i1, i2, fp, h2 uint64
}

func (c *WindowCuckoo) key(d Digest) wcKey {
	fp := d.H2 >> (64 - wcFPBits)
	fp += (fp - 1) >> 63 // 0 becomes 1
	i1 := reduce(d.H1, c.m)
	return wcKey{i1: i1, i2: c.alt(i1, fp), fp: fp, h2: d.H2}
}

// alt is the other bucket of fingerprint fp held in bucket i: (h(fp) - i) mod
// m, h(fp) = fp scaled onto [0, m). It is its own inverse.
func (c *WindowCuckoo) alt(i, fp uint64) uint64 {
	i2 := fp*c.m>>wcFPBits - i
	return i2 + c.m&uint64(int64(i2)>>63)
}

// live returns, in bit 0 of each lane, whether bucket x's lane holds a copy
// of a live generation when generation cur is current.
func live(x, cur uint64) uint64 {
	age := (cur%wcTagCycle*wcLo | wcGuard) - x>>wcFPBits&wcTag
	nonEmpty := ((x & wcLow15) + wcLow15 | x) >> 15 & wcLo
	return nonEmpty &^ (age >> 3 & wcLo)
}

// holds returns, in bit 0 of each lane, whether bucket x's lane has
// fingerprint fp.
func holds(x, fp uint64) uint64 {
	y := (x ^ fp*wcLo) & wcFP
	return ^((y + wcFP) >> wcFPBits) & wcLo
}

// liveCopies returns the lanes of bucket x that hold live copies of fp.
func (c *WindowCuckoo) liveCopies(x, fp uint64) uint64 {
	return live(x, c.clock.cur) & holds(x, fp)
}

// laneOf returns lane s of bucket x.
func laneOf(x, s uint64) uint64 { return x >> (s * 16) & 0xFFFF }

// setLane stores v in lane s of bucket i.
func (c *WindowCuckoo) setLane(i, s, v uint64) {
	w := c.words.ref(i)
	*w = *w&^(0xFFFF<<(s*16)) | v<<(s*16)
}

// putFree stores lane v in a free lane of bucket i, and reports whether there
// was one.
func (c *WindowCuckoo) putFree(i, v uint64) bool {
	free := ^live(c.words.at(i), c.clock.cur) & wcLo
	if free == 0 {
		return false
	}
	c.setLane(i, uint64(bits.TrailingZeros64(free))/16, v)
	return true
}

// Add inserts a copy of item into the current generation. It returns ErrFull,
// changing nothing, when there is no room. A count window then counts the
// insertion.
func (c *WindowCuckoo) Add(item []byte) error { return c.AddDigest(Hash(item)) }

// AddDigest is Add for an item already hashed.
func (c *WindowCuckoo) AddDigest(d Digest) error {
	k := c.key(d)
	v := c.clock.cur%wcTagCycle<<wcFPBits | k.fp
	if !c.putFree(k.i1, v) && !c.putFree(k.i2, v) && !c.relocate(k.i1, v) && !c.relocate(k.i2, v) && !c.kickInsert(&k, v) {
		return ErrFull
	}
	slot := c.clock.cur % windowGens
	c.count[slot] = satInc(c.count[slot])
	c.items = satInc(c.items)
	if c.clock.inserted() {
		c.retire(c.clock.cur)
	}
	return nil
}

// AddNX adds item unless a live copy may already be held, and reports whether
// it added it.
func (c *WindowCuckoo) AddNX(item []byte) (bool, error) {
	d := Hash(item)
	if c.TestDigest(d) {
		return false, nil
	}
	if err := c.AddDigest(d); err != nil {
		return false, err
	}
	return true, nil
}

// relocate stores lane v in bucket i, whose lanes are all live, by moving one
// of them to a free lane of its other bucket. It changes nothing unless it
// succeeds.
func (c *WindowCuckoo) relocate(i, v uint64) bool {
	x := c.words.at(i)
	var alts, xs [wcSlots]uint64
	for s := range uint64(wcSlots) {
		alts[s] = c.alt(i, laneOf(x, s)&(1<<wcFPBits-1))
	}
	for s := range uint64(wcSlots) {
		xs[s] = c.words.at(alts[s])
	}
	for s := range uint64(wcSlots) {
		free := ^live(xs[s], c.clock.cur) & wcLo
		if free != 0 && alts[s] != i {
			c.setLane(alts[s], uint64(bits.TrailingZeros64(free))/16, laneOf(x, s))
			c.setLane(i, s, v)
			return true
		}
	}
	return false
}

// victim is the lane kick j of the insert of k evicts: a function of the item
// and the kick number, so every replica evicts the same lanes and the undo
// can recompute each choice.
func victim(k *wcKey, j int) uint64 { return reduce(mix64(k.h2+uint64(j)), wcSlots) }

// kickInsert is Cuckoo's eviction walk (cuckoo_kick.go): evict a victim, move
// it to its other bucket, repeat; on failure every eviction is undone in
// reverse and the table is as it was. Every lane it meets is live: a free one
// would have ended the walk.
func (c *WindowCuckoo) kickInsert(k *wcKey, v uint64) bool {
	b := k.i1
	if k.h2&1 != 0 {
		b = k.i2
	}
	held := v
	for j := 0; j < c.maxIter; j++ {
		s := victim(k, j)
		out := laneOf(c.words.at(b), s)
		c.setLane(b, s, held)
		held = out
		b = c.alt(b, held&(1<<wcFPBits-1))
		if c.putFree(b, held) || c.relocate(b, held) {
			return true
		}
	}
	for j := c.maxIter - 1; j >= 0; j-- {
		b = c.alt(b, held&(1<<wcFPBits-1))
		s := victim(k, j)
		stored := laneOf(c.words.at(b), s)
		c.setLane(b, s, held)
		held = stored
	}
	return false
}

// Test reports whether a live copy of item may be held. False means none is.
func (c *WindowCuckoo) Test(item []byte) bool { return c.TestDigest(Hash(item)) }

// TestDigest is Test for an item already hashed.
func (c *WindowCuckoo) TestDigest(d Digest) bool {
	k := c.key(d)
	x1, x2 := c.words.at(k.i1), c.words.at(k.i2)
	return c.liveCopies(x1, k.fp)|c.liveCopies(x2, k.fp) != 0
}

// Count returns an upper bound of the live copies of item: exact unless
// another item shares its fingerprint and a bucket.
func (c *WindowCuckoo) Count(item []byte) uint64 {
	k := c.key(Hash(item))
	n := bits.OnesCount64(c.liveCopies(c.words.at(k.i1), k.fp))
	if k.i2 != k.i1 {
		n += bits.OnesCount64(c.liveCopies(c.words.at(k.i2), k.fp))
	}
	return uint64(n)
}

// Delete removes the oldest live copy of item and reports whether there was
// one. Only delete items that were added: deleting one that was not may remove
// another item's copy.
func (c *WindowCuckoo) Delete(item []byte) bool {
	if c.items == 0 {
		return false
	}
	k := c.key(Hash(item))
	best, bestAge, found := [2]uint64{}, uint64(0), false
	for _, i := range [2]uint64{k.i1, k.i2} {
		x := c.words.at(i)
		for m := c.liveCopies(x, k.fp); m != 0; m &= m - 1 {
			s := uint64(bits.TrailingZeros64(m)) / 16
			age := (c.clock.cur - laneOf(x, s)>>wcFPBits) % wcTagCycle
			if !found || age > bestAge {
				best, bestAge, found = [2]uint64{i, s}, age, true
			}
		}
	}
	if !found {
		return false
	}
	c.setLane(best[0], best[1], 0)
	slot := (c.clock.cur - bestAge) % windowGens
	c.count[slot] -= min(c.count[slot], 1)
	c.items--
	c.deleted = satInc(c.deleted)
	return true
}

// Advance moves a time window to now (Unix nanoseconds): each generation that
// begins retires the one eight before it and sweeps one region. A count
// window, or a time before the current generation, changes nothing.
func (c *WindowCuckoo) Advance(now int64) {
	from := c.clock.cur
	steps := c.clock.advance(now)
	if steps >= windowGens {
		// Every lane was written at from or before, and has expired. A
		// filter never advanced before holds only copies of generation 0,
		// all counted: with none, there is nothing to clear.
		if from != 0 || c.items != 0 {
			zeroPaged(&c.words)
		}
		c.count, c.items = [windowGens]uint64{}, 0
		return
	}
	for g := from + 1; g <= from+steps; g++ {
		c.retire(g)
	}
}

// retire begins generation g: the generation eight before it leaves the
// counts, and the expired lanes of region g mod 8 are cleared.
func (c *WindowCuckoo) retire(g uint64) {
	slot := g % windowGens
	c.items -= min(c.items, c.count[slot])
	c.count[slot] = 0
	lo, hi := c.region(slot)
	for i := lo; i < hi; i++ {
		x := c.words.at(i)
		if gone := (((x & wcLow15) + wcLow15 | x) >> 15 & wcLo) &^ live(x, g); gone != 0 {
			c.words.set(i, x&^(gone*0xFFFF))
		}
	}
}

// region returns the buckets [lo, hi) of region r.
func (c *WindowCuckoo) region(r uint64) (uint64, uint64) {
	return r * c.m / windowGens, (r + 1) * c.m / windowGens
}

// NextRetire returns the time (Unix nanoseconds) at which the oldest
// generation holding copies retires, and false if none does: a count window,
// or one with no copies. Until then Advance changes no answer.
func (c *WindowCuckoo) NextRetire() (int64, bool) {
	if !c.clock.byTime {
		return 0, false
	}
	g, ok := c.clock.oldestHolding(&c.count)
	if !ok {
		return 0, false
	}
	return c.clock.retireAt(g), true
}

// Items returns the live copies held: adds in the window less deletes.
func (c *WindowCuckoo) Items() uint64 { return c.items }

// Deleted returns the successful deletes, saturating.
func (c *WindowCuckoo) Deleted() uint64 { return c.deleted }

// Buckets returns the number of buckets.
func (c *WindowCuckoo) Buckets() uint64 { return c.m }

// BucketSize returns the slots of a bucket (4).
func (c *WindowCuckoo) BucketSize() int { return wcSlots }

// FingerprintBits returns the bits of a fingerprint (12).
func (c *WindowCuckoo) FingerprintBits() int { return wcFPBits }

// MaxIterations returns the most evictions one insert tries.
func (c *WindowCuckoo) MaxIterations() int { return c.maxIter }

// Capacity returns the items one window was sized for.
func (c *WindowCuckoo) Capacity() uint64 { return c.capacity }

// Slots returns the lanes of the table.
func (c *WindowCuckoo) Slots() uint64 { return c.m * wcSlots }

// Window describes the window and its generations.
func (c *WindowCuckoo) Window() WindowInfo { return c.clock.info(&c.count) }

// EstimatedFPP estimates the false-positive rate now: a lookup compares the
// live lanes of two buckets, each matching with chance 2^-12.
func (c *WindowCuckoo) EstimatedFPP() float64 {
	return min(1, float64(2*wcSlots*c.items)/float64(c.Slots())/(1<<wcFPBits))
}

// Clone returns an independent copy of c.
func (c *WindowCuckoo) Clone() *WindowCuckoo {
	d := *c
	d.words = c.words.clone()
	return &d
}

// Fork returns a copy of c that shares its pages until one of the two writes
// one (Fork in fork.go).
func (c *WindowCuckoo) Fork() *WindowCuckoo {
	d := *c
	d.words = c.words.fork()
	return &d
}

func (c *WindowCuckoo) fork() Filter { return c.Fork() }

// Kind returns KindWindowCuckoo.
func (c *WindowCuckoo) Kind() Kind { return KindWindowCuckoo }

// MemoryBytes returns the memory the filter occupies: its table, page table
// and a fixed overhead. It never changes.
func (c *WindowCuckoo) MemoryBytes() uint64 { return pagedBytes(c.m) + wcOverhead }

// WriteTo streams the filter's encoding to w.
func (c *WindowCuckoo) WriteTo(w io.Writer) (int64, error) { return Encode(w, c) }

// ReadFrom replaces the filter with the one encoded in r, which must be a
// WindowCuckoo.
func (c *WindowCuckoo) ReadFrom(r io.Reader) (int64, error) {
	f, n, err := decodeInto(r, KindWindowCuckoo)
	if err != nil {
		return n, err
	}
	*c = *f.(*WindowCuckoo)
	return n, nil
}

func (c *WindowCuckoo) params() []byte {
	var w paramWriter
	w.byte(wcParamVersion)
	c.clock.write(&w)
	w.uint(c.capacity)
	w.uint(uint64(c.maxIter))
	w.uint(c.deleted)
	for _, n := range c.count {
		w.uint(n)
	}
	return w.bytesOut()
}

func (c *WindowCuckoo) payload() []*paged { return []*paged{&c.words} }

// zeroPaged zeroes every word of a: its own pages in place, and a shared page
// (a snapshot may be streaming it) by a fresh one.
func zeroPaged(a *paged) {
	for p := range a.pages {
		pg := &a.pages[p]
		if pg.owner == a.epoch {
			clear(pg.w)
		} else {
			*pg = page{w: make([]uint64, len(pg.w)), owner: a.epoch}
		}
	}
}

// lanesOf: buckets, a word each, whose live lanes are counted; an expired lane
// its region's sweep would have cleared is odd (tallyWindowLanes).
func (c *WindowCuckoo) lanesOf(int) lanes {
	return lanes{width: 64, n: c.m, used: c.m * 64, class: windowLanes, cmax: c.clock.cur}
}

// verify: every add stores one live lane and counts it, every delete clears
// one and uncounts it, a retiring generation leaves the count with its lanes,
// and evictions only move lanes: the live lanes number exactly Items. A filter
// holding more would let deletes take the count below zero. (Each
// generation's share of Items is not checked against the lanes: retiring
// takes it away saturating at zero.)
func (c *WindowCuckoo) verify(totals []tally) error {
	if totals[0].lanes != c.items {
		return fmt.Errorf("%w: windowed cuckoo holds %d live copies for %d items", ErrCorrupt, totals[0].lanes, c.items)
	}
	return nil
}

func (c *WindowCuckoo) settle([]tally) {}

// tallyWindowLanes counts the live lanes of buckets first, first+1, ... (the
// words r) of a table of m buckets when generation cur is current, and the
// expired lanes older than their region's sweep allows: region g mod 8 was
// swept when generation g began, so a lane there is at most 7 generations
// older than that sweep.
func tallyWindowLanes(r []uint64, first, m, cur uint64) (n, odd uint64) {
	for j, x := range r {
		n += uint64(bits.OnesCount64(live(x, cur)))
		if x == 0 {
			continue
		}
		b := first + uint64(j)
		region := (windowGens*b + windowGens - 1) / m // the r with r*m/8 <= b < (r+1)*m/8
		bound := windowGens - 1 + (cur-region)%windowGens
		for s := range uint64(wcSlots) {
			if v := laneOf(x, s); v != 0 && (cur-v>>wcFPBits)%wcTagCycle > bound {
				odd++
			}
		}
	}
	return n, odd
}

func init() { registerDecoder(KindWindowCuckoo, decodeWindowCuckoo) }

// decodeWindowCuckoo parses a WindowCuckoo's params: the bucket count follows
// from the capacity and the window, and the generations' counts may not
// exceed the slots.
func decodeWindowCuckoo(params []byte) (Filter, []int, func([]paged) error, error) {
	r := newParamReader(params)
	if v := r.byte(); r.Err() == nil && v != wcParamVersion {
		return nil, nil, nil, fmt.Errorf("%w: windowed cuckoo params version %d", ErrVersion, v)
	}
	clock := readGenClock(r)
	capacity := r.uintIn("capacity", 1, bloomMaxCapacity)
	maxIter := r.uintIn("max iterations", 1, cuckooMaxIterations)
	deleted := r.uint()
	var count [windowGens]uint64
	for i := range count {
		count[i] = r.uint()
	}
	if err := r.done(); err != nil {
		return nil, nil, nil, err
	}
	cfg := WindowConfig{Capacity: capacity, MaxIterations: int(maxIter), Last: clock.window}
	if clock.byTime {
		cfg = WindowConfig{Capacity: capacity, MaxIterations: int(maxIter), Window: int64(clock.window)}
	}
	_, m, _, err := wcShape(cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: windowed cuckoo params: %v", ErrCorrupt, err)
	}
	c := &WindowCuckoo{capacity: capacity, clock: clock, maxIter: int(maxIter), m: m, count: count, deleted: deleted}
	for _, n := range count {
		if n > c.Slots() || c.items+n > c.Slots() {
			return nil, nil, nil, fmt.Errorf("%w: windowed cuckoo holds more copies than slots", ErrCorrupt)
		}
		c.items += n
	}
	install := func(segs []paged) error {
		if len(segs) != 1 || segs[0].len() != m {
			return fmt.Errorf("%w: windowed cuckoo payload", ErrCorrupt)
		}
		c.words = segs[0]
		return nil
	}
	return c, []int{int(m)}, install, nil
}
