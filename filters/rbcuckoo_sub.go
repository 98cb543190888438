package filters

import "math/bits"

// rbcSub is one sub-filter of an RBCuckoo: nb buckets of bs one-byte slots,
// bucket i taking bytes [i*bs, (i+1)*bs), 0 marking an empty slot. That is
// RedisBloom's own array, byte for byte, so that a dump chunk is a slice of it.
// The bytes live in a paged array: byte i is byte i&7 of little-endian word
// i>>3, and the last word is padded with zero bytes that nothing reads.
//
// A bucket of a size that divides 8 (1, 2, 4, 8: the sizes anyone uses) never
// straddles two words; others may, and are read a word at a time.
type rbcSub struct {
	words paged
	nb    uint64 // buckets, a power of two
	size  uint64 // bytes: nb times the bucket size
}

// rbcMurmurM is the multiplier of RedisBloom's alternate bucket index.
const rbcMurmurM = 0x5bd1e995

// bytes01 has the lowest bit of every byte set.
const bytes01 = 0x0101010101010101

// rbcWords returns the words a sub-filter of size bytes takes.
func rbcWords(size uint64) uint64 { return (size + 7) / 8 }

// newRBCSub returns an empty sub-filter of nb buckets of bs slots.
func newRBCSub(nb, bs uint64) rbcSub {
	return rbcSub{words: newPaged(rbcWords(nb * bs)), nb: nb, size: nb * bs}
}

// index is RedisBloom's SubCF_GetIndex: the first byte of the bucket that hash h
// picks, (h mod nb) * bs, truncated to 32 bits as RedisBloom's uint32_t return
// type truncates it. In a sub-filter of more than 4 GiB the buckets from byte
// 2^32 on are therefore never found by lookups, deletes or free-slot searches
// (only by the eviction loop, which indexes with 64 bits, and compaction), and
// such a filter answers as RedisBloom's does. nb is a power of two, so when the
// product exceeds 32 bits, nb is at least 2^25 and a truncated index still has
// a whole bucket after it.
func (s *rbcSub) index(h, bs uint64) uint64 { return uint64(uint32((h & (s.nb - 1)) * bs)) }

// byteAt returns byte i.
func (s *rbcSub) byteAt(i uint64) uint64 { return s.words.at(i>>3) >> (i & 7 * 8) & 0xff }

// setByte stores v, a byte, in byte i.
func (s *rbcSub) setByte(i, v uint64) {
	w := s.words.ref(i >> 3)
	sh := i & 7 * 8
	*w = *w&^(0xff<<sh) | v<<sh
}

// eqBytes returns the top bit of every byte of x that equals v and nothing else:
// the exact SWAR zero-byte test applied to x ^ v*bytes01. Adding 0x7F to a
// byte's low seven bits carries into its top bit exactly when they are not all
// zero, and never into the next byte.
func eqBytes(x, v uint64) uint64 {
	y := x ^ v*bytes01
	return ^(((y & lo7s) + lo7s) | y | lo7s) & hi8s
}

// byteSpan returns the top bits of bytes [lo, hi) of a word, 0 <= lo < hi <= 8.
func byteSpan(lo, hi uint64) uint64 {
	return ^uint64(0) >> (64 - 8*hi) &^ (1<<(8*lo) - 1) & hi8s
}

// find returns the byte index of the first slot of the bucket at byte off, of
// bs slots, that holds v (Bucket_Find; with v = 0, Bucket_FindAvailable).
func (s *rbcSub) find(off, bs, v uint64) (uint64, bool) {
	for k, last := off>>3, (off+bs-1)>>3; k <= last; k++ {
		base := k * 8
		m := eqBytes(s.words.at(k), v) & byteSpan(max(off, base)-base, min(off+bs, base+8)-base)
		if m != 0 {
			return base + uint64(bits.TrailingZeros64(m))/8, true
		}
	}
	return 0, false
}

// count returns how many slots of the bucket at byte off hold v.
func (s *rbcSub) count(off, bs, v uint64) uint64 {
	n := 0
	for k, last := off>>3, (off+bs-1)>>3; k <= last; k++ {
		base := k * 8
		n += bits.OnesCount64(eqBytes(s.words.at(k), v) & byteSpan(max(off, base)-base, min(off+bs, base+8)-base))
	}
	return uint64(n)
}

// putFree stores fp in the first free slot of the bucket at byte off, and
// reports whether there was one.
func (s *rbcSub) putFree(off, bs, fp uint64) bool {
	i, ok := s.find(off, bs, 0)
	if ok {
		s.setByte(i, fp)
	}
	return ok
}

// kickInsert is RedisBloom's Filter_KOInsert on this sub-filter, whose two
// buckets for the item are full: it swaps fp into the first bucket at slot
// victim, moves the fingerprint it displaced to that one's other bucket, and so
// on, the victim slot advancing by one each time, until a displaced fingerprint
// finds a free slot or maxIter swaps are done. Then it undoes them, in reverse,
// and reports false. The bucket indexes here are 64-bit, not truncated as
// index's are.
func (s *rbcSub) kickInsert(h1, fp, bs, maxIter uint64) bool {
	mask := s.nb - 1
	victim, b := uint64(0), h1&mask
	for range maxIter {
		fp = s.swap(b*bs+victim, fp)
		b = (b ^ fp*rbcMurmurM) & mask
		if s.putFree(b*bs, bs, fp) {
			return true
		}
		victim = (victim + 1) % bs
	}
	for range maxIter {
		victim = (victim + bs - 1) % bs
		b = (b ^ fp*rbcMurmurM) & mask
		fp = s.swap(b*bs+victim, fp)
	}
	return false
}

// swap stores v in byte i and returns the byte it held.
func (s *rbcSub) swap(i, v uint64) uint64 {
	old := s.byteAt(i)
	s.setByte(i, v)
	return old
}

// read returns a copy of bytes [off, off+n).
func (s *rbcSub) read(off, n uint64) []byte {
	out := make([]byte, n)
	i := uint64(0)
	for ; i < n && (off+i)&7 != 0; i++ {
		out[i] = byte(s.byteAt(off + i))
	}
	if whole := (n - i) &^ 7; whole > 0 {
		s.words.putLE(out[i:], (off+i)>>3, (off+i+whole)>>3)
		i += whole
	}
	for ; i < n; i++ {
		out[i] = byte(s.byteAt(off + i))
	}
	return out
}

// write stores data at byte off.
func (s *rbcSub) write(off uint64, data []byte) {
	n := uint64(len(data))
	i := uint64(0)
	for ; i < n && (off+i)&7 != 0; i++ {
		s.setByte(off+i, uint64(data[i]))
	}
	if whole := (n - i) &^ 7; whole > 0 {
		s.words.setLE((off+i)>>3, (off+i+whole)>>3, data[i:])
		i += whole
	}
	for ; i < n; i++ {
		s.setByte(off+i, uint64(data[i]))
	}
}
