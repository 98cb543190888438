package filters

import (
	"math/bits"

	"github.com/twmb/murmur3"
)

// Digest is the 128-bit murmur3 hash (seed 0) of one item. Every position a filter
// probes derives from it, so an item is hashed exactly once per operation, and a
// caller that touches several filters (a scalable Bloom's sub-filters, a cuckoo
// filter's chain) hashes once and passes the Digest down.
//
// The hash is part of the replicated state: changing it changes every encoding and
// makes old snapshots unreadable. testdata/hash_golden.txt pins it.
type Digest struct {
	H1, H2 uint64
}

// Hash returns the Digest of item.
func Hash(item []byte) Digest {
	h1, h2 := murmur3.Sum128(item)
	return Digest{H1: h1, H2: h2}
}

// HashString returns the Digest of s without copying it.
func HashString(s string) Digest {
	h1, h2 := murmur3.StringSum128(s)
	return Digest{H1: h1, H2: h2}
}

// probe returns g_i = h1 + i*h2, the i-th Kirsch–Mitzenmacher double hash
// ("Less hashing, same performance", 2006).
func (d Digest) probe(i uint64) uint64 {
	return d.H1 + i*d.H2
}

// reduce maps x uniformly onto [0, n) without a division (Lemire's multiply-shift;
// "Fast random integer generation in an interval", 2019). It uses the high bits of
// x, so callers feed it well-mixed values.
func reduce(x, n uint64) uint64 {
	hi, _ := bits.Mul64(x, n)
	return hi
}

// mix64 is murmur3's 64-bit finaliser: a bijection that spreads every input bit
// over the output. Cuckoo filters use it to hash fingerprints.
func mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}
