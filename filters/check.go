package filters

import (
	"encoding/binary"
	"math/bits"
)

// Checking a payload that comes from outside.
//
// A filter's counters live in its params (Bloom's count, a cuckoo filter's items,
// a counting filter's items) and its state in its arrays. Decode and a chunked
// load (dump.go, load.go) accept only payloads that agree with the counters, so
// that no later operation can drive a counter below zero or past what the arrays
// can hold: a cuckoo filter whose fingerprints outnumber its item count would let
// CF.DEL of never-added items take the count below zero.
//
// Each kind cuts every array (segment) of its payload into lanes: bits, counters,
// fingerprints or cells, laid out from bit 0 without gaps, followed by padding up
// to the end of the last word, which is always zero. A tally sums what the lanes
// hold; a kind then checks the totals of a whole payload against its counters
// (verify) and takes its caches from them (settle). Tallies add and subtract, so a
// chunk load replaces the tally of the lanes it overwrites by that of the lanes it
// writes, and checks a payload in pieces, each in time linear in the piece.

// tally sums what some lanes of a payload hold. Its fields cannot overflow: a
// payload has at most 2^39 bits, and a counter at most 8 of them.
type tally struct {
	lanes uint64 // non-empty lanes: set bits, stored fingerprints, occupied cells
	sum   uint64 // the counters' values (counting kinds)
	sat   uint64 // saturated counters
	// odd counts lanes holding what the filter never stores. A lane may straddle
	// two chunks, so it is only held against a payload once every chunk is in.
	odd uint64
	// pad counts the set padding bits. Padding ends a word, so a chunk that sets
	// any is refused at once.
	pad uint64
}

func (t *tally) add(o tally) {
	t.lanes += o.lanes
	t.sum += o.sum
	t.sat += o.sat
	t.odd += o.odd
	t.pad += o.pad
}

func (t *tally) sub(o tally) {
	t.lanes -= o.lanes
	t.sum -= o.sum
	t.sat -= o.sat
	t.odd -= o.odd
	t.pad -= o.pad
}

// lanes describes how a segment is cut: n lanes of width bits (1..64) from bit 0,
// of which the first used bits carry data; the bits from used to the end of the
// segment's last word must be zero. used may end inside the last lane (a word of
// packed counters), whose padding then tallies as zero counters.
type lanes struct {
	width, n, used uint64
	class          laneClass
	cmax           uint64 // cells: the counter's mask, also its saturated value; windowLanes: the current generation
}

// laneClass says what a segment's lanes hold, and so how they tally. A kind
// names one rather than passing a function, so that each is counted by a loop of
// its own, a word or a lane at a time, with no call per lane.
type laneClass uint8

const (
	bitWords       laneClass = iota // words of a bit array: lanes counts the set bits
	byteWords                       // words of 8-bit fingerprints: lanes counts the non-zero ones
	wydeWords                       // words of 16-bit fingerprints: likewise
	fpLanes                         // fingerprints of any width: likewise
	nibbleCounters                  // words of 4-bit counters: sum, sat
	byteCounters                    // words of 8-bit counters: sum, sat
	cells                           // remainder<<c | counter: lanes, sum and sat of the counters; odd
	// for a free cell (counter 0) with a remainder
	windowLanes // a windowed cuckoo filter's buckets (wcuckoo.go): lanes counts the live copies; odd
	// an expired one its region's sweep would have cleared
)

// checked is implemented by every filter kind: what Decode and LoadChunk need to
// check a payload from outside against the filter's counters.
type checked interface {
	Filter
	// lanesOf describes segment seg of the payload.
	lanesOf(seg int) lanes
	// verify reports, as ErrCorrupt, counters that the totals of a complete
	// payload (one tally per segment) contradict.
	verify(totals []tally) error
	// settle sets whatever the filter caches about its arrays from their totals.
	settle(totals []tally)
}

// segView reads the words of one segment, with the words of a pending chunk
// standing in for those in [lo, lo+n): a chunk's tally is taken before any of it
// is written, so that a refused chunk changes nothing. All reads of a payload
// being checked go through it.
type segView struct {
	seg   *paged
	lo, n uint64
	chunk []byte // n words, little-endian; nil for none
}

func (v *segView) word(i uint64) uint64 {
	if i-v.lo < v.n {
		return binary.LittleEndian.Uint64(v.chunk[(i-v.lo)*8:])
	}
	return v.seg.at(i)
}

// runWords is the most words run decodes from a chunk at once.
const runWords = 256

// run returns words [i, j) for some j in (i, hi]: a piece of one page, read
// in place, or of the chunk, decoded into buf. The word loops of tallyRange
// read a segment a run at a time rather than a word at a time.
func (v *segView) run(i, hi uint64, buf *[runWords]uint64) []uint64 {
	if i-v.lo < v.n {
		end := min(hi, v.lo+v.n, i+runWords)
		for j := i; j < end; j++ {
			buf[j-i] = binary.LittleEndian.Uint64(v.chunk[(j-v.lo)*8:])
		}
		return buf[:end-i]
	}
	if i < v.lo {
		hi = min(hi, v.lo) // the chunk stands in from lo on
	}
	pg, o := v.seg.pages[i>>pageShift].w, i&pageMask
	return pg[o:min(uint64(len(pg)), o+hi-i)]
}

// tallyRange tallies the lanes of a segment laid out as l that overlap its words
// [lo, hi), and its padding if the range holds the last word. A lane that reaches
// into a word outside the range is read whole, so tallies of ranges that meet
// count such a lane in both: the callers subtract a range's old tally before
// adding its new one.
//
// The loops are branch-free in the values they count: whether a slot of a half
// full table holds a fingerprint is a coin toss no predictor learns.
func tallyRange(l lanes, v *segView, lo, hi uint64, t *tally) {
	if lo >= hi {
		return
	}
	s0 := lo * 64 / l.width
	s1 := min(l.n, (hi*64+l.width-1)/l.width)
	var n, sum, sat, odd uint64
	switch l.class {
	case bitWords, byteWords, wydeWords, nibbleCounters, byteCounters:
		var buf [runWords]uint64
		for s := s0; s < s1; {
			r := v.run(s, s1, &buf)
			a, b, c := tallyWords(l.class, r)
			n, sum, sat = n+a, sum+b, sat+c
			s += uint64(len(r))
		}
	case windowLanes:
		var buf [runWords]uint64
		for s := s0; s < s1; {
			r := v.run(s, s1, &buf)
			a, b := tallyWindowLanes(r, s, l.n, l.cmax)
			n, odd = n+a, odd+b
			s += uint64(len(r))
		}
	case fpLanes, cells:
		// Lanes narrower than a word, read one after another, each word loaded
		// once.
		width, cmax := l.width, l.cmax
		mask := uint64(1)<<width - 1
		p := s0 * width
		k, off, words := p>>6, p&63, v.seg.len()
		cur := v.word(k)
		for s := s0; s < s1; s++ {
			x := cur >> off
			if off += width; off >= 64 {
				off -= 64
				k++
				cur = 0
				if k < words {
					cur = v.word(k)
				}
				// The lane's last off bits are the low bits of the next word.
				// When it ended with the word (off 0) they land above the mask,
				// or, for a 64-bit lane, are shifted out.
				x |= cur << (width - off)
			}
			x &= mask
			if l.class == fpLanes {
				n += nonZero(x)
				continue
			}
			cnt := x & cmax
			nz := nonZero(cnt)
			n += nz
			sum += cnt
			sat += nonZero(cnt^cmax) ^ 1
			odd += (nz ^ 1) & nonZero(x)
		}
	}
	t.lanes += n
	t.sum += sum
	t.sat += sat
	t.odd += odd
	last := v.seg.len() - 1
	if hi == last+1 && l.used < (last+1)*64 && l.used >= last*64 {
		t.pad += uint64(bits.OnesCount64(v.word(last) >> (l.used - last*64)))
	}
}

// tallyWords tallies r, whole words of a segment of class c, one of the
// classes whose lanes are words.
func tallyWords(c laneClass, r []uint64) (n, sum, sat uint64) {
	switch c {
	case bitWords:
		for _, x := range r {
			n += uint64(bits.OnesCount64(x))
		}
	case byteWords:
		for _, x := range r {
			n += nonZeroBytes(x)
		}
	case wydeWords:
		for _, x := range r {
			n += nonZero16s(x)
		}
	case nibbleCounters:
		for _, x := range r {
			a, b := sumCounters4(x)
			sum, sat = sum+a, sat+b
		}
	case byteCounters:
		for _, x := range r {
			a, b := sumCounters8(x)
			sum, sat = sum+a, sat+b
		}
	}
	return n, sum, sat
}

// nonZero is 1 if x is not zero, else 0, without a branch.
func nonZero(x uint64) uint64 { return (x | -x) >> 63 }

// tallyAll returns the totals of every segment of c's payload as it stands.
func tallyAll(c checked) []tally {
	segs := c.payload()
	totals := make([]tally, len(segs))
	for i, s := range segs {
		tallyRange(c.lanesOf(i), &segView{seg: s}, 0, s.len(), &totals[i])
	}
	return totals
}

// sumBad sums the set padding bits and the odd lanes of totals.
func sumBad(totals []tally) (pad, odd uint64) {
	for _, t := range totals {
		pad += t.pad
		odd += t.odd
	}
	return pad, odd
}

// satMul returns a*b, or the largest uint64 if the product overflows: a bound
// that nothing real reaches.
func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0)
	}
	return lo
}

// satInc returns x+1, or x at the largest uint64. Counters that only ever grow
// stop there rather than wrap to zero.
func satInc(x uint64) uint64 {
	if x != ^uint64(0) {
		x++
	}
	return x
}

// SWAR helpers for packed lanes: the number of non-zero bytes and 16-bit lanes
// of a word. Adding 0x7F to a byte's low seven bits carries into its top bit
// exactly when they are not all zero, and never into the next byte.
const (
	lo7s  = 0x7F7F7F7F7F7F7F7F
	hi8s  = 0x8080808080808080
	lo15s = 0x7FFF7FFF7FFF7FFF
	hi16s = 0x8000800080008000
)

func nonZeroBytes(x uint64) uint64 {
	return uint64(bits.OnesCount64(((x & lo7s) + lo7s | x) & hi8s))
}

func nonZero16s(x uint64) uint64 {
	return uint64(bits.OnesCount64(((x & lo15s) + lo15s | x) & hi16s))
}
