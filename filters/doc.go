// Package filters holds Rookery's probabilistic membership filters: Bloom, scalable
// Bloom, counting Bloom (standard and d-left layouts), cuckoo filters, and
// windowed Bloom and cuckoo filters whose items age out.
//
// Everything here is a pure, deterministic data structure: no goroutines, locks,
// clocks, global state or math/rand. The same operations applied to two instances
// leave byte-identical encodings, because every replica of a Rookery cluster applies
// the same Raft log to its own copy and must end in the same state. Callers serialise
// access; readers may share a filter only while nothing mutates it.
//
// # Hashing
//
// Each item is hashed once with 128-bit murmur3 (Digest). Where a structure needs
// several positions it derives them by Kirsch–Mitzenmacher double hashing,
// g_i = h1 + i*h2, which keeps the false-positive rate of k independent hashes.
// Positions are mapped onto tables of any size with Lemire's multiply-shift, so no
// structure has to round its size up to a power of two.
//
// # Bloom filters
//
// A classic Bloom filter of m bits and k hash functions holding n items has a
// false-positive probability of about (1 - e^(-kn/m))^k. For a target p the optimum is
// m = -n ln p / (ln 2)^2 bits and k = (m/n) ln 2 hashes: 9.6 bits per item at 1%.
// Bloom here uses a blocked layout (Putze, Sanders, Singler, "Cache-, hash- and
// space-efficient Bloom filters", 2007): an item's k bits all fall into one 512-bit
// block, a single cache line, so a lookup costs one cache miss instead of k. Blocks
// fill unevenly, which raises the false-positive rate for a given m, so the size is
// computed from the blocked layout's own false-positive formula until the target is
// met: a Poisson mixture over block loads, exact for k uniform positions per item
// (the familiar (1-e^(-kj/B))^k per block is a few percent optimistic at k >= 9).
// About 3% more bits than the classic optimum at 1%, 8% at 0.1%. Inside a block
// the positions are multiplicative, the top 9 bits of H2*C^i: double hashing's
// arithmetic progressions overlap in runs within 512 bits and measured 1.5x the
// target rate at 0.1%. The classic layout is used when blocking would cost more
// than a quarter more memory (small filters, and rates below about 5e-6).
//
// A Scalable Bloom filter (Almeida et al., "Scalable Bloom Filters", 2007) chains
// Blooms with RedisBloom's rules: the first gets half the requested rate; when the
// newest has taken its capacity of new items, a new one is added with expansion
// times the capacity and half the error rate, so the compound error,
// p/2 + p/4 + ..., stays below the target. Only the newest takes items, and an item
// any sub-filter already reports is not added again.
//
// RBChain is RedisBloom's own scalable Bloom filter, bit for bit, for filters
// migrated from Redis: classic links whose k positions (a + i*b) mod m come from
// MurmurHash64A, sized with RedisBloom's formulas, with its dump format, so that
// a BF.SCANDUMP taken from RedisBloom loads here and answers as it did there, and
// dumps back byte for byte (DESIGN.md).
//
// # Counting Bloom filters
//
// Counting replaces each bit of a Bloom filter by a small counter so that items can
// be deleted: an add increments the item's k counters, a delete decrements them,
// and Count reports the smallest, an upper bound of the item's multiplicity. It is
// sized like a classic Bloom filter, m = -n ln p / (ln 2)^2 counters and
// k = round((m/n) ln 2), with 4-bit counters packed 16 to a word (8-bit on request):
// 38 bits per item at 1%. At capacity a counter's value is about Poisson with mean
// ln 2, so a 4-bit counter overflows with probability near 1e-16 (Fan et al.,
// "Summary Cache", 2000). A counter that does reach its maximum stays there and is
// never decremented: it has lost count of the items sharing it, and staying high
// trades a false positive for never producing a false negative.
//
// DLeft is the d-left counting Bloom filter of Bonomi et al. ("An Improved
// Construction for Counting Bloom Filters", 2006). An item's true fingerprint is
// F = (b, rem) with b < B and rem < 2^r; sub-table t (of d = 4) stores it as
// remainder rem in bucket (b + g_t(rem)) mod B, an invertible map, and a bucket
// holds h = 8 cells of (remainder, 4- or 8-bit counter). An add increments the cell
// already holding F, or takes a free cell in the least loaded of the d buckets,
// ties to the left. Since each map is invertible a cell stands for exactly one F, so
// deletes never touch another fingerprint's cell, and an absent item tests positive
// only when its F equals a stored one: the false-positive rate is
// n / (B 2^r) = d h load / 2^r. Sizing fixes the load at capacity to 6 items per
// 8-cell bucket (75%), then takes the r (and B) that meets p in the fewest bits; at
// 1% that is r = 12, 16-bit cells, 21 bits per item (56% of Counting) and a rate of
// 0.6%. Choosing the least loaded of d buckets keeps loads so even (Vöcking, "How
// asymmetry helps load balancing", 2003) that the first insert finding all its
// buckets full comes only at about 1.2 times capacity, a 90% load. Such an insert
// sets an overflow bit on its first-table bucket, one bit per bucket, that keeps it
// (and anything sharing that bucket) positive for good, like a saturated counter.
//
// # Cuckoo filters
//
// Cuckoo (Fan et al., "Cuckoo Filter: Practically Better Than Bloom", 2014) stores
// an f-bit fingerprint (8, 12 or 16 bits; 0 marks an empty slot) of each item in
// one of two buckets of b slots, i1 = h(x) and i2 = (h(fp) - i1) mod m, which is
// its own inverse for any bucket count m, so a filter gets ceil(capacity/b)
// buckets and no power-of-two rounding. A lookup compares both buckets; a bucket of
// at most 64 bits is one word, searched with SWAR tricks instead of a loop over its
// slots. Full, a filter with b slots per bucket has a false-positive rate of about
// 2b/2^f. An insert that finds both buckets full first looks one step ahead: can
// a fingerprint in them move to a free slot of its own other bucket? Those
// buckets are loaded together, so the look-ahead costs about one cache miss.
// Failing that it evicts a victim to its alternate bucket and repeats; victims
// are chosen from the item's hash and the kick number, so every replica evicts
// the same ones. A failed insert undoes its kicks and leaves the filter exactly
// as it was. With four slots per bucket and 500 kicks, inserts first fail at
// about 97% of the slots; with RedisBloom's two slots and 20 kicks, at 65-75%.
//
// When full, a filter with an expansion factor E adds a sub-filter with E^j times
// the first one's buckets (at most 32 sub-filters), as RedisBloom does. Its bucket
// index is a coarse part, chosen as in the first sub-filter, and a fine part whose
// alternate is an XOR, so an older sub-filter's bucket pair is a newer one's with
// the fine bits dropped. Items sharing a pair in a newer sub-filter therefore share
// it in every older one, which makes deleting newest first safe: the copy removed
// may be another item's, but the deleted item's own copy then lies where the
// other item looks. Deleting an item that was never added is not safe in any
// cuckoo filter.
//
// RBCuckoo is RedisBloom's own cuckoo filter, byte for byte, so that its
// CF.SCANDUMP dumps load here and answer as they did there: MurmurHash64A, a
// one-byte fingerprint h%255+1, power-of-two bucket counts, alternate index
// i ^ fp*0x5bd1e995, RedisBloom's eviction order and rollback, and deletes
// that compact the filter once they pass a tenth of its items (DESIGN.md,
// "RedisBloom's cuckoo filter").
//
// # Windowed filters
//
// WindowBloom and WindowCuckoo forget: an item answers present for a window
// of time (or of insertions) after it was added, and absent, but for false
// positives, from a slack of about a seventh of the window later. Both keep
// eight generations, each a seventh of the window; an item is held by the
// generation current when it was added, and a generation retires when the
// eighth after it begins. A lookup matches if any live generation does, so
// each generation is sized for p/8: with the eighth generation of slack, a
// windowed Bloom filter takes 1.75 times a plain Bloom filter's bits at 1%
// and 1.6 times at 0.1%. WindowBloom keeps generation g in bit g mod 8 of
// every position byte of a 512-byte superblock, so a lookup reads one
// superblock, and a tag per superblock makes retiring a generation write
// nothing. WindowCuckoo tags each fingerprint with its generation, so deletes
// and counts stay exact inside the window. Time comes from the caller
// (Advance); nothing here reads a clock (DESIGN.md, "Windowed filters").
//
// # Encoding
//
// Every kind encodes to the same container: a checksummed, versioned header carrying
// the kind's parameters, then its arrays of 64-bit words, then a CRC-32C. Encode and
// Decode stream; DumpChunk and LoadChunk move a filter in pieces for SCANDUMP and
// LOADCHUNK. Decoding never panics and never allocates far beyond what the input
// actually holds.
//
// A payload from outside, decoded or loaded chunk by chunk, must agree with the
// counters in its header: a cuckoo filter must hold exactly as many fingerprints as
// its item count, a Bloom filter's set bits must be ones its items could have set,
// and so on (DESIGN.md lists the rules). Checksums only catch accidents, since a
// client can compute them; these rules are what keep a forged dump from driving a
// counter below zero. Every counter saturates or is checked rather than wrap.
package filters
